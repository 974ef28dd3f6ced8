import { afterEach, describe, expect, inject, it } from 'vitest';
import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import { k8sEmulatorOf, type LocalCloud, startLocalCloud } from '../local-cloud/local-cloud.ts';
import { measureDemandLatency } from './demand.ts';
import { seededRandom } from './floors.ts';

/**
 * The bench's demand-to-pool measurement on a mixed cluster: one node runs a 1.19 agent (demand in
 * `status.ipam.used`), the other a 1.20 agent (demand in `spec.ipam.pools.requested`); the watcher
 * serves both, and the figures come per agent version as well as for all nodes.
 */

const poolSize = (node: CiliumNode | undefined) => Object.keys(node?.spec?.ipam?.pool ?? {}).length;

let cloud: LocalCloud | undefined;
afterEach(async () => {
  await cloud?.stop();
  cloud = undefined;
});

describe('demand-to-pool latency in a mixed cluster', () => {
  it('measures 1.19 and 1.20 nodes, each from its own demand write to a CiliumNode that serves it', async () => {
    const local = await startLocalCloud({
      dynamoDbEndpoint: inject('dynamoDbEndpoint'),
      runSchedules: false,
      agentVersions: 'mixed',
      kubernetesBackend: 'emulator',
      environment: { WATCH_SECONDS: '8', DRAIN_SECONDS: '5' },
    });
    cloud = local;
    const instances = [local.launchInstance('m5.large'), local.launchInstance('m5.large')];
    const names = instances.map((instance) => instance.privateDnsName);
    await local.waitUntil(
      () =>
        names.every((name) => poolSize(k8sEmulatorOf(local).store.get(name) as CiliumNode | undefined) >= 8),
      { timeoutMs: 60_000, description: 'both nodes have a pool' },
    );
    await local.settle();
    expect(names.map((name) => (local.multiPoolAgent(name) ? '1.20' : '1.19')).sort()).toEqual([
      '1.19',
      '1.20',
    ]);
    const agent = local.multiPoolAgent(names.find((name) => local.multiPoolAgent(name)) as string);
    const inUseBefore = agent?.model.inUseIps().length ?? 0;

    const latency = await measureDemandLatency(local, names, {
      mode: 'watcher',
      newPods: 5,
      preAllocate: 8,
      scale: 1,
      random: seededRandom(1),
      timeoutMs: 30_000,
    });

    expect(latency).toMatchObject({ nodes: 2, served: 2 });
    expect(latency.byAgent['1.19']).toMatchObject({ nodes: 1, served: 1 });
    expect(latency.byAgent['1.20']).toMatchObject({ nodes: 1, served: 1 });
    // The 1.20 agent handed its pods IPs itself, and what it requested is now in status.
    expect(agent?.model.inUseIps().length).toBe(inUseBefore + 5);
    for (const figures of Object.values(latency.byAgent)) {
      expect(figures.p99Seconds).toBeGreaterThan(0);
      expect(figures.p99Seconds).toBeLessThan(30);
    }
    expect((await local.denials()).total).toBe(0);
  });
});
