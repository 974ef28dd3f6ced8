import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import { allocateNode } from '../../functions/services/allocate-node.ts';
import type { InstanceRecord } from '../emulators/ec2/index.ts';
import type { ControlPlane } from '../peers/kubernetes/control-plane.ts';
import { type AllocationHarness, startAllocationHarness } from '../support/allocation-harness.ts';
import { startWatchHarness, type WatchHarness } from '../support/watch-harness.ts';

/**
 * The CiliumNode watcher on the real kube-apiserver, where its resume point can really expire:
 * etcd compacted every second and the watch cache off (with it on, the server keeps events of
 * its own past any compaction), so a watch from a saved resourceVersion meets etcd's compaction
 * (an ERROR event with a 410 Expired Status); and the server killed under an open watch. Either
 * way the watcher lists again and serves the demand that arose while it was not watching, once.
 */

let harness: AllocationHarness;
let watcher: WatchHarness;
let controlPlane: ControlPlane;

beforeEach(async () => {
  harness = await startAllocationHarness({
    settings: { leaseDurationMs: 2_000 },
    ownKubernetes: { compactionInterval: '1s', watchCache: false },
  });
  if (harness.k8s.controlPlane === undefined) throw new Error('these scenarios need the real kube-apiserver');
  controlPlane = harness.k8s.controlPlane;
  watcher = await startWatchHarness(harness);
});

afterEach(async () => {
  await harness.close();
});

async function readyNode(): Promise<InstanceRecord> {
  const instance = harness.launch('m5.large');
  await harness.createCiliumNode(instance);
  await allocateNode(instance.instanceId, harness.publishingDependencies());
  expect(await poolSize(instance)).toBe(8);
  return instance;
}

async function ciliumNode(instance: InstanceRecord): Promise<CiliumNode> {
  const node = await harness.k8s.getCiliumNode(instance.privateDnsName);
  if (node === undefined) throw new Error(`no CiliumNode ${instance.privateDnsName}`);
  return node as unknown as CiliumNode;
}

async function poolSize(instance: InstanceRecord): Promise<number> {
  return Object.keys((await ciliumNode(instance)).spec?.ipam?.pool ?? {}).length;
}

/** The agent starting pods: `count` pool IPs reported in status.ipam.used, through the API. */
async function startPods(instance: InstanceRecord, count: number): Promise<void> {
  const node = await ciliumNode(instance);
  const used = Object.fromEntries(
    Object.keys(node.spec?.ipam?.pool ?? {})
      .slice(0, count)
      .map((ip, index) => [ip, { owner: `default/pod-${index}`, resource: '' }]),
  );
  await harness.k8s.replaceCiliumNode(
    { ...node, status: { ...node.status, ipam: { ...node.status?.ipam, used } } } as never,
    'status',
  );
}

function ipsInEc2(instance: InstanceRecord): number {
  return harness
    .secondaryEnis(instance.instanceId)
    .reduce((sum, eni) => sum + eni.secondaryPrivateIpAddresses.length, 0);
}

/** Resolves once etcd has compacted its history past `resourceVersion`: a watch from it expires. */
async function compactedPast(resourceVersion: string): Promise<void> {
  for (let attempt = 0; attempt < 100; attempt++) {
    if (await watchExpired(resourceVersion)) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`etcd never compacted past ${resourceVersion}`);
}

/** Whether a watch from `resourceVersion` opens with an ERROR event carrying a 410 Status. */
async function watchExpired(resourceVersion: string): Promise<boolean> {
  let resolveFirst: (expired: boolean) => void = () => {};
  const first = new Promise<boolean>((resolve) => {
    resolveFirst = resolve;
  });
  const watch = await controlPlane.admin.watch(
    `/apis/cilium.io/v2/ciliumnodes?watch=true&resourceVersion=${resourceVersion}`,
    (event) => {
      const { type, object } = event as { type: string; object: { code?: number } };
      resolveFirst(type === 'ERROR' && object.code === 410);
    },
  );
  const timer = setTimeout(() => resolveFirst(false), 1_000);
  try {
    return await first;
  } finally {
    clearTimeout(timer);
    watch.close();
  }
}

describe('the CiliumNode watcher on the real kube-apiserver', () => {
  it("lists again when etcd's compaction expired its resume point, and serves the demand that arose meanwhile", async () => {
    const instance = await readyNode();
    const first = await watcher.watchFor(300);
    if (first.checkpoint === undefined) throw new Error('the first watch saved no resume point');
    await startPods(instance, 5);
    await compactedPast(first.checkpoint);
    const second = await watcher.watchFor(3_000);

    expect(second.resumedFrom).toBe(first.checkpoint);
    expect(second.relists).toBeGreaterThanOrEqual(1);
    expect(second.served).toMatchObject({ allocate: 1, failed: 0 });
    expect(await poolSize(instance)).toBe(13);
    expect(ipsInEc2(instance)).toBe(13);
  });

  it('survives kube-apiserver killed under its open watch: demand written while it was down is served once', async () => {
    const instance = await readyNode();
    const watching = watcher.watchFor(8_000);
    // Let the watch open, then kill the server under it; the agent writes once it is back.
    await new Promise((resolve) => setTimeout(resolve, 500));
    await controlPlane.restartApiServer({ downMs: 1_000 });
    await startPods(instance, 5);
    const summary = await watching;

    expect(summary.outcome).toBe('watched');
    expect(summary.reconnects + summary.relists).toBeGreaterThanOrEqual(1);
    expect(summary.served).toMatchObject({ allocate: 1, failed: 0 });
    expect(await poolSize(instance)).toBe(13);
    expect(ipsInEc2(instance)).toBe(13);
  });
});
