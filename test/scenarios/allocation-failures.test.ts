import { afterEach, describe, expect, it } from 'vitest';
import type { Ec2NetworkPort, NodeRecordStore } from '../../functions/core/ports.ts';
import { allocateNode } from '../../functions/services/allocate-node.ts';
import type { InstanceRecord } from '../emulators/ec2/index.ts';
import type { CiliumNodeObject } from '../emulators/k8s/index.ts';
import { type AllocationHarness, startAllocationHarness } from '../support/allocation-harness.ts';

let harness: AllocationHarness;
afterEach(async () => {
  await harness.close();
});

/** A promise that never settles: the invocation stops there, as a crashed Lambda does (no finally runs). */
const never = () => new Promise<never>(() => {});

/**
 * The EC2 port of an invocation that dies right after `action` succeeded in EC2: the call is
 * applied, its result never reaches the function, and nothing after it runs.
 */
function crashingAfter(port: Ec2NetworkPort, action: keyof Ec2NetworkPort): Ec2NetworkPort {
  return new Proxy(port, {
    get(target, property, receiver) {
      const original = Reflect.get(target, property, receiver);
      if (property !== action || typeof original !== 'function') return original;
      return async (...args: unknown[]) => {
        await original.apply(target, args);
        return never();
      };
    },
  });
}

/** A node table whose writes after the first `allowedWrites` never complete (a crash before the record write). */
function crashingOnWrite(store: NodeRecordStore, allowedWrites: number): NodeRecordStore {
  let writes = 0;
  return {
    get: (instanceId) => store.get(instanceId),
    listPage: (token) => store.listPage(token),
    put: (record, expected) => (++writes > allowedWrites ? never() : store.put(record, expected)),
  };
}

function assertNoDuplicateNoLeak(instance: InstanceRecord, expectedSecondaryEnis: number) {
  const state = harness.ec2.state;
  const attached = harness.secondaryEnis(instance.instanceId);
  expect(attached).toHaveLength(expectedSecondaryEnis);
  expect(new Set(attached.map((eni) => eni.attachment?.deviceIndex)).size).toBe(expectedSecondaryEnis);
  expect(state.networkInterfaces({ status: 'available' })).toEqual([]);
  const everCreatedForInstance = state
    .networkInterfaceHistory()
    .filter((eni) => eni.tags['serverless-eni-ipam/instance-id'] === instance.instanceId);
  const stillAround = everCreatedForInstance.filter((eni) => eni.deletedAtMs === undefined);
  expect(stillAround).toHaveLength(expectedSecondaryEnis);
}

async function waitForCall(action: string, count: number): Promise<void> {
  for (let spin = 0; spin < 2_000 && harness.ec2.calls.count(action) < count; spin++) {
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  // Let the crashed invocation's pending microtasks settle: it must do nothing more.
  await new Promise((resolve) => setTimeout(resolve, 20));
}

describe('duplicates and concurrency', () => {
  it('twenty concurrent copies of one event yield exactly the needed ENIs and IPs', async () => {
    harness = await startAllocationHarness();
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, {
      eni: { 'first-interface-index': 1 },
      ipam: { 'min-allocate': 14 },
    });
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, () => allocateNode(instance.instanceId, harness.dependencies())),
    );
    // min-allocate 14 on m5.large with first-interface-index 1: 9 + 5 on two new ENIs.
    expect(
      harness.secondaryEnis(instance.instanceId).map((eni) => eni.secondaryPrivateIpAddresses.length),
    ).toEqual([9, 5]);
    assertNoDuplicateNoLeak(instance, 2);
    expect(harness.ec2.calls.count('CreateNetworkInterface')).toBe(2);
    expect(harness.ec2.calls.count('AssignPrivateIpAddresses')).toBe(0);
    expect(outcomes.filter((outcome) => outcome.kind === 'busy').length).toBeGreaterThan(0);
    const record = await harness.table.store.get(instance.instanceId);
    expect(record?.enis.map((eni) => eni.secondaryIps.length)).toEqual([0, 9, 5]);
  });

  it('the same event redelivered after completion changes nothing', async () => {
    harness = await startAllocationHarness();
    const instance = harness.launch('t3.medium');
    await allocateNode(instance.instanceId, harness.dependencies());
    const before = await harness.table.store.get(instance.instanceId);
    const mutating = harness.ec2.calls.mutating();
    for (let copy = 0; copy < 3; copy++) await allocateNode(instance.instanceId, harness.dependencies());
    expect(harness.ec2.calls.mutating()).toBe(mutating);
    expect(await harness.table.store.get(instance.instanceId)).toEqual(before);
  });

  it('two different instances allocate concurrently without interfering', async () => {
    harness = await startAllocationHarness();
    const first = harness.launch('m5.large');
    const second = harness.launch('m5.large');
    for (const instance of [first, second]) {
      await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    }
    await Promise.all([
      allocateNode(first.instanceId, harness.dependencies()),
      allocateNode(second.instanceId, harness.dependencies()),
    ]);
    assertNoDuplicateNoLeak(first, 1);
    assertNoDuplicateNoLeak(second, 1);
  });
});

