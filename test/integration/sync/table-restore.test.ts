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
import { type KubernetesUnderTest, startKubernetes } from '../../support/kubernetes.ts';
import { createTestNodeTable, type TestNodeTable } from '../../support/node-table.ts';
import {
  expectInvariantsAtEveryVersion,
  freshNode,
  putRecord,
  type SyncTestEnvironment,
  startSyncEnvironment,
  tableGeneration,
} from './support.ts';

/**
 * A point-in-time restore (or a redeploy after `cdk destroy`) gives the stack a NEW table whose
 * records start over at lower versions than the CiliumNodes already show, and whose items are as
 * they were at the restore point: older than EC2, which may have assigned IPs since that pods now
 * hold. The sync, deployed against the new table (`eni-ipam:existingTableName`), must adopt the
 * nodes from it without ever dropping such an IP from `spec.ipam.pool`: it publishes a record only
 * once the allocator has reconciled it with EC2 in the new table (the record's stamp names the new
 * table), and a sync still running against the old table never writes over the new table's claim.
 */

let original: TestNodeTable;
let restored: TestNodeTable;
let kubernetes: KubernetesUnderTest;
let env: SyncTestEnvironment;
const nodes = [freshNode(), freshNode()];

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
const recordAt = (
  node: { instanceId: string; nodeName: string },
  version: number,
  ips: number,
  reconciledInTable?: string,
): NodeRecord =>
  nodeRecordFixture({
    ...node,
    version,
    enis: [eniFixture(0, 0), eniFixture(1, ips)],
    ...(reconciledInTable === undefined ? {} : { reconciledInTable }),
  });

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

const poolOf = async (name: string) =>
  Object.keys(((await env.k8s.getCiliumNode(name)) as CiliumNode | undefined)?.spec?.ipam?.pool ?? {}).sort();

beforeAll(async () => {
  [original, kubernetes] = await Promise.all([createTestNodeTable(), startKubernetes()]);
  env = await startSyncEnvironment(kubernetes, original);
  restored = await createTestNodeTable();
});
afterAll(async () => {
  await kubernetes?.close();
});

describe('a table restored to a point in time, under a new name', () => {
  it('keeps every IP of the pool (pods hold them) until the allocator has reconciled the restored record with EC2', async () => {
    const oldGeneration = await tableGeneration(original);
    const newGeneration = await tableGeneration(restored);
    expect(newGeneration).toMatch(new RegExp(`^${restored.tableName}@\\d{4}-\\d\\d-\\d\\dT`));
    for (const node of nodes) {
      for (let version = 1; version <= 6; version++)
        await putRecord(original, recordAt(node, version, version));
    }
    const before = await (await importHandler(original.tableName))({ all: true });
    expect(before).toMatchObject({ failed: [] });
    const published = new Map<string, string[]>();
    for (const node of nodes) {
      expect((await env.k8s.getCiliumNode(node.nodeName))?.metadata.annotations).toMatchObject({
        [RECORD_VERSION_ANNOTATION]: '6',
        [RECORD_TABLE_ANNOTATION]: oldGeneration,
      });
      published.set(node.nodeName, await poolOf(node.nodeName));
      expect(await poolOf(node.nodeName)).toHaveLength(6);
    }
    const versionsBefore = new Map<string, number>();
    for (const node of nodes)
      versionsBefore.set(node.nodeName, (await env.k8s.history(node.nodeName)).length);

    // Restored to the time of version 2 (2 IPs; EC2 and the pool have 6 since): the item keeps the
    // old table's stamp. The sync from the new table waits.
    for (const node of nodes) await restoreInto(restored, recordAt(node, 2, 2, oldGeneration));
    const waiting = await (await importHandler(restored.tableName))({ all: true });
    expect(waiting).toMatchObject({ nodes: 2, failed: [], writes: 0, outcomes: { unreconciled: 2 } });

    // The allocator re-observes EC2 for the restored table (the sweep does so for every
    // unreconciled node): version 3, stamped with the new table, holds all 6 IPs.
    for (const node of nodes) await restored.store.put(recordAt(node, 3, 6, newGeneration), 2);
    const after = await (await importHandler(restored.tableName))({ all: true });
    expect(after).toMatchObject({ nodes: 2, failed: [], outcomes: { written: 2 } });
    for (const node of nodes) {
      const cn = (await env.k8s.getCiliumNode(node.nodeName)) as CiliumNode | undefined;
      expect(cn?.metadata.annotations).toMatchObject({
        [RECORD_VERSION_ANNOTATION]: '3',
        [RECORD_TABLE_ANNOTATION]: newGeneration,
      });
      expect(cn?.spec?.ipam?.pool).toEqual(desiredPool(recordAt(node, 3, 6)));
      // Not one CiliumNode version since the restore lacks an IP the pool had: none was dropped.
      for (const entry of (await env.k8s.history(node.nodeName)).slice(versionsBefore.get(node.nodeName))) {
        const pool = Object.keys((entry.object as unknown as CiliumNode).spec?.ipam?.pool ?? {});
        expect(published.get(node.nodeName)?.filter((ip) => !pool.includes(ip))).toEqual([]);
      }
      await expectInvariantsAtEveryVersion(env.k8s, node.nodeName, node.instanceId);
    }

    // And it goes on: the next record version of the restored table is published too.
    const first = nodes[0] as { instanceId: string; nodeName: string };
    await restored.store.put(recordAt(first, 4, 7, newGeneration), 3);
    await (await importHandler(restored.tableName))({ instanceId: first.instanceId });
    expect(
      (await env.k8s.getCiliumNode(first.nodeName))?.metadata.annotations?.[RECORD_VERSION_ANNOTATION],
    ).toBe('4');
  });

  it('never lets a sync still running against the older table write over what the newer one published', async () => {
    const first = nodes[0] as { instanceId: string; nodeName: string };
    const historyBefore = (await env.k8s.history(first.nodeName)).length;
    const poolBefore = await poolOf(first.nodeName);
    // The old table's record (version 6, 6 IPs) lacks the IP the new deployment published since.
    const old = await (await importHandler(original.tableName))({ instanceId: first.instanceId });
    expect(old).toMatchObject({ outcome: 'superseded', writes: 0 });
    const all = await (await importHandler(original.tableName))({ all: true });
    expect(all).toMatchObject({ writes: 0, outcomes: { superseded: 2 } });
    expect(await env.k8s.history(first.nodeName)).toHaveLength(historyBefore);
    expect(await poolOf(first.nodeName)).toEqual(poolBefore);
  });
});
