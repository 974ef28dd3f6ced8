import { randomUUID } from 'node:crypto';
import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DynamoWatchLeaseStore, WATCH_STATE_KEY } from '../../functions/aws/watch-lease.ts';
import type { CiliumNodeWatchPort, Ec2NetworkPort, WatchLeaseStore } from '../../functions/core/ports.ts';
import { allocateNode } from '../../functions/services/allocate-node.ts';
import { syncNode } from '../../functions/services/sync-node.ts';
import {
  type WatchDependencies,
  type WatchSummary,
  watchCiliumNodes,
} from '../../functions/services/watch-ciliumnodes.ts';
import type { InstanceRecord } from '../emulators/ec2/index.ts';
import { type AllocationHarness, startAllocationHarness } from '../support/allocation-harness.ts';

/**
 * The CiliumNode watcher against the real stand-ins (Kubernetes emulator through client-node,
 * DynamoDB Local, the EC2 emulator): demand served with no sweep running, and the watch surviving a
 * dropped stream, a 410 Gone and a watcher that dies mid-invocation.
 */

let harness: AllocationHarness;
let leases: DynamoWatchLeaseStore;

beforeEach(async () => {
  harness = await startAllocationHarness({ settings: { leaseDurationMs: 2_000 } });
  const tableName = `watch-${randomUUID()}`;
  await harness.table.client.send(
    new CreateTableCommand({
      TableName: tableName,
      AttributeDefinitions: [{ AttributeName: WATCH_STATE_KEY, AttributeType: 'S' }],
      KeySchema: [{ AttributeName: WATCH_STATE_KEY, KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  leases = new DynamoWatchLeaseStore(harness.table.client, tableName);
});

afterEach(async () => {
  await harness.close();
});

function watchDependencies(overrides: Partial<WatchDependencies> = {}): WatchDependencies {
  const base = harness.dependencies();
  return {
    ...base,
    publish: (record, ciliumNode) =>
      syncNode(
        record.instanceId,
        { store: harness.table.store, ciliumNodes: harness.ciliumNodes, log: base.log },
        { record, ciliumNode },
      ),
    watcher: harness.ciliumNodes,
    leases,
    release: { enabled: false, delayMs: 0 },
    watch: { leaseMs: 600, concurrency: 4, standbyMs: 0 },
    sleep: (milliseconds) => new Promise((resolve) => setTimeout(resolve, milliseconds)),
    ...overrides,
  };
}

/** Watches for `milliseconds` of real time (the lease clock is the harness's manual clock). */
function watchFor(milliseconds: number, overrides: Partial<WatchDependencies> = {}): Promise<WatchSummary> {
  return watchCiliumNodes(watchDependencies(overrides), harness.clock.now() + milliseconds);
}

/** A node as after its EC2 event: CiliumNode registered, pool allocated and published. */
async function readyNode(): Promise<InstanceRecord> {
  const instance = harness.launch('m5.large');
  await harness.createCiliumNode(instance);
  await allocateNode(instance.instanceId, watchDependencies());
  expect(poolSize(instance)).toBe(8);
  return instance;
}

function poolSize(instance: InstanceRecord): number {
  const node = harness.k8s.store.get(instance.privateDnsName) as unknown as {
    spec?: { ipam?: { pool?: object } };
  };
  return Object.keys(node?.spec?.ipam?.pool ?? {}).length;
}

/** The agent starting pods: `count` pool IPs reported in status.ipam.used. */
function startPods(instance: InstanceRecord, count: number): void {
  const node = harness.k8s.store.get(instance.privateDnsName) as unknown as {
    spec: { ipam: { pool: Record<string, unknown> } };
    status?: Record<string, unknown>;
  };
  const used = Object.fromEntries(
    Object.keys(node.spec.ipam.pool)
      .slice(0, count)
      .map((ip, index) => [ip, { owner: `default/pod-${index}`, resource: '' }]),
  );
  harness.k8s.store.update(
    instance.privateDnsName,
    { ...node, status: { ...node.status, ipam: { used } } },
    'status',
    'update',
  );
}

/** Secondary IPs EC2 holds for the instance: a node served twice would hold more than its pool needs. */
function ipsInEc2(instance: InstanceRecord): number {
  return harness.ec2.state
    .networkInterfaces({ instanceId: instance.instanceId })
    .reduce((sum, eni) => sum + eni.secondaryPrivateIpAddresses.length, 0);
}

describe('the CiliumNode watcher', () => {
  it("serves a node's demand with no sweep running, once, and hands the lease back with its resume point", async () => {
    const instance = await readyNode();
    const watching = watchFor(2_500);
    await vi.waitFor(() => expect(harness.k8s.openWatches()).toBe(1));
    startPods(instance, 5);
    await vi.waitFor(() => expect(poolSize(instance)).toBe(13), { timeout: 5_000 });
    const summary = await watching;

    expect(summary).toMatchObject({ outcome: 'watched', served: { allocate: 1, failed: 0 } });
    expect(ipsInEc2(instance)).toBe(13);
    expect((await leases.read()).holder).toBeUndefined();
    expect((await leases.read()).resourceVersion).toBe(summary.checkpoint);
  });

  it('re-opens a dropped watch from the last event and misses nothing', async () => {
    const instance = await readyNode();
    const watching = watchFor(3_000);
    await vi.waitFor(() => expect(harness.k8s.openWatches()).toBe(1));
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
    harness.k8s.store.compact();
    const second = await watchFor(2_000);

    expect(first.checkpoint).toBeDefined();
    expect(second.resumedFrom).toBe(first.checkpoint);
    expect(second.relists).toBeGreaterThanOrEqual(1);
    expect(poolSize(instance)).toBe(13);
    expect(ipsInEc2(instance)).toBe(13);
  });

  it('a watcher that dies mid-invocation is replaced once its lease expires: no node missed, none served twice', async () => {
    const nodes = [await readyNode(), await readyNode(), await readyNode()];
    const victim = nodes[1] as InstanceRecord;
    const crash = crashSwitch();
    const base = watchDependencies();
    void watchCiliumNodes(
      watchDependencies({
        invocationId: 'doomed',
        ec2: crash.hangAfterCrash(base.ec2, (eniId) => eniOf(victim) === eniId),
        leases: crash.freeze(leases),
        watcher: crash.freezeWatch(harness.ciliumNodes),
      }),
      harness.clock.now() + 60_000,
    );
    await vi.waitFor(() => expect(harness.k8s.openWatches()).toBe(1));
    for (const node of nodes) startPods(node, 5);
    await vi.waitFor(() => expect(crash.crashed()).toBe(true), { timeout: 5_000 });
    // The dead watcher's leases (the watch's and the victim's node claim) run out.
    harness.clock.advance(5_000);
    const successor = await watchFor(2_500, { invocationId: 'successor' });

    expect(successor.outcome).toBe('watched');
    for (const node of nodes) expect(poolSize(node)).toBe(13);
    for (const node of nodes) expect(ipsInEc2(node)).toBe(13);
  });
});

function eniOf(instance: InstanceRecord): string | undefined {
  return harness.ec2.state.networkInterfaces({ instanceId: instance.instanceId })[0]?.networkInterfaceId;
}

/**
 * A watcher process dying, in-process: once the victim's AssignPrivateIpAddresses is about to be
 * sent, every port of the doomed watcher hangs for good (its EC2 calls are never sent, its lease
 * is never renewed or released, its watch stream is closed and never reports again).
 */
function crashSwitch() {
  let crashed = false;
  const dead = new AbortController();
  const never = <T>() => new Promise<T>(() => {});
  return {
    crashed: () => crashed,
    hangAfterCrash(ec2: Ec2NetworkPort, isVictim: (eniId: string) => boolean): Ec2NetworkPort {
      return new Proxy(ec2, {
        get(target, property, receiver) {
          const value = Reflect.get(target, property, receiver);
          if (typeof value !== 'function') return value;
          return (...args: unknown[]) => {
            if (property === 'assignIps' && isVictim(String(args[0]))) {
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
