import { beforeAll, describe, expect, it } from 'vitest';
import { VersionConflictError } from '../../../functions/core/errors.ts';
import { nextNodeRecord, recordedContent } from '../../../functions/core/node-record.ts';
import type { Log } from '../../../functions/core/ports.ts';
import {
  MAX_RECORD_ATTEMPTS,
  NodeLease,
  retryLostRaces,
  writeNextVersion,
} from '../../../functions/services/node-lease.ts';
import { nodeRecordFixture } from '../../fixtures/node-records.ts';
import { createTestNodeTable, type TestNodeTable } from '../../support/node-table.ts';

const NOW = 1_700_000_100_000;
const quiet: Log = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} };

describe('the one lease lifecycle, on DynamoDB Local', () => {
  let table: TestNodeTable;
  const holder = (invocationId: string) => ({
    store: table.store,
    clock: () => NOW,
    log: quiet,
    invocationId,
    settings: { leaseDurationMs: 60_000 },
  });
  beforeAll(async () => {
    table = await createTestNodeTable();
  });

  it('claims, checkpoints and releases: one version per write, the lease held until the release', async () => {
    const base = nodeRecordFixture({ instanceId: 'i-0000000000000a001' });
    await table.store.put(base, undefined);
    const content = recordedContent(base);

    const lease = await NodeLease.claim(base, content, holder('first'));
    expect(await table.store.get(base.instanceId)).toMatchObject({
      version: 2,
      lease: { holder: 'first', expiresAtEpochMs: NOW + 60_000 },
    });
    await lease.checkpoint({ ...content, enis: base.enis.slice(0, 1) });
    expect(lease.record).toMatchObject({ version: 3, lease: { holder: 'first' } });
    expect(lease.nextVersion).toBe(4);

    const released = await lease.release(content);
    const stored = await table.store.get(base.instanceId);
    expect(stored).toEqual(released);
    expect(stored?.version).toBe(4);
    expect(stored?.lease).toBeUndefined();
  });

  it('of two invocations claiming the same version, only one holds the node', async () => {
    const base = nodeRecordFixture({ instanceId: 'i-0000000000000a002' });
    await table.store.put(base, undefined);
    const claims = await Promise.allSettled([
      NodeLease.claim(base, recordedContent(base), holder('first')),
      NodeLease.claim(base, recordedContent(base), holder('second')),
    ]);
    expect(claims.filter((claim) => claim.status === 'fulfilled')).toHaveLength(1);
    const lost = claims.find((claim) => claim.status === 'rejected');
    expect(lost?.status === 'rejected' ? lost.reason : undefined).toBeInstanceOf(VersionConflictError);
  });

  it('re-runs an attempt that lost a race, and backs off when the winner holds a claim', async () => {
    const base = nodeRecordFixture({ instanceId: 'i-0000000000000a003' });
    await table.store.put(base, undefined);
    // Attempt 1 loses to a plain write; attempt 2 loses to another invocation's claim.
    const attempts: number[] = [];
    const outcome = await retryLostRaces(
      base.instanceId,
      async (attempt) => {
        attempts.push(attempt);
        const read = await table.store.get(base.instanceId);
        if (attempt === 1) await writeNextVersion(read, recordedContent(base), holder('other'));
        if (attempt === 2) await NodeLease.claim(read, recordedContent(base), holder('other'));
        await writeNextVersion(read, recordedContent(base), holder('me'));
        return 'wrote';
      },
      { holder: holder('me'), busy: (leaseHolder) => `busy:${leaseHolder}` },
    );
    expect(attempts).toEqual([1, 2]);
    expect(outcome).toBe('busy:other');
  });

  it(`throws the conflict after ${MAX_RECORD_ATTEMPTS} lost attempts`, async () => {
    const base = nodeRecordFixture({ instanceId: 'i-0000000000000a004' });
    await table.store.put(base, undefined);
    let attempts = 0;
    const run = retryLostRaces(base.instanceId, async () => {
      attempts++;
      const read = await table.store.get(base.instanceId);
      await table.store.put(nextNodeRecord(read, recordedContent(base), NOW), read?.version);
      await table.store.put(nextNodeRecord(read, recordedContent(base), NOW), read?.version);
    });
    await expect(run).rejects.toBeInstanceOf(VersionConflictError);
    expect(attempts).toBe(MAX_RECORD_ATTEMPTS);
  });

  it('a lifecycle write through nextNodeRecord keeps what its writer does not own', async () => {
    const base = nodeRecordFixture({
      instanceId: 'i-0000000000000a005',
      excessMarks: { '10.0.17.11': { sinceEpochMs: NOW - 5 } },
      agentProtocol: 'crd',
      agentProtocolSinceEpochMs: NOW - 50,
      reconciledInTable: 'nodes@1',
    });
    const retired = nextNodeRecord(
      base,
      { ...recordedContent(base), lifecycle: 'retired', expiresAtEpochSeconds: 42 },
      NOW,
    );
    expect(retired).toEqual({
      ...base,
      version: 2,
      lifecycle: 'retired',
      expiresAtEpochSeconds: 42,
      updatedAtEpochMs: NOW,
    });
  });
});
