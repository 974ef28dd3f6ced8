import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { NodeRecord } from '../../functions/core/model.ts';
import { allocateNode } from '../../functions/services/allocate-node.ts';
import type { InstanceRecord } from '../emulators/ec2/index.ts';
import {
  type AllocationHarness,
  CLUSTER_NAME,
  startAllocationHarness,
} from '../support/allocation-harness.ts';

const MUTATING_ACTIONS = [
  'CreateNetworkInterface',
  'AttachNetworkInterface',
  'ModifyNetworkInterfaceAttribute',
  'AssignPrivateIpAddresses',
  'UnassignPrivateIpAddresses',
  'DetachNetworkInterface',
  'DeleteNetworkInterface',
  'CreateTags',
  'DeleteTags',
];

let harness: AllocationHarness;

beforeEach(async () => {
  harness = await startAllocationHarness();
});
afterEach(async () => {
  await harness.close();
});

function poolOf(record: NodeRecord | undefined, fromDeviceIndex = 0): Record<number, number> {
  const sizes: Record<number, number> = {};
  for (const eni of record?.enis ?? []) {
    if (eni.deviceIndex >= fromDeviceIndex) sizes[eni.deviceIndex] = eni.secondaryIps.length;
  }
  return sizes;
}

/** Secondary IPs per device index, as EC2 holds them (the emulator's omniscient view). */
function ec2PoolOf(instance: InstanceRecord): Record<number, number> {
  const sizes: Record<number, number> = {};
  for (const eni of harness.ec2.state.networkInterfaces({ instanceId: instance.instanceId })) {
    sizes[eni.attachment?.deviceIndex ?? -1] = eni.secondaryPrivateIpAddresses.length;
  }
  return sizes;
}

function mutatingCalls(): number {
  return MUTATING_ACTIONS.reduce((sum, action) => sum + harness.ec2.calls.count(action), 0);
}

