import { PutItemCommand } from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { nodeTableSchema } from '../../../functions/aws/node-table-schema.ts';
import {
  type CiliumNode,
  RECORD_TABLE_ANNOTATION,
  RECORD_VERSION_ANNOTATION,
} from '../../../functions/core/ciliumnode.ts';
import { desiredPool } from '../../../functions/core/ciliumnode-render.ts';
import type { NodeRecord } from '../../../functions/core/model.ts';
import type { handler as syncHandler } from '../../../functions/sync/index.ts';
import { eniFixture, nodeRecordFixture } from '../../fixtures/node-records.ts';
import { createTestNodeTable, type TestNodeTable } from '../../support/node-table.ts';
import {
  expectInvariantsAtEveryVersion,
  freshNode,
  putRecord,
  type SyncTestEnvironment,
  startSyncEnvironment,
} from './support.ts';

/**
 * A point-in-time restore (or a redeploy after `cdk destroy`) gives the stack a NEW table whose
 * records start over at lower versions than the CiliumNodes already show. The sync, deployed
 * against the new table (`eni-ipam:existingTableName`), must adopt the nodes from it, not leave
 * them frozen at the old table's count.
 */

let original: TestNodeTable;
let env: SyncTestEnvironment;

async function importHandler(tableName: string): Promise<typeof syncHandler> {
  vi.resetModules();
  vi.stubEnv('POWERTOOLS_LOG_LEVEL', 'SILENT');
  vi.stubEnv('TABLE_NAME', tableName);
  vi.stubEnv('KUBECONFIG', env.kubeconfigPath);
  try {
    return (await import('../../../functions/sync/index.ts')).handler;
  } finally {
    vi.unstubAllEnvs();
  }
}

/** The node's record at `version`, its second ENI holding `ips` secondary IPs. */
const recordAt = (node: { instanceId: string; nodeName: string }, version: number, ips: number): NodeRecord =>
  nodeRecordFixture({ ...node, version, enis: [eniFixture(0, 0), eniFixture(1, ips)] });

/** What a restore does: the items as they were, copied into the new table as they are. */
async function restoreInto(table: TestNodeTable, record: NodeRecord): Promise<void> {
  await table.client.send(
    new PutItemCommand({
      TableName: table.tableName,
      Item: marshall(
        { ...record, [nodeTableSchema.schemaVersionAttribute]: nodeTableSchema.recordSchemaVersion },
        { removeUndefinedValues: true },
      ),
    }),
  );
}

beforeAll(async () => {
  original = await createTestNodeTable();
  env = await startSyncEnvironment(original);
});
afterAll(async () => {
  await env.close();
});

describe('a table restored under a new name', () => {
  it('keeps the nodes syncing from the restored records, on top of what the old table published', async () => {
    const nodes = [freshNode(), freshNode()];
    for (const node of nodes) {
      for (let version = 1; version <= 6; version++)
        await putRecord(original, recordAt(node, version, version));
    }
    const before = await (await importHandler(original.tableName))({ all: true });
    expect(before).toMatchObject({ failed: [] });
    for (const node of nodes) {
      expect(env.emulator.store.get(node.nodeName)?.metadata.annotations).toMatchObject({
        [RECORD_VERSION_ANNOTATION]: '6',
        [RECORD_TABLE_ANNOTATION]: original.tableName,
      });
    }

    // Restored to the time of version 2; then the allocator writes version 3 there.
    const restored = await createTestNodeTable();
    for (const node of nodes) {
      await restoreInto(restored, recordAt(node, 2, 2));
      await restored.store.put(recordAt(node, 3, 4), 2);
    }
    const after = await (await importHandler(restored.tableName))({ all: true });
    expect(after).toMatchObject({ nodes: 2, failed: [], outcomes: { written: 2 } });
    for (const node of nodes) {
      const cn = env.emulator.store.get(node.nodeName) as CiliumNode | undefined;
      expect(cn?.metadata.annotations).toMatchObject({
        [RECORD_VERSION_ANNOTATION]: '3',
        [RECORD_TABLE_ANNOTATION]: restored.tableName,
      });
      expect(cn?.spec?.ipam?.pool).toEqual(desiredPool(recordAt(node, 3, 4)));
      expectInvariantsAtEveryVersion(env.emulator, node.nodeName, node.instanceId);
    }

    // And it goes on: the next record version of the restored table is published too.
    await restored.store.put(recordAt(nodes[0] as { instanceId: string; nodeName: string }, 4, 5), 3);
    await (await importHandler(restored.tableName))({ instanceId: nodes[0]?.instanceId });
    expect(
      env.emulator.store.get(nodes[0]?.nodeName as string)?.metadata.annotations?.[RECORD_VERSION_ANNOTATION],
    ).toBe('4');
  });
});
