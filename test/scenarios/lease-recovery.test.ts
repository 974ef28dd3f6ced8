import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import { ENI_TAG_KEYS } from '../../functions/core/eni-ownership.ts';
import type { InstanceRecord } from '../emulators/ec2/index.ts';
import { type LocalCloud, startLocalCloud } from '../local-cloud/local-cloud.ts';
import {
  type AllocationKiller,
  allocationKiller,
  KILL_POINTS,
  type KillPoint,
  poolUsable,
  startPods,
} from '../support/allocation-kill.ts';

/**
 * A crash costs a node about one lease (15 s), not a sweep interval: the allocate function, serving
 * a node the watcher handed it, is killed (its container terminated: no `finally`, no release, no
 * heartbeat) at each point of an allocation, and the time from the kill to the node's pool being
 * usable again is measured. No sweep runs: what recovers the node is the watcher asking again once
 * the dead invocation's lease has run out, and the next allocation re-deriving everything from
 * EC2 (an ENI created but never attached is adopted by its instance tag, never duplicated).
 *
 * Each node first gets the same demand with no kill (the control): a killed allocation must end
 * with exactly the control's ENIs and addresses in EC2, in the record and in the pool, so nothing
 * was assigned twice.
 */

/** Pods started on the node: 8 in use plus pre-allocate 8 needs a second ENI on an m5.large. */
const PODS = 8;
const RECOVERY_BOUND_MS = 20_000;

let cloud: LocalCloud;
let watching: Promise<unknown> | undefined;
const recoveries: { point: KillPoint; recoveryMs: number }[] = [];
let killer: AllocationKiller;

beforeAll(async () => {
  cloud = await startLocalCloud({
    dynamoDbEndpoint: inject('dynamoDbEndpoint'),
    runSchedules: false,
    // One Watch invocation spans the file; the default node lease (15 s) is what is measured.
    environment: { WATCH_SECONDS: '600', DRAIN_SECONDS: '5', WATCH_NODES_PER_INVOCATION: '1' },
  });
  killer = allocationKiller(cloud);
}, 240_000);

/** Starts the one Watch invocation of the file (once a node is ready: its list then has something). */
async function startWatcher(): Promise<void> {
  if (watching !== undefined) return;
  watching = cloud.invoke('Watch', { task: 'watch' });
  await cloud.waitUntil(
    async () =>
      (await cloud.k8s.requests({ verb: 'list' })).some((request) => /WatchRole/.test(request.user ?? '')),
    { description: 'the watcher listed', timeoutMs: 30_000 },
  );
}
afterAll(async () => {
  if (recoveries.length > 0) {
    const line = recoveries.map(({ point, recoveryMs }) => `${point} ${(recoveryMs / 1000).toFixed(1)} s`);
    console.log(`recovery after a kill (kill to usable pool): ${line.join(', ')}`);
  }
  await cloud?.stop();
  await watching?.catch(() => undefined);
});

async function ciliumNodeOf(instance: InstanceRecord): Promise<CiliumNode> {
  return (await cloud.k8s.getCiliumNode(instance.privateDnsName)) as unknown as CiliumNode;
}

/** A node of the cluster, allocated through its EC2 events, with its first pool published. */
async function launchReadyNode(): Promise<InstanceRecord> {
  const instance = cloud.launchInstance('m5.large');
  await cloud.waitUntil(async () => (await cloud.summary([instance.instanceId])).readyNodes === 1, {
    timeoutMs: 60_000,
    description: `${instance.instanceId} ready`,
  });
  await cloud.settle();
  await startWatcher();
  return instance;
}

/** What EC2, the record and the pool hold for the node: what a second assignment would change. */
async function holdings(instance: InstanceRecord) {
  const enis = cloud.ec2.state
    .networkInterfaces()
    .filter(
      (eni) =>
        eni.deletedAtMs === undefined &&
        (eni.attachment?.instanceId === instance.instanceId ||
          eni.tags[ENI_TAG_KEYS.instanceId] === instance.instanceId),
    );
  const [node] = (await cloud.summary([instance.instanceId])).nodes;
  return {
    ec2Enis: enis.length,
    ec2SecondaryIps: enis.reduce((sum, eni) => sum + eni.secondaryPrivateIpAddresses.length, 0),
    recordedIps: node?.record?.ips,
    pool: node?.ciliumNode?.poolSize,
  };
}

describe('an allocation killed at each point: the node is usable again within about one lease', () => {
  let control: Awaited<ReturnType<typeof holdings>>;

  it('the control: the same demand with no kill, served by the watcher in about a second', async () => {
    const instance = await launchReadyNode();
    const startedAt = Date.now();
    await startPods(cloud, instance.privateDnsName, PODS);
    const poolSize = (await ciliumNodeOf(instance)).spec?.ipam?.pool;
    expect(Object.keys(poolSize ?? {}).length).toBeLessThan(2 * PODS);
    await cloud.waitUntil(() => poolUsable(cloud, instance.instanceId, 2 * PODS), {
      timeoutMs: 10_000,
      intervalMs: 50,
    });
    console.log(`demand to usable pool, no kill: ${((Date.now() - startedAt) / 1000).toFixed(1)} s`);
    await cloud.settle();
    control = await holdings(instance);
    expect(control.ec2Enis).toBeGreaterThanOrEqual(3); // eth0 and two of ours: a create was needed
  }, 60_000);

  // Side by side, one node each: an allocate invocation serves one node, so a kill hits only its own.
  describe.concurrent('killed at each point', () => {
    it.each<KillPoint>(KILL_POINTS)(
      'killed %s',
      async (point) => {
        const instance = await launchReadyNode();
        const killedAt = killer.arm(instance, point);
        await startPods(cloud, instance.privateDnsName, PODS);
        const killAtMs = await killedAt;
        await cloud.waitUntil(() => poolUsable(cloud, instance.instanceId, 2 * PODS), {
          timeoutMs: 45_000,
          intervalMs: 100,
          description: `the pool usable again after the kill ${point}`,
        });
        const recoveryMs = Date.now() - killAtMs;
        recoveries.push({ point, recoveryMs });
        expect(recoveryMs).toBeLessThanOrEqual(RECOVERY_BOUND_MS);

        await cloud.settle();
        expect(await holdings(instance)).toEqual(control);
        expect((await cloud.summary([instance.instanceId])).violations).toBe(0);
        expect((await cloud.denials()).total).toBe(0);
      },
      90_000,
    );
  });
});