describe('allocation gives each node what cilium-operator would', () => {
  // Expected pools worked out by hand from cilium's formulas (functions/README.md):
  // needed = preAllocate - (available - used), raised to minAllocate - available, capped at
  // maxAllocate (or the instance's maximum); fill existing non-excluded ENIs first, then new ENIs
  // with min(needed + maxAboveWatermark, ipv4 - 1) IPs. Unlike cilium-operator, an eth0 that EC2
  // created untagged is not ours whatever first-interface-index says (our role may not assign to
  // it): with index 0 as with 1, the pool comes from ENIs we create.
  it.each([
    {
      case: 'm5.large, defaults (first-interface-index 0, untagged eth0): one new ENI with 8 IPs',
      instanceType: 'm5.large',
      spec: {},
      expected: { 0: 0, 1: 8 },
    },
    {
      case: 'm5.large, first-interface-index 1: one new ENI with 8 IPs',
      instanceType: 'm5.large',
      spec: { eni: { 'first-interface-index': 1 } },
      expected: { 0: 0, 1: 8 },
    },
    {
      case: 'm5.large, first-interface-index 1, min-allocate 20: capped at the instance maximum 18',
      instanceType: 'm5.large',
      spec: { eni: { 'first-interface-index': 1 }, ipam: { 'min-allocate': 20 } },
      expected: { 0: 0, 1: 9, 2: 9 },
    },
    {
      case: 'm5.large, first-interface-index 1, max-allocate 5',
      instanceType: 'm5.large',
      spec: { eni: { 'first-interface-index': 1 }, ipam: { 'max-allocate': 5 } },
      expected: { 0: 0, 1: 5 },
    },
    {
      case: 'm5.large, first-interface-index 1, max-above-watermark 4: 8 + 4 capped at 9 per ENI',
      instanceType: 'm5.large',
      spec: { eni: { 'first-interface-index': 1 }, ipam: { 'max-above-watermark': 4 } },
      expected: { 0: 0, 1: 9 },
    },
    {
      case: 'm5.large, pre-allocate 3',
      instanceType: 'm5.large',
      spec: { ipam: { 'pre-allocate': 3 } },
      expected: { 0: 0, 1: 3 },
    },
    {
      case: 't3.medium, first-interface-index 1: 5 on the first ENI, 3 on the second',
      instanceType: 't3.medium',
      spec: { eni: { 'first-interface-index': 1 } },
      expected: { 0: 0, 1: 5, 2: 3 },
    },
    {
      case: 't3.medium, defaults (untagged eth0): 5 on the first new ENI, 3 on the second',
      instanceType: 't3.medium',
      spec: {},
      expected: { 0: 0, 1: 5, 2: 3 },
    },
    {
      case: 'm5.4xlarge, min-allocate 40 (untagged eth0): 29 and 11 on two new ENIs',
      instanceType: 'm5.4xlarge',
      spec: { ipam: { 'min-allocate': 40 } },
      expected: { 0: 0, 1: 29, 2: 11 },
    },
    {
      case: 'm5.4xlarge, first-interface-index 1, pre-allocate 16, max-above-watermark 10',
      instanceType: 'm5.4xlarge',
      spec: { eni: { 'first-interface-index': 1 }, ipam: { 'pre-allocate': 16, 'max-above-watermark': 10 } },
      expected: { 0: 0, 1: 26 },
    },
  ])('$case', async ({ instanceType, spec, expected }) => {
    const instance = harness.launch(instanceType);
    await harness.createCiliumNode(instance, spec);
    const outcome = await allocateNode(instance.instanceId, harness.dependencies());
    expect(outcome.kind).toBe('reconciled');
    expect(ec2PoolOf(instance)).toEqual(expected);
    const record = await harness.table.store.get(instance.instanceId);
    expect(poolOf(record)).toEqual(expected);
    expect(record?.lease).toBeUndefined();
    // A second run finds nothing to do and writes nothing.
    const calls = mutatingCalls();
    const version = record?.version;
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(mutatingCalls()).toBe(calls);
    expect((await harness.table.store.get(instance.instanceId))?.version).toBe(version);
  });

  it('uses the stack defaults while no CiliumNode exists', async () => {
    const instance = harness.launch('m5.large');
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(ec2PoolOf(instance)).toEqual({ 0: 0, 1: 8 });
    const record = await harness.table.store.get(instance.instanceId);
    expect(record).toMatchObject({ nodeName: instance.privateDnsName, knobs: { preAllocate: 8 } });
  });

  it('asks DescribeInstanceTypes once per type per container', async () => {
    const deps = harness.dependencies();
    for (const instance of [
      harness.launch('m5.large'),
      harness.launch('m5.large'),
      harness.launch('t3.medium'),
    ]) {
      await allocateNode(instance.instanceId, { ...deps, invocationId: instance.instanceId });
    }
    expect(harness.ec2.calls.count('DescribeInstanceTypes')).toBe(2);
  });

  it('grows with the demand the agent reports in status.ipam.used', async () => {
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    await allocateNode(instance.instanceId, harness.dependencies());
    const [eni] = harness.secondaryEnis(instance.instanceId);
    const used = Object.fromEntries(
      (eni?.secondaryPrivateIpAddresses ?? [])
        .slice(0, 6)
        .map((ip) => [ip, { owner: 'pod', resource: eni?.networkInterfaceId }]),
    );
    const node = await harness.ciliumNodes.get(instance.privateDnsName);
    await harness.ciliumNodes.patchStatus(instance.privateDnsName, [
      { op: 'test', path: '/metadata/resourceVersion', value: node?.metadata.resourceVersion },
      { op: 'add', path: '/status', value: { ipam: { used } } },
    ]);
    await allocateNode(instance.instanceId, harness.dependencies());
    // used 6 of 8: needed = 8 - (8 - 6) = 6 → fill ENI 1 up to 9, then 5 more on a new ENI.
    expect(ec2PoolOf(instance)).toEqual({ 0: 0, 1: 9, 2: 5 });
  });
});

