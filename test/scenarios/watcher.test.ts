import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type {
  CiliumNodeWatchPort,
  Ec2NetworkPort,
  NodeServicePort,
  WatchLeaseStore,
} from '../../functions/core/ports.ts';
import type { AllocationDependencies } from '../../functions/services/allocate-node.ts';
import { allocateNode } from '../../functions/services/allocate-node.ts';
import {
  type WatchDependencies,
  type WatchSummary,
  watchCiliumNodes,
} from '../../functions/services/watch-ciliumnodes.ts';
import type { InstanceRecord } from '../emulators/ec2/index.ts';
import { type AllocationHarness, startAllocationHarness } from '../support/allocation-harness.ts';
import { startWatchHarness, type WatchHarness } from '../support/watch-harness.ts';

/**
 * The CiliumNode watcher against the real stand-ins (Kubernetes emulator through client-node,
 * DynamoDB Local, the EC2 emulator): demand served with no sweep running (a 1.19 agent's and a 1.20
 * agent's), nothing started when paused, and the watch surviving a dropped stream, a 410 Gone and a
 * watcher that dies mid-invocation. The node service is the allocate function's own `serveNode`,
 * run in-process (the deployed watcher invokes the allocate function with the same request).
 */

let harness: AllocationHarness;
let watcher: WatchHarness;
/** The harness's watch settings. */
const WATCH = { leaseMs: 600, concurrency: 4, nodesPerInvocation: 2, standbyMs: 0, nodeLeaseMs: 15_000 };

beforeEach(async () => {
  // On the emulator: these scenarios compact its history on demand and count its open watches
  // (the same watch on the real server, expired by etcd's compaction and cut by a killed
  // kube-apiserver, is in test/scenarios/watcher-real-server.test.ts).
  harness = await startAllocationHarness({ settings: { leaseDurationMs: 2_000 }, kubernetes: 'emulator' });
  watcher = await startWatchHarness(harness);
});

afterEach(async () => {
  await harness.close();
});

const allocationDependencies = (overrides: Partial<AllocationDependencies> = {}) =>
  harness.publishingDependencies(overrides);
const inProcessNodeService = (deps?: () => AllocationDependencies) => watcher.nodeService(deps);
const watchDependencies: WatchHarness['dependencies'] = (overrides) => watcher.dependencies(overrides);
const watchFor: WatchHarness['watchFor'] = (milliseconds, overrides) =>
  watcher.watchFor(milliseconds, overrides);

/** A node as after its EC2 event: CiliumNode registered, pool allocated and published. */
async function readyNode(): Promise<InstanceRecord> {
  const instance = harness.launch('m5.large');
  await harness.createCiliumNode(instance);
  await allocateNode(instance.instanceId, allocationDependencies());
  expect(poolSize(instance)).toBe(8);
  return instance;
}

/**
 * A node whose demand stays positive: a t3.nano (2 ENIs of 2 addresses, eth0 not in the pool)
 * holds a pool of 1 at its limit, short of the pre-allocation of 8, so every version of its
 * CiliumNode asks for more.
 */
async function blockedNode(): Promise<InstanceRecord> {
  const instance = harness.launch('t3.nano');
  await harness.createCiliumNode(instance);
  await allocateNode(instance.instanceId, allocationDependencies());
  expect(poolSize(instance)).toBe(1);
  return instance;
}

function poolSize(instance: InstanceRecord): number {
  const node = harness.k8s.emulator!.store.get(instance.privateDnsName) as unknown as {
    spec?: { ipam?: { pool?: object } };
  };
  return Object.keys(node?.spec?.ipam?.pool ?? {}).length;
}

/** The agent starting pods: `count` pool IPs reported in status.ipam.used. */
function startPods(instance: InstanceRecord, count: number): void {
  const node = harness.k8s.emulator!.store.get(instance.privateDnsName) as unknown as {
    spec: { ipam: { pool: Record<string, unknown> } };
    status?: Record<string, unknown>;
  };
  const used = Object.fromEntries(
    Object.keys(node.spec.ipam.pool)
      .slice(0, count)
      .map((ip, index) => [ip, { owner: `default/pod-${index}`, resource: '' }]),
  );
  harness.k8s.emulator!.store.update(
    instance.privateDnsName,
    { ...node, status: { ...node.status, ipam: { used } } },
    'status',
    'update',
  );
}

