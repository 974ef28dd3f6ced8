import { KubeConfig, Watch } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  type CiliumNode,
  type CiliumNodePort,
  IPAM_IGNORE_ANNOTATION,
  RECORD_VERSION_ANNOTATION,
} from '../../../functions/core/ciliumnode.ts';
import { desiredPool, desiredStatusEnis } from '../../../functions/core/ciliumnode-render.ts';
import { CrdFieldDroppedError } from '../../../functions/core/errors.ts';
import type { NodeRecord } from '../../../functions/core/model.ts';
import type { NodeRecordStore } from '../../../functions/core/ports.ts';
import { appliedRecordVersion } from '../../../functions/core/table-generation.ts';
import { syncAll } from '../../../functions/services/sync-all.ts';
import { syncNode } from '../../../functions/services/sync-node.ts';
import { eniFixture, nodeRecordFixture } from '../../fixtures/node-records.ts';
import { checkStatusCoversSpec } from '../../support/invariants.ts';
import { type KubernetesUnderTest, startKubernetes } from '../../support/kubernetes.ts';
import { createTestNodeTable, type TestNodeTable } from '../../support/node-table.ts';
import {
  expectInvariantsAtEveryVersion,
  freshNode,
  putRecord,
  type SyncTestEnvironment,
  startSyncEnvironment,
  writeRequests,
} from './support.ts';

let table: TestNodeTable;
/** The real kube-apiserver (faults armed at its proxy), shared by the file's tests. */
let kubernetes: KubernetesUnderTest;
let env: SyncTestEnvironment;
let node: { instanceId: string; nodeName: string };

beforeAll(async () => {
  [table, kubernetes] = await Promise.all([createTestNodeTable(), startKubernetes()]);
});
afterAll(async () => {
  await kubernetes?.close();
});
beforeEach(async () => {
  env = await startSyncEnvironment(kubernetes, table);
  node = freshNode();
});

const eth0 = eniFixture(0, 0);

function recordAt(
  version: number,
  enis = [eth0, eniFixture(1, 3)],
  overrides: Partial<NodeRecord> = {},
): NodeRecord {
  return nodeRecordFixture({ ...node, version, enis, ...overrides });
}

/** The CiliumNode an agent creates at start (spec only; it never writes the pool). */
function agentCiliumNode(overrides: Partial<CiliumNode['spec']> = {}): CiliumNode {
  return {
    apiVersion: 'cilium.io/v2',
    kind: 'CiliumNode',
    metadata: { name: node.nodeName },
    spec: {
      'instance-id': node.instanceId,
      eni: { 'instance-type': 'm5.large', 'first-interface-index': 0, 'delete-on-termination': true },
      ipam: { 'pre-allocate': 8 },
      ...overrides,
    },
  };
}

async function current(): Promise<CiliumNode | undefined> {
  return await env.deps.ciliumNodes.get(node.nodeName);
}

function expectPublished(cn: CiliumNode | undefined, record: NodeRecord): void {
  expect(cn?.spec?.ipam?.pool).toEqual(desiredPool(record));
  expect(cn?.status?.eni?.enis).toEqual(desiredStatusEnis(record));
  expect(cn && appliedRecordVersion(cn)).toBe(record.version);
}