describe('a crash at each step is healed by the next invocation', () => {
  it.each([
    { case: 'after CreateNetworkInterface', action: 'createEni', ec2Action: 'CreateNetworkInterface' },
    { case: 'after AttachNetworkInterface', action: 'attachEni', ec2Action: 'AttachNetworkInterface' },
    {
      case: 'after ModifyNetworkInterfaceAttribute',
      action: 'setDeleteOnTermination',
      ec2Action: 'ModifyNetworkInterfaceAttribute',
    },
  ] as const)('$case', async ({ action, ec2Action }) => {
    harness = await startAllocationHarness();
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    const crashed = harness.dependencies();
    void allocateNode(instance.instanceId, { ...crashed, ec2: crashingAfter(crashed.ec2, action) });
    await waitForCall(ec2Action, 1);

    // The crashed invocation's lease blocks others until it expires.
    const blocked = await allocateNode(instance.instanceId, harness.dependencies());
    expect(blocked.kind).toBe('busy');
    harness.clock.advance(harness.settings.leaseDurationMs + 1);

    const healed = await allocateNode(instance.instanceId, harness.dependencies());
    expect(healed.kind).toBe('reconciled');
    assertNoDuplicateNoLeak(instance, 1);
    const [eni] = harness.secondaryEnis(instance.instanceId);
    expect(eni?.secondaryPrivateIpAddresses).toHaveLength(8);
    expect(eni?.attachment?.deleteOnTermination).toBe(true);
    const record = await harness.table.store.get(instance.instanceId);
    expect(record?.enis.map((recorded) => recorded.id)).toContain(eni?.networkInterfaceId);
    expect(record?.lease).toBeUndefined();
  });

  it('before the record write', async () => {
    harness = await startAllocationHarness();
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    const crashed = harness.dependencies();
    // The first write (the lease claim) lands; the write recording the new ENI never does.
    void allocateNode(instance.instanceId, { ...crashed, store: crashingOnWrite(crashed.store, 1) });
    await waitForCall('AttachNetworkInterface', 1);
    expect((await harness.table.store.get(instance.instanceId))?.enis.length).toBe(1);
    // Delete-on-termination is set only after the record holds the ENI, so the crash leaves it unset.
    expect(harness.ec2.calls.count('ModifyNetworkInterfaceAttribute')).toBe(0);

    harness.clock.advance(harness.settings.leaseDurationMs + 1);
    await allocateNode(instance.instanceId, harness.dependencies());
    assertNoDuplicateNoLeak(instance, 1);
    const record = await harness.table.store.get(instance.instanceId);
    expect(record?.enis.map((eni) => eni.secondaryIps.length)).toEqual([0, 8]);
    expect(harness.secondaryEnis(instance.instanceId)[0]?.attachment?.deleteOnTermination).toBe(true);
  });
});