/**
 * A 1.20 agent starting pods: `count` more addresses requested in `spec.ipam.pools.requested`
 * (it requests in-use plus pending plus its pre-allocation of 8), `status.ipam.used` left empty.
 */
function requestAsMultiPoolAgent(instance: InstanceRecord, count: number): void {
  const node = harness.k8s.emulator!.store.get(instance.privateDnsName) as unknown as {
    spec: { ipam: Record<string, unknown> };
  };
  const requested = [{ pool: 'default', needed: { 'ipv4-addrs': 8 + count } }];
  harness.k8s.emulator!.store.update(
    instance.privateDnsName,
    { ...node, spec: { ...node.spec, ipam: { ...node.spec.ipam, pools: { requested } } } },
    'main',
    'update',
  );
}

/** Secondary IPs EC2 holds for the instance: a node served twice would hold more than its pool needs. */
function ipsInEc2(instance: InstanceRecord): number {
  return harness.ec2.state
    .networkInterfaces({ instanceId: instance.instanceId })
    .reduce((sum, eni) => sum + eni.secondaryPrivateIpAddresses.length, 0);
}

/**
 * Watches for 3 s with `overrides`; once the watch is open, 5 pods start on each of `nodes`; waits
 * until `servedNode`'s pool grew to 13, then answers the watcher's summary.
 */
async function watchWhilePodsStart(
  overrides: Partial<WatchDependencies>,
  nodes: readonly InstanceRecord[],
  servedNode: InstanceRecord,
): Promise<WatchSummary> {
  const watching = watchFor(3_000, overrides);
  await vi.waitFor(() => expect(harness.k8s.emulator!.openWatches()).toBe(1));
  for (const node of nodes) startPods(node, 5);
  await vi.waitFor(() => expect(poolSize(servedNode)).toBe(13), { timeout: 5_000 });
  return watching;
}

