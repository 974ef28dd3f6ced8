import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import type { NodeRecord } from '../../../functions/core/model.ts';
import { syncNode } from '../../../functions/services/sync-node.ts';
import { describeCiliumNode, describeRecord, inspectNode, parseInspectArgs } from '../../../infra/inspect.ts';
import { eniFixture, nodeRecordFixture } from '../../fixtures/node-records.ts';
import { type KubernetesUnderTest, startKubernetes } from '../../support/kubernetes.ts';
import {
  freshNode,
  putRecord,
  type SyncTestEnvironment,
  startSyncEnvironment,
  tableGeneration,
} from '../sync/support.ts';

/** `npm run inspect`: one node's record, lease, last error and CiliumNode, read from the real stores. */

let kubernetes: KubernetesUnderTest;
let env: SyncTestEnvironment;
beforeAll(async () => {
  kubernetes = await startKubernetes();
  env = await startSyncEnvironment(kubernetes);
});
afterAll(async () => {
  await kubernetes?.close();
});

const NOW = 1_800_000_000_000;
const recordOf = (node: { instanceId: string; nodeName: string }, overrides: Partial<NodeRecord> = {}) =>
  nodeRecordFixture({
    ...node,
    version: 1,
    enis: [eniFixture(0, 0), eniFixture(1, 3)],
    ...overrides,
  });

describe('npm run inspect', () => {
  it('shows the record, the lease, the last error and the CiliumNode side by side, read from the stores', async () => {
    const node = freshNode();
    await putRecord(env.table, recordOf(node));
    await syncNode(node.instanceId, { ...env.deps, tableGeneration: () => tableGeneration(env.table) });
    await putRecord(
      env.table,
      recordOf(node, {
        version: 2,
        lease: { holder: 'req-7', expiresAtEpochMs: Date.now() + 60_000 },
        lastError: {
          code: 'InsufficientFreeAddressesInSubnet',
          message: 'subnet full',
          atEpochMs: Date.now(),
        },
      }),
    );
    vi.stubEnv('KUBECONFIG', env.kubeconfigPath);
    vi.stubEnv('AWS_ENDPOINT_URL_DYNAMODB', inject('dynamoDbEndpoint'));
    try {
      const view = await inspectNode(
        parseInspectArgs(['--instance', node.instanceId, '--table', env.table.tableName]),
      );
      const text = [...describeRecord(view), ...describeCiliumNode(view)].join('\n');
      expect(text).toContain(`record: version 2, active, node ${node.nodeName}`);
      expect(text).toMatch(/lease: held by req-7 for \d+ s more/);
      expect(text).toContain('last error: InsufficientFreeAddressesInSubnet: subnet full');
      expect(text).toContain(
        `ciliumnode: ${node.nodeName}, record-version 1 (table ${await tableGeneration(env.table)}), ipam.cilium.io/ignore=true`,
      );
      expect(text).toContain('pool 3 IPs, status 2 ENIs');
      expect(text).toContain(
        `behind: the CiliumNode shows version 1, the record is at 2 (npm run resync -- --instance ${node.instanceId})`,
      );
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it.each([
    {
      case: 'no record',
      view: { record: undefined, ciliumNode: undefined },
      expected: ['record: none in T (the allocator has not served this instance)', 'ciliumnode: none'],
    },
    {
      case: 'an expired lease and no error',
      view: {
        record: recordOf(freshNode(), { lease: { holder: 'old', expiresAtEpochMs: NOW - 5_000 } }),
        ciliumNode: undefined,
      },
      expected: ['lease: expired 5 s ago (held by old)', 'last error: none', 'ciliumnode: none'],
    },
  ])('describes $case', ({ view, expected }) => {
    const full = { instanceId: 'i-0123456789abcdef0', table: 'T', nowEpochMs: NOW, ...view };
    const lines = [...describeRecord(full), ...describeCiliumNode(full)];
    for (const line of expected) expect(lines).toContain(line);
  });

  it('refuses a malformed instance id', () => {
    expect(() => parseInspectArgs(['--instance', 'node-1'])).toThrow(/--instance expects an instance id/);
  });
});
