import { beforeAll, describe, expect, it } from 'vitest';
import { LeaseLostError, VersionConflictError } from '../../../functions/core/errors.ts';
import { nextNodeRecord, recordedContent } from '../../../functions/core/node-record.ts';
import type { Ec2NetworkPort, Log } from '../../../functions/core/ports.ts';
import {
  fencedNetwork,
  type LeaseHolderDependencies,
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

/** The heartbeat's timer, fired by the test: what was scheduled, and when it would fire. */
class ManualWakes {
  private pending: { delayMs: number; wake: () => void; cancelled: boolean }[] = [];
  readonly wakeAfter = (delayMs: number, wake: () => void) => {
    const entry = { delayMs, wake, cancelled: false };
    this.pending.push(entry);
    return () => {
      entry.cancelled = true;
    };
  };
  /** Delays of the wakes still armed. */
  armed(): number[] {
    return this.pending.filter((entry) => !entry.cancelled).map((entry) => entry.delayMs);
  }
  /** Fires every armed wake (as their timers would), then lets the renewals they start land. */
  async fire(): Promise<void> {
    const due = this.pending.filter((entry) => !entry.cancelled);
    this.pending = [];
    for (const entry of due) entry.wake();
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

const LEASE_MS = 15_000;

describe('the short lease, renewed while its holder works (NodeLease heartbeat and fence)', () => {
  let table: TestNodeTable;
  let now: number;
  let wakes: ManualWakes;
  const logs: string[] = [];
  const holder = (invocationId: string): LeaseHolderDependencies => ({
    store: table.store,
    clock: () => now,
    log: { ...quiet, warn: (message) => logs.push(message), info: (message) => logs.push(message) },
    invocationId,
    settings: { leaseDurationMs: LEASE_MS },
    wakeAfter: wakes.wakeAfter,
  });
  /** An EC2 port whose one mutation used here counts its calls. */
  const recordingEc2 = () => {
    const calls: string[] = [];
    const ec2 = {
      assignIps: async (eniId: string) => {
        calls.push(`assign ${eniId}`);
        return { ips: ['10.0.1.9'], prefixes: [] };
      },
      describeInstance: async () => undefined,
    } as unknown as Ec2NetworkPort;
    return { calls, ec2 };
  };
  beforeAll(async () => {
    table = await createTestNodeTable();
  });
  const start = async (instanceId: string) => {
    now = NOW;
    wakes = new ManualWakes();
    const base = nodeRecordFixture({ instanceId });
    await table.store.put(base, undefined);
    return base;
  };

  it('a holder done within the first interval writes its claim and its release, nothing more', async () => {
    const base = await start('i-0000000000000b001');
    const lease = await NodeLease.claim(base, recordedContent(base), holder('quick'));
    expect(wakes.armed()).toEqual([5_000]);
    now += 800;
    const released = await lease.release(recordedContent(base));

    expect(released.version).toBe(3);
    expect(wakes.armed()).toEqual([]);
    expect(lease.renewals).toBe(0);
    expect((await table.store.get(base.instanceId))?.version).toBe(3);
  });

  it('renews once a third of the lease passed without a write, as the next version, and stops at the release', async () => {
    const base = await start('i-0000000000000b002');
    const lease = await NodeLease.claim(base, recordedContent(base), holder('slow'));
    now += 2_000;
    await wakes.fire(); // woken early (the clock says not yet due): no write, armed again
    expect((await table.store.get(base.instanceId))?.version).toBe(2);
    expect(wakes.armed()).toEqual([3_000]);
    now += 3_000;
    await wakes.fire();

    const renewed = await table.store.get(base.instanceId);
    expect(renewed).toMatchObject({
      version: 3,
      lease: { holder: 'slow', expiresAtEpochMs: now + LEASE_MS },
    });
    expect({ ...renewed, version: 2, lease: undefined, updatedAtEpochMs: 0 }).toEqual({
      ...lease.record,
      version: 2,
      lease: undefined,
      updatedAtEpochMs: 0,
    });
    expect(lease.renewals).toBe(1);
    await lease.release(recordedContent(base));
    expect(wakes.armed()).toEqual([]);
    expect(logs).toContain('the node lease was renewed while its holder worked');
  });

  it('a renewal that finds the lease taken stops the holder before its next EC2 mutation', async () => {
    const base = await start('i-0000000000000b003');
    const first = await NodeLease.claim(base, recordedContent(base), holder('paused'));
    // The holder stalls past its lease; another invocation reads the lapsed lease and claims.
    now += LEASE_MS + 1;
    const seen = await table.store.get(base.instanceId);
    const second = await NodeLease.claim(seen, recordedContent(base), holder('next'));
    await wakes.fire();

    const { calls, ec2 } = recordingEc2();
    const fenced = fencedNetwork(ec2, () => first.beforeMutation());
    await expect(fenced.assignIps('eni-1', { ipCount: 1 })).rejects.toBeInstanceOf(LeaseLostError);
    expect(calls).toEqual([]);
    await expect(first.checkpoint(recordedContent(base))).rejects.toBeInstanceOf(VersionConflictError);
    await expect(first.release(recordedContent(base))).rejects.toBeInstanceOf(VersionConflictError);
    expect(await table.store.get(base.instanceId)).toEqual(second.record);
    expect(logs).toContain('another invocation took the node lease; stopping before the next EC2 call');
    expect(
      await fencedNetwork(ec2, () => second.beforeMutation()).assignIps('eni-1', { ipCount: 1 }),
    ).toEqual({
      ips: ['10.0.1.9'],
      prefixes: [],
    });
    expect(calls).toEqual(['assign eni-1']);
    await second.release(recordedContent(base));
  });

  it('a lease with less than a third left is renewed before the mutation starts; reads pass unfenced', async () => {
    const base = await start('i-0000000000000b004');
    const lease = await NodeLease.claim(base, recordedContent(base), holder('late'));
    const { calls, ec2 } = recordingEc2();
    const fenced = fencedNetwork(ec2, () => lease.beforeMutation());
    now += 9_000; // 6 s left: still enough
    await fenced.assignIps('eni-1', { ipCount: 1 });
    expect(lease.record.version).toBe(2);
    now += 2_000; // 4 s left: renewed first (the heartbeat did not fire)
    await fenced.assignIps('eni-1', { ipCount: 1 });
    expect(lease.record).toMatchObject({ version: 3, lease: { expiresAtEpochMs: now + LEASE_MS } });
    expect(calls).toHaveLength(2);
    expect(await fenced.describeInstance('i-1')).toBeUndefined();
    await lease.release(recordedContent(base));
  });

  it('a holder whose lease lapsed while nobody took the node writes on, fenced by its version alone', async () => {
    const base = await start('i-0000000000000b005');
    const lease = await NodeLease.claim(base, recordedContent(base), holder('lapsed'));
    now += LEASE_MS + 5_000;
    const { calls, ec2 } = recordingEc2();
    await fencedNetwork(ec2, () => lease.beforeMutation()).assignIps('eni-1', { ipCount: 1 });

    expect(calls).toHaveLength(1);
    expect(await table.store.get(base.instanceId)).toMatchObject({
      version: 3,
      lease: { holder: 'lapsed', expiresAtEpochMs: now + LEASE_MS },
    });
    expect((await lease.release(recordedContent(base))).version).toBe(4);
  });
});