describe('the CiliumNode watcher', () => {
  it("serves a node's demand with no sweep running, once, and hands the lease back with its resume point", async () => {
    const instance = await readyNode();
    const watching = watchFor(2_500);
    await vi.waitFor(() => expect(harness.k8s.emulator!.openWatches()).toBe(1));
    startPods(instance, 5);
    await vi.waitFor(() => expect(poolSize(instance)).toBe(13), { timeout: 5_000 });
    const summary = await watching;

    expect(summary).toMatchObject({ outcome: 'watched', served: { allocate: 1, failed: 0 } });
    expect(ipsInEc2(instance)).toBe(13);
    expect((await watcher.leases.read()).holder).toBeUndefined();
    expect((await watcher.leases.read()).resourceVersion).toBe(summary.checkpoint);
  });

  it("serves a 1.20 agent's demand from spec.ipam.pools.requested, with no sweep running", async () => {
    const instance = await readyNode();
    const nodes = inProcessNodeService();
    const watching = watchFor(2_500, { nodes: nodes.service });
    await vi.waitFor(() => expect(harness.k8s.emulator!.openWatches()).toBe(1));
    requestAsMultiPoolAgent(instance, 5);
    await vi.waitFor(() => expect(ipsInEc2(instance)).toBe(13), { timeout: 5_000 });
    const summary = await watching;

    expect(summary).toMatchObject({ outcome: 'watched', served: { allocate: 1, failed: 0 } });
    expect(nodes.requests).toEqual([{ instanceId: instance.instanceId, allocate: true, release: false }]);
    expect(poolSize(instance)).toBe(13);
  });

  it('paused, watches and starts nothing: no node handed over, nothing allocated', async () => {
    const instance = await readyNode();
    const nodes = inProcessNodeService();
    const watching = watchFor(1_500, { nodes: nodes.service, paused: true });
    await vi.waitFor(() => expect(harness.k8s.emulator!.openWatches()).toBe(1));
    startPods(instance, 5);
    const summary = await watching;

    expect(summary.events).toBeGreaterThanOrEqual(1);
    expect(summary.served).toEqual({ allocate: 0, release: 0, failed: 0, paused: 1, askedAgain: 0 });
    expect(nodes.requests).toEqual([]);
    expect(poolSize(instance)).toBe(8);
    expect(ipsInEc2(instance)).toBe(8);
  });

  it('re-opens a dropped watch from the last event and misses nothing', async () => {
    const instance = await readyNode();
    const watching = watchFor(3_000);
    await vi.waitFor(() => expect(harness.k8s.emulator!.openWatches()).toBe(1));
    harness.k8s.faults.dropWatches();
    startPods(instance, 5);
    await vi.waitFor(() => expect(poolSize(instance)).toBe(13), { timeout: 5_000 });
    const summary = await watching;

    expect(summary.reconnects).toBeGreaterThanOrEqual(1);
    expect(summary.served.allocate).toBe(1);
  });

  it('lists again after a 410 Gone and serves the demand that arose meanwhile', async () => {
    const instance = await readyNode();
    const first = await watchFor(300);
    startPods(instance, 5);
    harness.k8s.emulator!.store.compact();
    const second = await watchFor(2_000);

    expect(first.checkpoint).toBeDefined();
    expect(second.resumedFrom).toBe(first.checkpoint);
    expect(second.relists).toBeGreaterThanOrEqual(1);
    expect(poolSize(instance)).toBe(13);
    expect(ipsInEc2(instance)).toBe(13);
  });

  it('resumes from the saved resume point: no list, only the node that changed served, a blocked node not served again', async () => {
    // Guards the resume point: a watcher that ignored the lease's resourceVersion would list again
    // on every invocation and hand every node whose demand stays positive (here `blocked`, at its
    // instance's limit) to the allocate function each time.
    const changed = await readyNode();
    const blocked = await blockedNode();
    const firstNodes = inProcessNodeService();
    const first = await watchFor(1_000, { nodes: firstNodes.service });
    expect(first).toMatchObject({ outcome: 'watched', relists: 1 });
    expect(first.resumedFrom).toBeUndefined();
    expect(firstNodes.requests).toEqual([{ instanceId: blocked.instanceId, allocate: true, release: false }]);

    startPods(changed, 5);
    const nodes = inProcessNodeService();
    const resumed = watchFor(2_500, { nodes: nodes.service });
    await vi.waitFor(() => expect(poolSize(changed)).toBe(13), { timeout: 5_000 });
    const second = await resumed;

    expect(nodes.requests).toEqual([{ instanceId: changed.instanceId, allocate: true, release: false }]);
    expect(second).toMatchObject({ outcome: 'watched', relists: 0, resumedFrom: first.checkpoint });
    expect(poolSize(blocked)).toBe(1);
  });

  it('asks again for a node whose serving failed, once a lease the failed invocation may have left has run out', async () => {
    const instance = await readyNode();
    const inner = inProcessNodeService();
    let calls = 0;
    const failingOnce: NodeServicePort = {
      serve: async (triggers) => {
        calls++;
        if (calls === 1) throw new Error('Task timed out after 120.00 seconds');
        return inner.service.serve(triggers);
      },
    };
    const summary = await watchWhilePodsStart(
      { nodes: failingOnce, watch: { ...WATCH, nodeLeaseMs: 200 } },
      [instance],
      instance,
    );

    // The second hand-over is the ask again.
    expect(summary.served).toMatchObject({ allocate: 2, failed: 1, askedAgain: 1 });
    expect(inner.requests).toEqual([{ instanceId: instance.instanceId, allocate: true, release: false }]);
    expect(ipsInEc2(instance)).toBe(13);
  });

  it("asks again for a node another invocation held, just after that lease's expiry, and not when the holder served it", async () => {
    const [held, servedByHolder] = [await readyNode(), await readyNode()];
    const inner = inProcessNodeService();
    const answered = new Set<string>();
    // The first answer for each node: another invocation holds it for 300 ms more. The holder of
    // `servedByHolder` serves it meanwhile (its demand is met when the watcher asks again).
    const holding: NodeServicePort = {
      serve: async (triggers) => {
        const first = triggers.filter(({ instanceId }) => !answered.has(instanceId));
        for (const { instanceId } of first) answered.add(instanceId);
        if (first.length === 0) return inner.service.serve(triggers);
        if (first.some(({ instanceId }) => instanceId === servedByHolder.instanceId)) {
          await allocateNode(servedByHolder.instanceId, allocationDependencies());
        }
        const leaseExpiresAtEpochMs = harness.clock.now() + 300;
        return { failures: [], held: first.map(({ instanceId }) => ({ instanceId, leaseExpiresAtEpochMs })) };
      },
    };
    const summary = await watchWhilePodsStart({ nodes: holding }, [held, servedByHolder], held);

    // Two hand-overs, and one ask again (for `held` only: `servedByHolder` no longer asks).
    expect(summary.served).toMatchObject({ allocate: 3, failed: 0, askedAgain: 1 });
    expect(inner.requests).toEqual([{ instanceId: held.instanceId, allocate: true, release: false }]);
    expect(poolSize(servedByHolder)).toBe(13);
    expect(ipsInEc2(held)).toBe(13);
  });

  it('a watcher that dies mid-invocation is replaced once its lease expires: no node missed, none served twice', async () => {
    const nodes = [await readyNode(), await readyNode(), await readyNode()];
    const victim = nodes[1] as InstanceRecord;
    const crash = crashSwitch();
    const base = allocationDependencies();
    // A crashed process makes no call afterwards: not to EC2, nor to the node table (a claim taken
    // after the crash would outlive it on the manual clock), nor to Kubernetes.
    const doomedAllocation = allocationDependencies({
      ec2: crash.hangAfterCrash(base.ec2, victim.instanceId),
      store: crash.hangsAfterCrash(base.store),
      ciliumNodes: crash.hangsAfterCrash(base.ciliumNodes),
    });
    void watchCiliumNodes(
      watchDependencies({
        invocationId: 'doomed',
        nodes: inProcessNodeService(() => doomedAllocation).service,
        leases: crash.freeze(watcher.leases),
        watcher: crash.freezeWatch(harness.ciliumNodes),
      }),
      harness.clock.now() + 60_000,
    );
    await vi.waitFor(() => expect(harness.k8s.emulator!.openWatches()).toBe(1));
    for (const node of nodes) startPods(node, 5);
    await vi.waitFor(() => expect(crash.crashed()).toBe(true), { timeout: 5_000 });
    // The dead watcher's leases (the watch's and the victim's node claim) run out.
    harness.clock.advance(5_000);
    // Room to take over, list and serve three nodes on a loaded machine (it ends at its deadline).
    const successor = await watchFor(8_000, { invocationId: 'successor' });

    expect(successor.outcome).toBe('watched');
    for (const node of nodes) expect(poolSize(node)).toBe(13);
    for (const node of nodes) expect(ipsInEc2(node)).toBe(13);
  });
});