describe('one new ENI', () => {
  it('costs exactly 3 mutating EC2 calls when nothing fails: create (IPs and tags), attach, delete-on-termination', async () => {
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    harness.ec2.calls.reset();
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(mutatingCalls()).toBe(3);
    expect(harness.ec2.calls.count('CreateNetworkInterface')).toBe(1);
    expect(harness.ec2.calls.count('AttachNetworkInterface')).toBe(1);
    expect(harness.ec2.calls.count('ModifyNetworkInterfaceAttribute')).toBe(1);
    const [eni] = harness.secondaryEnis(instance.instanceId);
    expect(eni?.attachment?.deleteOnTermination).toBe(true);
    expect(eni?.tags).toMatchObject({
      'cluster.k8s.amazonaws.com/name': CLUSTER_NAME,
      'io.cilium/cilium-managed': 'true',
      'serverless-eni-ipam/instance-id': instance.instanceId,
    });
    expect(eni?.description).toBe(`Cilium-CNI (${instance.instanceId})`);
  });

  it('is left without delete-on-termination when the node says so', async () => {
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, {
      eni: { 'first-interface-index': 1, 'delete-on-termination': false },
    });
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(harness.ec2.calls.count('ModifyNetworkInterfaceAttribute')).toBe(0);
    expect(harness.secondaryEnis(instance.instanceId)[0]?.attachment?.deleteOnTermination).toBe(false);
  });

  it('publishes the new addresses before setting delete-on-termination, then records the flag', async () => {
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    const published: { record: NodeRecord; modifiesBefore: number }[] = [];
    const publish = async (record: NodeRecord) => {
      published.push({ record, modifiesBefore: harness.ec2.calls.count('ModifyNetworkInterfaceAttribute') });
    };
    const outcome = await allocateNode(instance.instanceId, harness.dependencies({ publish }));
    expect(outcome.kind).toBe('reconciled');
    // One publication for the launch: the early one already holds every address.
    expect(published).toHaveLength(1);
    const [early] = published;
    expect(early?.modifiesBefore).toBe(0);
    const earlyEni = early?.record.enis.find((eni) => eni.deviceIndex === 1);
    expect(earlyEni?.secondaryIps).toHaveLength(8);
    expect(earlyEni?.deleteOnTermination).toBe(false);

    const final = await harness.table.store.get(instance.instanceId);
    expect(final?.version).toBe((early?.record.version ?? 0) + 1);
    expect(final?.enis.find((eni) => eni.deviceIndex === 1)?.deleteOnTermination).toBe(true);
    expect(harness.secondaryEnis(instance.instanceId)[0]?.attachment?.deleteOnTermination).toBe(true);
  });

  it('keeps a launch whose delete-on-termination EC2 refuses, and sets it on the next invocation', async () => {
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    // EC2 answers every ModifyNetworkInterfaceAttribute with 500 InternalError, past the retries.
    const refusal = harness.ec2.faults.arm({
      kind: 'server-error',
      action: 'ModifyNetworkInterfaceAttribute',
      times: Number.POSITIVE_INFINITY,
    });
    const first = await allocateNode(instance.instanceId, harness.dependencies());
    expect(first.kind).toBe('reconciled');
    expect(refusal.hits).toBeGreaterThan(0);
    harness.ec2.faults.clear();
    const [eni] = harness.secondaryEnis(instance.instanceId);
    expect(eni?.secondaryPrivateIpAddresses).toHaveLength(8);
    expect(eni?.attachment?.deleteOnTermination).toBe(false);
    const recorded = (await harness.table.store.get(instance.instanceId))?.enis.find(
      (candidate) => candidate.id === eni?.networkInterfaceId,
    );
    expect(recorded?.deleteOnTermination).toBe(false);
    expect(recorded?.secondaryIps).toHaveLength(8);
    expect(harness.logs.some((line) => line.message.includes('could not set delete-on-termination'))).toBe(
      true,
    );

    const next = await allocateNode(instance.instanceId, harness.dependencies());
    expect(next.kind === 'reconciled' && next.results).toEqual([
      { kind: 'repaired', eniId: eni?.networkInterfaceId },
    ]);
    expect(harness.secondaryEnis(instance.instanceId)[0]?.attachment?.deleteOnTermination).toBe(true);
  });
});

