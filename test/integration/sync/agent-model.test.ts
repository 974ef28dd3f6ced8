import { KubeConfig, Watch } from '@kubernetes/client-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { CiliumNode } from '../../../functions/core/ciliumnode.ts';
import type { NodeRecord } from '../../../functions/core/model.ts';
import { syncNode } from '../../../functions/services/sync-node.ts';
import { eniFixture, nodeRecordFixture } from '../../fixtures/node-records.ts';
import { type AgentObservation, observeAsAgent } from '../../support/cilium-agent-model.ts';
import { type KubernetesUnderTest, startKubernetes } from '../../support/kubernetes.ts';
import { createTestNodeTable, type TestNodeTable } from '../../support/node-table.ts';
import { freshNode, putRecord, type SyncTestEnvironment, startSyncEnvironment } from './support.ts';

/**
 * A model of the cilium agent (pkg/ipam/crd.go) watches the CiliumNode through the real
 * client-node Watch while the sync runs through growth, shrinking, races, out-of-order and
 * duplicated triggers and a failure between the status and the spec write. It must accept every
 * version it sees and allocate every pool IP.
 */

let table: TestNodeTable;
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
const recordAt = (version: number, enis: NodeRecord['enis']) =>
  nodeRecordFixture({
    ...node,
    version,
    enis,
    knobs: { ...nodeRecordFixture().knobs, firstInterfaceIndex: 1 },
  });

async function watchAsAgent(): Promise<{
  observations: AgentObservation[];
  seen: () => number;
  stop: () => void;
}> {
  const kubeConfig = new KubeConfig();
  // The agent's own view, with an identity that may watch (the sync's may not).
  kubeConfig.loadFromString(env.k8s.kubeconfigYaml());
  const observations: AgentObservation[] = [];
  const watching = await new Watch(kubeConfig).watch(
    '/apis/cilium.io/v2/ciliumnodes',
    {},
    (type, object: CiliumNode) => {
      if (type !== 'BOOKMARK' && type !== 'DELETED' && object.metadata.name === node.nodeName) {
        observations.push(observeAsAgent(object));
      }
    },
    () => {},
  );
  return { observations, seen: () => observations.length, stop: () => watching.abort() };
}

describe('the cilium agent model', () => {
  it('rejects what a real agent rejects (so its silence below means something)', () => {
    const base = nodeRecordFixture();
    const missingEni: CiliumNode = {
      metadata: { name: 'n' },
      spec: { ipam: { pool: { '10.0.17.11': { resource: 'eni-gone' } } } },
      status: { eni: { enis: {} } },
    };
    const noPrimaryCidr: CiliumNode = {
      metadata: { name: 'n' },
      status: { eni: { enis: { 'eni-1': { id: 'eni-1', vpc: { id: base.vpc.id } } } } },
    };
    expect(observeAsAgent(missingEni)).toMatchObject({
      accepted: false,
      reason: /unable to find ENI eni-gone/,
    });
    expect(observeAsAgent(noPrimaryCidr)).toMatchObject({ accepted: false, reason: /no VPC primary CIDR/ });
  });

  it('accepts every version and allocates every pool IP through growth, shrinking, races and failures', async () => {
    // The agent's CiliumNode exists before the first record.
    await env.deps.ciliumNodes.create({
      apiVersion: 'cilium.io/v2',
      kind: 'CiliumNode',
      metadata: { name: node.nodeName },
      spec: { 'instance-id': node.instanceId, eni: { 'first-interface-index': 1 } },
    });
    const agent = await watchAsAgent();
    try {
      const versions = [
        recordAt(1, [eth0, eniFixture(1, 8)]),
        recordAt(2, [eth0, eniFixture(1, 9), eniFixture(2, 4)]),
        recordAt(3, [eth0, eniFixture(1, 9), eniFixture(2, 2, { prefixes: ['10.0.18.32/28'] })]),
        recordAt(4, [eth0, eniFixture(2, 6)]),
        recordAt(5, [eth0, eniFixture(2, 6), eniFixture(3, 9)]),
      ];
      for (const [index, version] of versions.entries()) {
        await putRecord(table, version);
        if (index === 2) {
          // The connection drops after the status write lands, before the spec write.
          env.k8s.faults.inject({
            match: { verb: 'patch', subresource: 'status' },
            kind: 'drop-after-apply',
          });
          await expect(syncNode(node.instanceId, env.deps)).rejects.toThrow();
        }
        // Stream records out of order and duplicated, a manual resync and a retry, all at once.
        await Promise.all([1, 2, 3, 4].map(() => syncNode(node.instanceId, env.deps)));
      }
      const final = await env.deps.ciliumNodes.get(node.nodeName);
      const stored = (await env.k8s.history(node.nodeName)).length;
      await expect.poll(agent.seen).toBe(stored);
      const rejected = agent.observations.filter((observation) => !observation.accepted);
      expect(rejected).toEqual([]);
      const last = observeAsAgent(final as CiliumNode);
      expect(last.accepted && last.allocations.map((allocation) => allocation.ip).sort()).toEqual(
        Object.keys(final?.spec?.ipam?.pool ?? {}).sort(),
      );
      expect(Object.keys(final?.spec?.ipam?.pool ?? {})).toHaveLength(15);
    } finally {
      agent.stop();
    }
  });
});