describe('syncNode against DynamoDB Local and kube-apiserver', () => {
  it('creates a missing CiliumNode with an empty pool, fills it, grows and shrinks it; invariant 1 at every version', async () => {
    await putRecord(table, recordAt(1));
    expect(await syncNode(node.instanceId, env.deps)).toMatchObject({ outcome: 'written', writes: 3 });
    const [created] = await env.k8s.history(node.nodeName);
    expect(created?.type).toBe('ADDED');
    expect(created?.object.spec).toEqual({ 'instance-id': node.instanceId, ipam: { pool: {} } });
    expect(created?.object.metadata.annotations).toEqual({
      [RECORD_VERSION_ANNOTATION]: '1',
      [IPAM_IGNORE_ANNOTATION]: 'true',
    });
    expectPublished(await current(), recordAt(1));

    const grown = recordAt(2, [eth0, eniFixture(1, 3), eniFixture(2, 5, { prefixes: ['10.0.18.32/28'] })]);
    await putRecord(table, grown);
    expect(await syncNode(node.instanceId, env.deps)).toMatchObject({ outcome: 'written', writes: 2 });
    expectPublished(await current(), grown);

    const shrunk = recordAt(3, [eth0, eniFixture(1, 1)]);
    await putRecord(table, shrunk);
    expect(await syncNode(node.instanceId, env.deps)).toMatchObject({ outcome: 'written', writes: 2 });
    expectPublished(await current(), shrunk);

    const versions = await expectInvariantsAtEveryVersion(env.k8s, node.nodeName, node.instanceId);
    expect(versions).toBe(7); // create, status, spec; status, spec; spec-claim, status
  });

  it('a watcher sees only versions where status covers spec, across concurrent syncs of a growing and shrinking node', async () => {
    const kubeConfig = new KubeConfig();
    // The agent's own view, with an identity that may watch (the sync's may not).
    kubeConfig.loadFromString(env.k8s.kubeconfigYaml());
    const seen: CiliumNode[] = [];
    const watching = await new Watch(kubeConfig).watch(
      '/apis/cilium.io/v2/ciliumnodes',
      {},
      (type, object: CiliumNode) => {
        if (type !== 'BOOKMARK' && object.metadata.name === node.nodeName) seen.push(object);
      },
      () => {},
    );
    try {
      const versions = [
        recordAt(1),
        recordAt(2, [eth0, eniFixture(1, 3), eniFixture(2, 4)]),
        recordAt(3, [eth0, eniFixture(2, 2), eniFixture(3, 1, { prefixes: ['10.0.19.16/28'] })]),
        recordAt(4, [eth0, eniFixture(3, 5)]),
      ];
      let conflicts = 0;
      for (const version of versions) {
        await putRecord(table, version);
        // Three syncs of the same node race (stream shards, retries, a manual resync).
        const results = await Promise.all([1, 2, 3].map(() => syncNode(node.instanceId, env.deps)));
        for (const result of results) expect(['written', 'in-sync']).toContain(result.outcome);
        conflicts += results.reduce((sum, result) => sum + result.conflicts, 0);
      }
      // The point of the test: the syncs really raced (each round typically loses several writes).
      expect(conflicts).toBeGreaterThan(0);
      expectPublished(await current(), versions[3] as NodeRecord);
      const stored = (await env.k8s.history(node.nodeName)).length;
      await expect.poll(() => seen.length).toBe(stored);
      for (const object of seen) {
        expect(checkStatusCoversSpec(object), `resourceVersion ${object.metadata.resourceVersion}`).toEqual(
          [],
        );
      }
    } finally {
      watching.abort();
    }
  });

  it('finds everything matching and writes nothing (one GET, no write)', async () => {
    await putRecord(table, recordAt(1));
    await syncNode(node.instanceId, env.deps);
    await env.k8s.resetRequests();
    expect(await syncNode(node.instanceId, env.deps)).toMatchObject({ outcome: 'in-sync', writes: 0 });
    expect(await env.k8s.requests()).toHaveLength(1);
    expect(await writeRequests(env.k8s)).toBe(0);
  });

  it('never goes backwards: a sync still holding an older record version is a no-op', async () => {
    await putRecord(table, recordAt(1));
    await putRecord(table, recordAt(2, [eth0, eniFixture(1, 6)]));
    await syncNode(node.instanceId, env.deps);
    const before = await current();
    const staleStore: Pick<NodeRecordStore, 'get' | 'listPage'> = {
      get: async () => recordAt(1),
      listPage: (token) => table.store.listPage(token),
    };
    await env.k8s.resetRequests();
    expect(await syncNode(node.instanceId, { ...env.deps, store: staleStore })).toMatchObject({
      outcome: 'stale',
      writes: 0,
    });
    expect(await writeRequests(env.k8s)).toBe(0);
    expect(await current()).toEqual(before);
  });

  it('never goes backwards even after an agent restart wiped the annotation: records are read after the node', async () => {
    await putRecord(table, recordAt(1));
    await syncNode(node.instanceId, env.deps);
    const newer = recordAt(2, [eth0, eniFixture(1, 3), eniFixture(2, 2)]);
    await putRecord(table, newer);
    await syncNode(node.instanceId, env.deps);
    // The agent restarts: cilium replaces the CiliumNode's annotations with the Node's.
    await env.k8s.putCiliumNode({ ...(await current()), metadata: { name: node.nodeName, annotations: {} } });
    // A slow sync read version 1 before version 2 existed; every later read is fresh.
    let reads = 0;
    const slowStore: Pick<NodeRecordStore, 'get' | 'listPage'> = {
      get: async (instanceId) => (reads++ === 0 ? recordAt(1) : await table.store.get(instanceId)),
      listPage: (token) => table.store.listPage(token),
    };
    expect(await syncNode(node.instanceId, { ...env.deps, store: slowStore })).toMatchObject({
      outcome: 'written',
      writes: 1,
      recordVersion: 2,
    });
    expectPublished(await current(), newer);
    await expectInvariantsAtEveryVersion(env.k8s, node.nodeName, node.instanceId);
  });

  it('heals a sync whose status landed but whose spec write failed (connection dropped)', async () => {
    await env.deps.ciliumNodes.create(agentCiliumNode());
    await putRecord(table, recordAt(1));
    env.k8s.faults.inject({ match: { verb: 'patch', subresource: 'main' }, kind: 'drop-connection' });
    await expect(syncNode(node.instanceId, env.deps)).rejects.toThrow();
    const halfway = await current();
    expect(halfway?.status?.eni?.enis).toEqual(desiredStatusEnis(recordAt(1)));
    expect(halfway?.spec?.ipam?.pool).toBeUndefined();

    await env.k8s.resetRequests();
    expect(await syncNode(node.instanceId, env.deps)).toMatchObject({ outcome: 'written', writes: 1 });
    expect(await env.k8s.requests({ verb: 'patch', subresource: 'main' })).toHaveLength(1);
    expectPublished(await current(), recordAt(1));
    await expectInvariantsAtEveryVersion(env.k8s, node.nodeName, node.instanceId);
  });

  it('treats a write whose answer was lost as done: the next sync finds everything matching', async () => {
    await env.deps.ciliumNodes.create(agentCiliumNode());
    await putRecord(table, recordAt(1));
    env.k8s.faults.inject({ match: { verb: 'patch', subresource: 'main' }, kind: 'drop-after-apply' });
    await expect(syncNode(node.instanceId, env.deps)).rejects.toThrow();
    expect(await syncNode(node.instanceId, env.deps)).toMatchObject({ outcome: 'in-sync', writes: 0 });
    expectPublished(await current(), recordAt(1));
  });

  it("keeps the agent's status.ipam.used, its release answers and its spec fields", async () => {
    const eni1 = eniFixture(1, 3).id;
    await env.k8s.putCiliumNode({
      ...agentCiliumNode(),
      metadata: { name: node.nodeName, labels: { 'kubernetes.io/hostname': 'h' } },
      status: {
        ipam: {
          used: { '10.0.17.11': { owner: 'kube-system/coredns', resource: eni1 } },
          'release-ips': { '10.0.17.13': 'do-not-release' },
        },
      },
    });
    await putRecord(
      table,
      recordAt(1, undefined, {
        excessMarks: { '10.0.17.13': { sinceEpochMs: 1, state: 'marked-for-release' } },
      }),
    );
    await syncNode(node.instanceId, env.deps);
    const synced = await current();
    expect(synced?.status?.ipam?.used).toEqual({
      '10.0.17.11': { owner: 'kube-system/coredns', resource: eni1 },
    });
    expect(synced?.status?.ipam?.['release-ips']).toEqual({ '10.0.17.13': 'do-not-release' });
    expect(synced?.spec?.eni).toEqual(agentCiliumNode().spec?.eni);
    expect(synced?.spec?.ipam?.['pre-allocate']).toBe(8);
    expect(synced?.metadata.labels).toEqual({ 'kubernetes.io/hostname': 'h' });
  });

  it('retries after a 409 from the server', async () => {
    await env.deps.ciliumNodes.create(agentCiliumNode());
    await putRecord(table, recordAt(1));
    env.k8s.faults.inject({ match: { verb: 'patch', subresource: 'status' }, kind: 'conflict' });
    expect(await syncNode(node.instanceId, env.deps)).toMatchObject({
      outcome: 'written',
      writes: 2,
      conflicts: 1,
    });
    expectPublished(await current(), recordAt(1));
  });

  it('retries when an agent writes between our read and our write (JSON Patch test fails with 422)', async () => {
    await env.deps.ciliumNodes.create(agentCiliumNode());
    await putRecord(table, recordAt(1));
    const eni1 = eniFixture(1, 3).id;
    let interfered = false;
    const racing: CiliumNodePort = {
      ...env.deps.ciliumNodes,
      get: (name) => env.deps.ciliumNodes.get(name),
      create: (object) => env.deps.ciliumNodes.create(object),
      list: () => env.deps.ciliumNodes.list(),
      patchMain: (name, operations) => env.deps.ciliumNodes.patchMain(name, operations),
      patchStatus: async (name, operations) => {
        if (!interfered) {
          interfered = true;
          const agentView = (await env.deps.ciliumNodes.get(name)) as CiliumNode;
          await env.k8s.putCiliumNode({
            ...agentView,
            status: {
              ...agentView.status,
              ipam: { used: { '10.0.17.12': { owner: 'pod', resource: eni1 } } },
            },
          });
        }
        return await env.deps.ciliumNodes.patchStatus(name, operations);
      },
    };
    expect(await syncNode(node.instanceId, { ...env.deps, ciliumNodes: racing })).toMatchObject({
      outcome: 'written',
      writes: 2,
      conflicts: 1,
    });
    const statusPatches = await env.k8s.requests({ verb: 'patch', subresource: 'status' });
    expect(statusPatches.map((request) => request.statusCode)).toEqual([422, 200]);
    const synced = await current();
    expect(synced?.status?.ipam?.used).toEqual({ '10.0.17.12': { owner: 'pod', resource: eni1 } });
    expectPublished(synced, recordAt(1));
  });

  it('never writes a CiliumNode that belongs to another instance, and logs the refusal as an error', async () => {
    await env.deps.ciliumNodes.create(agentCiliumNode({ 'instance-id': 'i-0fffffffffffffff0' }));
    await putRecord(table, recordAt(1));
    await env.k8s.resetRequests();
    expect(await syncNode(node.instanceId, env.deps)).toMatchObject({
      outcome: 'refused-foreign',
      writes: 0,
    });
    expect(await writeRequests(env.k8s)).toBe(0);
    expect(await env.k8s.history(node.nodeName)).toHaveLength(1);
    expect(env.log.errors()).toEqual([
      expect.objectContaining({ fields: expect.objectContaining({ refusedSync: 'refused-foreign' }) }),
    ]);
  });

  it('does nothing for an instance without a record, or with a retired one', async () => {
    expect(await syncNode(node.instanceId, env.deps)).toMatchObject({ outcome: 'no-record', writes: 0 });
    await putRecord(table, recordAt(1, undefined, { lifecycle: 'retired' }));
    expect(await syncNode(node.instanceId, env.deps)).toMatchObject({ outcome: 'retired', writes: 0 });
    expect(await env.k8s.requests()).toHaveLength(0);
  });

  it('gives up with an error when every write keeps losing races', async () => {
    await env.deps.ciliumNodes.create(agentCiliumNode());
    await putRecord(table, recordAt(1));
    env.k8s.faults.inject({
      match: { verb: 'patch' },
      kind: 'conflict',
      times: Number.POSITIVE_INFINITY,
    });
    await expect(syncNode(node.instanceId, { ...env.deps, maxRounds: 4 })).rejects.toThrow(/did not settle/);
  });
});