describe('subnets and security groups follow the node knobs', () => {
  it('creates ENIs in the subnet named by subnet-ids', async () => {
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, {
      eni: { 'first-interface-index': 1, 'subnet-ids': [harness.seed.subnets.podsA.subnetId] },
    });
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(harness.secondaryEnis(instance.instanceId).map((eni) => eni.subnetId)).toEqual([
      harness.seed.subnets.podsA.subnetId,
    ]);
  });

  it('creates ENIs in a subnet matching subnet-tags, with security groups matching security-group-tags', async () => {
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, {
      eni: {
        'first-interface-index': 1,
        'subnet-tags': { 'cilium.io/pod-subnet': 'true' },
        'security-group-tags': { role: 'pods' },
      },
    });
    await allocateNode(instance.instanceId, harness.dependencies());
    const [eni] = harness.secondaryEnis(instance.instanceId);
    expect(eni?.subnetId).toBe(harness.seed.subnets.podsA.subnetId);
    expect(eni?.securityGroupIds).toEqual([harness.seed.securityGroups.pods.groupId]);
  });

  it("uses eth0's security groups when the node names none", async () => {
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(harness.secondaryEnis(instance.instanceId)[0]?.securityGroupIds).toEqual([
      harness.seed.securityGroups.nodes.groupId,
    ]);
  });

  it('never touches an ENI matching exclude-interface-tags, and attaches past it', async () => {
    const instance = harness.launch('m5.large');
    const foreign = harness.ec2.state.createNetworkInterface({
      subnetId: harness.seed.subnets.nodesA.subnetId,
      secondaryPrivateIpAddressCount: 1,
      tags: { 'no-cilium': 'true' },
    });
    harness.ec2.state.attachNetworkInterface({
      networkInterfaceId: foreign.networkInterface.networkInterfaceId,
      instanceId: instance.instanceId,
      deviceIndex: 1,
    });
    await harness.createCiliumNode(instance, {
      eni: { 'first-interface-index': 1, 'exclude-interface-tags': { 'no-cilium': 'true' } },
    });
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(ec2PoolOf(instance)).toEqual({ 0: 0, 1: 1, 2: 8 });
    const record = await harness.table.store.get(instance.instanceId);
    expect(record?.enis.map((eni) => eni.deviceIndex)).toEqual([0, 1, 2]);
  });

  it('moves on to the next suitable subnet when one runs out of addresses', async () => {
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, {
      eni: { 'first-interface-index': 1, 'subnet-tags': { purpose: 'tiny' } },
      ipam: { 'min-allocate': 18 },
    });
    await allocateNode(instance.instanceId, harness.dependencies());
    const enis = harness.secondaryEnis(instance.instanceId);
    expect(enis.map((eni) => eni.secondaryPrivateIpAddresses.length)).toEqual([9, 9]);
    expect(enis[0]?.subnetId).toBe(harness.seed.subnets.tinyA.subnetId);
    expect(enis[1]?.subnetId).not.toBe(harness.seed.subnets.tinyA.subnetId);
  });

  it('records the error on the node item when no subnet has room', async () => {
    // The only subnet of the cluster VPC in its zone is a /28.
    const only = harness.ec2.state.addSubnet({
      vpcId: harness.seed.vpc.vpcId,
      availabilityZone: 'us-east-1c',
      cidrBlock: '10.0.9.0/28',
    });
    const instance = harness.launch('m5.large', { subnetId: only.subnetId });
    await harness.createCiliumNode(instance, {
      eni: { 'first-interface-index': 1 },
      ipam: { 'min-allocate': 18 },
    });
    await allocateNode(instance.instanceId, harness.dependencies());
    const record = await harness.table.store.get(instance.instanceId);
    expect(record?.lastError?.code).toMatch(/Subnet/);
    expect(record?.enis.length).toBeGreaterThanOrEqual(1);
    expect(harness.ec2.state.networkInterfaces({ status: 'available' })).toEqual([]);
  });
});

describe('bad input writes nothing and mutates nothing', () => {
  it.each([{ case: 'an unknown instance', instanceId: 'i-0000000000000dead', reason: 'unknown-instance' }])(
    'ignores $case',
    async ({ instanceId, reason }) => {
      const outcome = await allocateNode(instanceId, harness.dependencies());
      expect(outcome).toMatchObject({ kind: 'ignored', reason });
      expect(await harness.table.store.get(instanceId)).toBeUndefined();
      expect(mutatingCalls()).toBe(0);
    },
  );

  it('ignores an instance of another cluster', async () => {
    const instance = harness.ec2.state.launchInstance({
      instanceType: 'm5.large',
      subnetId: harness.seed.subnets.nodesA.subnetId,
      tags: { 'kubernetes.io/cluster/other': 'owned' },
    });
    const outcome = await allocateNode(instance.instanceId, harness.dependencies());
    expect(outcome).toMatchObject({ kind: 'ignored', reason: 'not-in-cluster' });
    expect(await harness.table.store.get(instance.instanceId)).toBeUndefined();
    expect(mutatingCalls()).toBe(0);
  });

  it('ignores a terminated instance', async () => {
    const instance = harness.launch('m5.large');
    harness.ec2.state.setInstanceState(instance.instanceId, 'terminated');
    const outcome = await allocateNode(instance.instanceId, harness.dependencies());
    expect(outcome).toMatchObject({ kind: 'ignored', reason: 'not-running' });
    expect(await harness.table.store.get(instance.instanceId)).toBeUndefined();
    expect(mutatingCalls()).toBe(0);
  });

  it("uses the stack defaults, not a foreign CiliumNode's knobs", async () => {
    const instance = harness.launch('m5.large');
    await harness.ciliumNodes.create({
      apiVersion: 'cilium.io/v2',
      kind: 'CiliumNode',
      metadata: { name: instance.privateDnsName },
      spec: {
        'instance-id': 'i-0ffffffffffffffff',
        ipam: { 'min-allocate': 9 },
        eni: { 'first-interface-index': 1 },
      },
    });
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(ec2PoolOf(instance)).toEqual({ 0: 0, 1: 8 });
    expect(
      harness.logs.some((entry) => entry.level === 'error' && /another instance/.test(entry.message)),
    ).toBe(true);
  });
});