describe('addresses EC2 gave an invocation that never recorded them', () => {
  it('are adopted when EC2 refuses more for the ENI limit, not asked for again', async () => {
    // A lease shorter than the consistency grace: the successor runs while our record of the ENI is
    // still the view it trusts over Describe.
    harness = await startAllocationHarness({ settings: { leaseDurationMs: 2_000 } });
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    await allocateNode(instance.instanceId, harness.dependencies());
    const [first] = harness.secondaryEnis(instance.instanceId);
    expect(first?.secondaryPrivateIpAddresses).toHaveLength(8);

    // Demand rises to 13: 1 more fills the ENI (9 secondaries on m5.large), 4 go on a new one.
    const node = (await harness.k8s.getCiliumNode(instance.privateDnsName)) as CiliumNodeObject & {
      spec: { ipam?: Record<string, unknown> };
    };
    await harness.k8s.replaceCiliumNode({
      ...node,
      spec: { ...node.spec, ipam: { ...node.spec.ipam, 'min-allocate': 13 } },
    });
    // The first invocation is given the 9th address and dies before recording it; our record of
    // the ENI (written moments ago) stays the fresher view for the next one.
    const crashed = harness.dependencies();
    void allocateNode(instance.instanceId, { ...crashed, ec2: crashingAfter(crashed.ec2, 'assignIps') });
    await waitForCall('AssignPrivateIpAddresses', 1);
    harness.clock.advance(harness.settings.leaseDurationMs + 1);

    const healed = await allocateNode(instance.instanceId, harness.dependencies());
    expect(healed.kind).toBe('reconciled');
    expect(
      harness.secondaryEnis(instance.instanceId).map((eni) => eni.secondaryPrivateIpAddresses.length),
    ).toEqual([9, 4]);
    const record = await harness.table.store.get(instance.instanceId);
    expect(record?.enis.map((eni) => eni.secondaryIps.length)).toEqual([0, 9, 4]);
    expect(harness.logs.some((line) => line.message.includes('holds more addresses than our view'))).toBe(
      true,
    );
  });
});

describe('EC2 failures', () => {
  it('completes with throttling on (AWS token buckets shrunk so the burst runs dry)', async () => {
    harness = await startAllocationHarness({
      // Real time here: the buckets refill by the wall clock while the SDK backs off.
      retry: { maxAttempts: 10, baseDelayMs: 20, maxDelayMs: 200 },
      ec2: {
        clock: Date.now,
        throttling: {
          buckets: {
            CreateNetworkInterface: { burst: 1, refillPerSecond: 20 },
            AttachNetworkInterface: { burst: 1, refillPerSecond: 20 },
            DescribeNetworkInterfaces: { burst: 2, refillPerSecond: 20 },
          },
        },
      },
    });
    const instances = [harness.launch('m5.large'), harness.launch('m5.large'), harness.launch('m5.large')];
    for (const instance of instances) {
      await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    }
    await Promise.all(instances.map((instance) => allocateNode(instance.instanceId, harness.dependencies())));
    expect(harness.ec2.calls.throttled()).toBeGreaterThan(0);
    for (const instance of instances) assertNoDuplicateNoLeak(instance, 1);
  });

  it('retries server errors and responses lost after the change was applied, without duplicates', async () => {
    harness = await startAllocationHarness();
    harness.ec2.faults.inject({ action: 'CreateNetworkInterface', kind: 'lost-response', times: 1 });
    harness.ec2.faults.inject({ action: 'AttachNetworkInterface', kind: 'server-error', times: 2 });
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    await allocateNode(instance.instanceId, harness.dependencies());
    assertNoDuplicateNoLeak(instance, 1);
  });

  it('moves to the next device index when the planned one turns out to be taken', async () => {
    harness = await startAllocationHarness();
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    // Another actor attaches an ENI at index 1 between our Describe and our Attach.
    harness.ec2.setBeforeApply((action) => {
      if (action !== 'AttachNetworkInterface') return;
      harness.ec2.setBeforeApply(undefined);
      const { networkInterface } = harness.ec2.state.createNetworkInterface({
        subnetId: harness.seed.subnets.nodesA.subnetId,
      });
      harness.ec2.state.attachNetworkInterface({
        networkInterfaceId: networkInterface.networkInterfaceId,
        instanceId: instance.instanceId,
        deviceIndex: 1,
      });
    });
    await allocateNode(instance.instanceId, harness.dependencies());
    const ours = harness
      .secondaryEnis(instance.instanceId)
      .filter((eni) => eni.tags['serverless-eni-ipam/instance-id'] === instance.instanceId);
    expect(ours.map((eni) => eni.attachment?.deviceIndex)).toEqual([2]);
    expect(harness.ec2.state.networkInterfaces({ status: 'available' })).toEqual([]);
  });
});