/**
 * A watcher process dying, in-process: once the victim's first mutating EC2 call (an
 * AssignPrivateIpAddresses on one of its ENIs, or a CreateNetworkInterface for it) is about to be
 * sent, every port of the doomed watcher and of the allocation it started hangs for good (its EC2,
 * node-table and Kubernetes calls are never sent, its lease is never renewed or released, its watch
 * stream is closed and never reports again).
 */
function crashSwitch() {
  let crashed = false;
  const dead = new AbortController();
  const never = <T>() => new Promise<T>(() => {});
  /** `port` with every method call made after the crash left pending for good. */
  const hangsAfterCrash = <T extends object>(port: T): T =>
    new Proxy(port, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver);
        if (typeof value !== 'function') return value;
        return (...args: unknown[]) => (crashed ? never() : value.apply(target, args));
      },
    });
  return {
    crashed: () => crashed,
    hangsAfterCrash,
    hangAfterCrash(ec2: Ec2NetworkPort, victimInstanceId: string): Ec2NetworkPort {
      const isVictimEni = (eniId: unknown) =>
        harness.ec2.state
          .networkInterfaces({ instanceId: victimInstanceId })
          .some((eni) => eni.networkInterfaceId === eniId);
      return new Proxy(ec2, {
        get(target, property, receiver) {
          const value = Reflect.get(target, property, receiver);
          if (typeof value !== 'function') return value;
          return (...args: unknown[]) => {
            const victimCall =
              (property === 'assignIps' && isVictimEni(args[0])) ||
              (property === 'createEni' && JSON.stringify(args[0]).includes(victimInstanceId));
            if (victimCall) {
              crashed = true;
              dead.abort();
            }
            return crashed ? never() : value.apply(target, args);
          };
        },
      });
    },
    freeze(store: WatchLeaseStore): WatchLeaseStore {
      return {
        read: () => store.read(),
        acquire: (...args) => store.acquire(...args),
        renew: (...args) => (crashed ? never() : store.renew(...args)),
        release: (...args) => (crashed ? never() : store.release(...args)),
      };
    },
    freezeWatch(port: CiliumNodeWatchPort): CiliumNodeWatchPort {
      return {
        listWithResourceVersion: () => port.listWithResourceVersion(),
        watch: (resourceVersion, onEvent, signal) =>
          port
            .watch(
              resourceVersion,
              (event) => (crashed ? undefined : onEvent(event)),
              AbortSignal.any([signal, dead.signal]),
            )
            .then(() => never()),
      };
    },
  };
}