describe('syncNode in a cluster whose CiliumNode CRD predates ipv6-prefixes', () => {
  it('says so instead of rewriting a status the API server keeps pruning', async () => {
    // The emulator's default CRDs prune with v1.19-dev, which has no ipv6-prefixes.
    const enis = [eth0, eniFixture(1, 3, { ipv6Prefixes: ['2600:1f18:4a01:ab01:1::/80'] })];
    await putRecord(table, recordAt(1, enis));
    await expect(syncNode(node.instanceId, env.deps)).rejects.toBeInstanceOf(CrdFieldDroppedError);
    await expect(syncNode(node.instanceId, env.deps)).rejects.toThrow(
      /dropped status\.eni\.enis\.eni-\w+\.ipv6-prefixes .*cilium 1\.20\.0 or later/,
    );
    // The status it stored still covers the pool, and IPv4 is all there.
    expect(checkStatusCoversSpec((await current()) as CiliumNode)).toEqual([]);
  });
});

describe('syncAll', () => {
  it('syncs every active record of the table, counting outcomes', async () => {
    const localTable = await createTestNodeTable();
    const local = await startSyncEnvironment(kubernetes, localTable);
    const nodes = [freshNode(), freshNode(), freshNode()];
    for (const [index, each] of nodes.entries()) {
      await putRecord(
        localTable,
        nodeRecordFixture({ ...each, version: 1, lifecycle: index === 2 ? 'retired' : 'active' }),
      );
    }
    const summary = await syncAll(local.deps, { concurrency: 2 });
    expect(summary).toEqual({ nodes: 3, writes: 6, outcomes: { written: 2, retired: 1 }, failed: [] });
    for (const each of nodes.slice(0, 2)) {
      expect(await local.deps.ciliumNodes.get(each.nodeName)).toBeDefined();
    }
    expect(await local.deps.ciliumNodes.get(nodes[2]?.nodeName ?? '')).toBeUndefined();
  });

  it('counts a node in sync with its listed record without reading the record again, and still heals one that is not', async () => {
    const localTable = await createTestNodeTable();
    const local = await startSyncEnvironment(kubernetes, localTable);
    const nodes = [freshNode(), freshNode()];
    for (const each of nodes) await putRecord(localTable, nodeRecordFixture({ ...each, version: 1 }));
    await syncAll(local.deps, { concurrency: 2 });
    let gets = 0;
    const store = local.deps.store;
    const counting = {
      ...local.deps,
      store: {
        get: (instanceId: string) => {
          gets++;
          return store.get(instanceId);
        },
        listPage: (token?: string) => store.listPage(token),
      },
    };

    // The steady state: every CiliumNode shows its record's version; no record is read again.
    expect(await syncAll(counting, { concurrency: 2 })).toEqual({
      nodes: 2,
      writes: 0,
      outcomes: { 'in-sync': 2 },
      failed: [],
    });
    expect(gets).toBe(0);

    // A CiliumNode replaced since its record was written: the full sync, from a consistent read.
    const replaced = nodes[0] as (typeof nodes)[number];
    await local.k8s.deleteCiliumNode(replaced.nodeName);
    const healed = await syncAll(counting, { concurrency: 2 });
    expect(healed.outcomes).toEqual({ written: 1, 'in-sync': 1 });
    expect(gets).toBeGreaterThan(0);
    expect(await local.deps.ciliumNodes.get(replaced.nodeName)).toBeDefined();
  });
});
