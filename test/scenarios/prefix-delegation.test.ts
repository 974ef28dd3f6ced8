import { afterEach, describe, expect, it } from 'vitest';
import { desiredPool, desiredStatusEnis } from '../../functions/core/ciliumnode-render.ts';
import { ownershipTags } from '../../functions/core/eni-ownership.ts';
import { isExcluded } from '../../functions/core/eni-selection.ts';
import { expandCidr } from '../../functions/core/ip-math.ts';
import type { NodeRecord } from '../../functions/core/model.ts';
import { allocateNode } from '../../functions/services/allocate-node.ts';
import type { InstanceRecord } from '../emulators/ec2/index.ts';
import {
  type AllocationHarness,
  CLUSTER_NAME,
  startAllocationHarness,
} from '../support/allocation-harness.ts';
import { dynamoItemSizeBytes } from '../support/item-size.ts';

/**
 * Prefix delegation end to end, against the stand-ins (EC2 emulator, DynamoDB Local, the
 * Kubernetes emulator for the knobs): what EC2 ends up holding, what the node record stores (/28s
 * as prefixes, never expanded), and what the CiliumNode would publish (every /28 expanded into its
 * 16 addresses in `status.eni.enis[].addresses` and `spec.ipam.pool`).
 *
 * Expected counts are cilium's (functions/README.md, *Cilium's formulas*): needed = max(pre-allocate - (available -
 * used), min-allocate - available), capped at max-allocate or at the instance's maximum
 * `(ENIs - first-interface-index) × (ipv4PerInterface - 1) × 16`; a /28 is the unit, so a need of n
 * addresses asks for ceil(n / 16) prefixes; a new ENI takes up to `ipv4PerInterface - 1` prefixes
 * at once (the 1.20 rule).
 */

const DYNAMODB_ITEM_LIMIT_BYTES = 400 * 1024;

let harness: AllocationHarness;
afterEach(async () => {
  await harness.close();
});

async function startWithPrefixDelegation(): Promise<AllocationHarness> {
  harness = await startAllocationHarness({ settings: { prefixDelegationEnabled: true } });
  return harness;
}

/** Plain secondary IPs and /28 prefixes on one ENI. */
interface EniShape {
  readonly ips: number;
  readonly prefixes: number;
}

/** What EC2 holds on each ENI of the instance, by device index (the emulator's omniscient view). */
function ec2Shape(instance: InstanceRecord): Record<number, EniShape> {
  const shape: Record<number, EniShape> = {};
  for (const eni of harness.ec2.state.networkInterfaces({ instanceId: instance.instanceId })) {
    shape[eni.attachment?.deviceIndex ?? -1] = {
      ips: eni.secondaryPrivateIpAddresses.length,
      prefixes: eni.ipv4Prefixes.length,
    };
  }
  return shape;
}

/** What the node record stores on each ENI, by device index. */
function recordShape(record: NodeRecord | undefined): Record<number, EniShape> {
  const shape: Record<number, EniShape> = {};
  for (const eni of record?.enis ?? []) {
    shape[eni.deviceIndex] = { ips: eni.secondaryIps.length, prefixes: eni.prefixes.length };
  }
  return shape;
}

async function recordOf(instance: InstanceRecord): Promise<NodeRecord> {
  const record = await harness.table.store.get(instance.instanceId);
  if (!record) throw new Error(`no record for ${instance.instanceId}`);
  return record;
}

/**
 * The record agrees with EC2 address for address (prefixes stored as the CIDRs EC2 delegated), and
 * the rendered CiliumNode expands every /28: each ENI's `addresses` holds its secondary IPs plus the
 * 16 addresses of each prefix, `prefixes` lists the CIDRs, and the pool holds exactly the addresses
 * of the non-excluded ENIs, each pointing at its ENI.
 */
function expectRecordMatchesEc2AndRendersExpanded(instance: InstanceRecord, record: NodeRecord): void {
  for (const ec2Eni of harness.ec2.state.networkInterfaces({ instanceId: instance.instanceId })) {
    const recorded = record.enis.find((eni) => eni.id === ec2Eni.networkInterfaceId);
    expect(recorded, ec2Eni.networkInterfaceId).toBeDefined();
    expect([...(recorded?.prefixes ?? [])].sort()).toEqual([...ec2Eni.ipv4Prefixes].sort());
    expect([...(recorded?.secondaryIps ?? [])].sort()).toEqual(
      [...ec2Eni.secondaryPrivateIpAddresses].sort(),
    );
  }

  const status = desiredStatusEnis(record);
  const pool = desiredPool(record);
  let expectedPoolSize = 0;
  for (const eni of record.enis) {
    const expanded = eni.prefixes.flatMap((prefix) => expandCidr(prefix));
    expect(expanded).toHaveLength(eni.prefixes.length * 16);
    const rendered = status[eni.id];
    expect(rendered?.addresses ?? []).toHaveLength(eni.secondaryIps.length + expanded.length);
    expect(rendered?.addresses ?? []).toEqual(expect.arrayContaining([...eni.secondaryIps, ...expanded]));
    if (eni.prefixes.length > 0) {
      expect([...(rendered?.prefixes ?? [])].sort()).toEqual([...eni.prefixes].sort());
    } else {
      expect(rendered?.prefixes).toBeUndefined();
    }
    if (isExcluded(eni, record.knobs)) continue;
    expectedPoolSize += eni.secondaryIps.length + expanded.length;
    for (const address of [...eni.secondaryIps, ...expanded]) {
      expect(pool[address]).toEqual({ resource: eni.id });
    }
  }
  expect(Object.keys(pool)).toHaveLength(expectedPoolSize);
}

/** What the agent reports: the first `count` pool addresses (in the rendered pool's order) as used. */
async function reportUsed(instance: InstanceRecord, count: number): Promise<void> {
  const pool = desiredPool(await recordOf(instance));
  const addresses = Object.keys(pool).slice(0, count);
  expect(addresses).toHaveLength(count);
  const used = Object.fromEntries(
    addresses.map((address) => [address, { owner: `pod-${address}`, resource: pool[address]?.resource }]),
  );
  const node = await harness.ciliumNodes.get(instance.privateDnsName);
  await harness.ciliumNodes.patchStatus(instance.privateDnsName, [
    { op: 'test', path: '/metadata/resourceVersion', value: node?.metadata.resourceVersion },
    { op: node?.status ? 'replace' : 'add', path: '/status', value: { ipam: { used } } },
  ]);
}

function subnetOfDevice(instance: InstanceRecord, deviceIndex: number): string | undefined {
  return harness.ec2.state
    .networkInterfaces({ instanceId: instance.instanceId })
    .find((eni) => eni.attachment?.deviceIndex === deviceIndex)?.subnetId;
}

const none = { ips: 0, prefixes: 0 };
const prefixes = (count: number): EniShape => ({ ips: 0, prefixes: count });
const ips = (count: number): EniShape => ({ ips: count, prefixes: 0 });

describe('a nitro or bare-metal node gets /28 prefixes, as cilium-operator would give it', () => {
  it.each([
    {
      case: 'm5.large, first-interface-index 1: one new ENI with one /28 (16 addresses for pre-allocate 8)',
      instanceType: 'm5.large',
      spec: { eni: { 'first-interface-index': 1 } },
      expected: { 0: none, 1: prefixes(1) },
      delegated: true,
    },
    {
      case: 'm5.large, first-interface-index 0, untagged eth0 (not ours): one /28 on a new ENI',
      instanceType: 'm5.large',
      spec: { eni: { 'first-interface-index': 0 } },
      expected: { 0: none, 1: prefixes(1) },
      delegated: true,
    },
    {
      case: 'm5.large, pre-allocate 20: ceil(20 / 16) = 2 prefixes',
      instanceType: 'm5.large',
      spec: { eni: { 'first-interface-index': 1 }, ipam: { 'pre-allocate': 20 } },
      expected: { 0: none, 1: prefixes(2) },
      delegated: true,
    },
    {
      case: 'm5.large, min-allocate 40: ceil(40 / 16) = 3 prefixes on one new ENI',
      instanceType: 'm5.large',
      spec: { eni: { 'first-interface-index': 1 }, ipam: { 'min-allocate': 40 } },
      expected: { 0: none, 1: prefixes(3) },
      delegated: true,
    },
    {
      case: 'm5.large, max-allocate 5: a /28 is the unit, so still one prefix',
      instanceType: 'm5.large',
      spec: { eni: { 'first-interface-index': 1 }, ipam: { 'max-allocate': 5 } },
      expected: { 0: none, 1: prefixes(1) },
      delegated: true,
    },
    {
      case: 'm5.large, min-allocate 300: capped at the maximum 2 × 9 × 16 = 288, two full ENIs',
      instanceType: 'm5.large',
      spec: { eni: { 'first-interface-index': 1 }, ipam: { 'min-allocate': 300 } },
      expected: { 0: none, 1: prefixes(9), 2: prefixes(9) },
      delegated: true,
    },
    {
      case: 'm5.4xlarge, min-allocate 100: ceil(100 / 16) = 7 prefixes',
      instanceType: 'm5.4xlarge',
      spec: { eni: { 'first-interface-index': 1 }, ipam: { 'min-allocate': 100 } },
      expected: { 0: none, 1: prefixes(7) },
      delegated: true,
    },
    {
      case: 'm5.4xlarge, first-interface-index 0, max-above-watermark 40: ceil(48 / 16) = 3 on a new ENI',
      instanceType: 'm5.4xlarge',
      spec: { eni: { 'first-interface-index': 0 }, ipam: { 'max-above-watermark': 40 } },
      expected: { 0: none, 1: prefixes(3) },
      delegated: true,
    },
    {
      case: 'c5.metal (bare metal, no hypervisor reported): one /28',
      instanceType: 'c5.metal',
      spec: { eni: { 'first-interface-index': 1 } },
      expected: { 0: none, 1: prefixes(1) },
      delegated: true,
    },
    {
      case: 't2.medium (xen) never gets prefixes: 5 + 3 single IPs',
      instanceType: 't2.medium',
      spec: { eni: { 'first-interface-index': 1 } },
      expected: { 0: none, 1: ips(5), 2: ips(3) },
      delegated: false,
    },
    {
      case: 'm5.large with disable-prefix-delegation: 8 single IPs',
      instanceType: 'm5.large',
      spec: { eni: { 'first-interface-index': 1, 'disable-prefix-delegation': true } },
      expected: { 0: none, 1: ips(8) },
      delegated: false,
    },
  ])('$case', async ({ instanceType, spec, expected, delegated }) => {
    await startWithPrefixDelegation();
    const instance = harness.launch(instanceType);
    await harness.createCiliumNode(instance, spec);
    const outcome = await allocateNode(instance.instanceId, harness.dependencies());
    expect(outcome).toMatchObject({ kind: 'reconciled' });
    if (outcome.kind === 'reconciled') expect(outcome.blocked).toBeUndefined();

    expect(ec2Shape(instance)).toEqual(expected);
    const record = await recordOf(instance);
    expect(recordShape(record)).toEqual(expected);
    expect(record.prefixDelegation).toBe(delegated);
    expect(record.lease).toBeUndefined();
    expectRecordMatchesEc2AndRendersExpanded(instance, record);

    // A second run finds the pool satisfied: no EC2 mutation, no new record version.
    const mutating = harness.ec2.calls.mutating();
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(harness.ec2.calls.mutating()).toBe(mutating);
    expect((await recordOf(instance)).version).toBe(record.version);
  });

  it('with the stack switch off, a nitro node gets single IPs', async () => {
    harness = await startAllocationHarness();
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(ec2Shape(instance)).toEqual({ 0: none, 1: ips(8) });
    expect((await recordOf(instance)).prefixDelegation).toBe(false);
  });

  it('grows by whole prefixes as the agent uses addresses', async () => {
    await startWithPrefixDelegation();
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    await allocateNode(instance.instanceId, harness.dependencies());
    await reportUsed(instance, 12);
    await allocateNode(instance.instanceId, harness.dependencies());
    // used 12 of 16: needed = 8 - (16 - 12) = 4 → one more /28 on the same ENI.
    expect(ec2Shape(instance)).toEqual({ 0: none, 1: prefixes(2) });
    expectRecordMatchesEc2AndRendersExpanded(instance, await recordOf(instance));
  });
});

describe('a subnet without a free /28 (InsufficientCidrBlocks)', () => {
  it('create path: prefixes land in the next suitable subnet instead of falling back (cilium #46644)', async () => {
    await startWithPrefixDelegation();
    const { nodesA, tinyA, podsA } = harness.seed.subnets;
    harness.ec2.state.setSubnetFragmented(nodesA.subnetId, true);
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    await allocateNode(instance.instanceId, harness.dependencies());

    // Asked in order: the node subnet (fragmented), tiny-a (a /28 subnet has no free aligned /28),
    // then pods-a, which delegates.
    expect(ec2Shape(instance)).toEqual({ 0: none, 1: prefixes(1) });
    expect(subnetOfDevice(instance, 1)).toBe(podsA.subnetId);
    expect(harness.ec2.calls.countWithOutcome('client-error', 'CreateNetworkInterface')).toBe(2);
    expect(harness.ec2.calls.countWithOutcome('ok', 'CreateNetworkInterface')).toBe(1);
    const record = await recordOf(instance);
    expect(record.prefixDelegation).toBe(true);
    expect(record.enis.find((eni) => eni.deviceIndex === 1)?.subnetId).toBe(podsA.subnetId);
    expectRecordMatchesEc2AndRendersExpanded(instance, record);
    expect(harness.ec2.state.networkInterfaces({ status: 'available' })).toEqual([]);
    expect(tinyA.subnetId).not.toBe(podsA.subnetId);
  });

  it('a full node subnet moves the next ENI elsewhere too (m5.large min-allocate 300 outgrows the 14 /28s of a /24)', async () => {
    await startWithPrefixDelegation();
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, {
      eni: { 'first-interface-index': 1 },
      ipam: { 'min-allocate': 300 },
    });
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(ec2Shape(instance)).toEqual({ 0: none, 1: prefixes(9), 2: prefixes(9) });
    expect(subnetOfDevice(instance, 1)).toBe(harness.seed.subnets.nodesA.subnetId);
    expect(subnetOfDevice(instance, 2)).toBe(harness.seed.subnets.podsA.subnetId);
  });

  it('assign path: with a device slot free, a new ENI with prefixes in another subnet comes before single IPs; without one, single IPs go on the prefixed ENI', async () => {
    await startWithPrefixDelegation();
    const { nodesA, podsA } = harness.seed.subnets;
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(ec2Shape(instance)).toEqual({ 0: none, 1: prefixes(1) });
    expect(subnetOfDevice(instance, 1)).toBe(nodesA.subnetId);

    // The node subnet fragments; the agent uses all 16: needed 8. ENI 1 cannot get a /28, and
    // device index 2 is free: a new ENI in pods-a gets one, ENI 1 is left as it was.
    harness.ec2.state.setSubnetFragmented(nodesA.subnetId, true);
    await reportUsed(instance, 16);
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(ec2Shape(instance)).toEqual({ 0: none, 1: prefixes(1), 2: prefixes(1) });
    expect(subnetOfDevice(instance, 2)).toBe(podsA.subnetId);
    let record = await recordOf(instance);
    expect(record.prefixDelegation).toBe(true);
    expectRecordMatchesEc2AndRendersExpanded(instance, record);

    // pods-a fragments too and no device slot is left (m5.large: 3 ENIs): only now single IPs,
    // min(needed 8, free slots 8) on ENI 1, which keeps its /28 and so keeps the node delegated.
    harness.ec2.state.setSubnetFragmented(podsA.subnetId, true);
    await reportUsed(instance, 32);
    const outcome = await allocateNode(instance.instanceId, harness.dependencies());
    expect(ec2Shape(instance)).toEqual({ 0: none, 1: { ips: 8, prefixes: 1 }, 2: prefixes(1) });
    record = await recordOf(instance);
    expect(recordShape(record)).toEqual({ 0: none, 1: { ips: 8, prefixes: 1 }, 2: prefixes(1) });
    expect(record.prefixDelegation).toBe(true);
    expect(record.lastError).toBeUndefined();
    expect(outcome).toMatchObject({ kind: 'reconciled', neededIps: 0 });
    expect(harness.logs.some((entry) => /falling back to single IPs/.test(entry.message))).toBe(true);
    expectRecordMatchesEc2AndRendersExpanded(instance, record);
    expect(desiredStatusEnis(record)[record.enis[1]?.id ?? '']?.addresses).toHaveLength(24);

    // Nothing more to do, and the next run does not try again.
    const mutating = harness.ec2.calls.mutating();
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(harness.ec2.calls.mutating()).toBe(mutating);
  });

  it('first-interface-index 0 with a fragmented node subnet: eth0 is left alone, a new ENI gets the /28', async () => {
    await startWithPrefixDelegation();
    const { nodesA, podsA } = harness.seed.subnets;
    harness.ec2.state.setSubnetFragmented(nodesA.subnetId, true);
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 0 } });
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(ec2Shape(instance)).toEqual({ 0: none, 1: prefixes(1) });
    expect(subnetOfDevice(instance, 1)).toBe(podsA.subnetId);
    expect((await recordOf(instance)).prefixDelegation).toBe(true);
  });

  it('every suitable subnet fragmented: single IPs (cilium #20822, #31016), and the node stays on single IPs after (all-or-nothing)', async () => {
    await startWithPrefixDelegation();
    const { nodesA, podsA } = harness.seed.subnets;
    harness.ec2.state.setSubnetFragmented(nodesA.subnetId, true);
    harness.ec2.state.setSubnetFragmented(podsA.subnetId, true);
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    await allocateNode(instance.instanceId, harness.dependencies());

    // nodes-a, tiny-a and pods-a each refused a /28 once; then one ENI with 8 single IPs.
    expect(ec2Shape(instance)).toEqual({ 0: none, 1: ips(8) });
    expect(subnetOfDevice(instance, 1)).toBe(nodesA.subnetId);
    expect(harness.ec2.calls.countWithOutcome('client-error', 'CreateNetworkInterface')).toBe(3);
    let record = await recordOf(instance);
    expect(record.prefixDelegation).toBe(false);
    expect(record.lastError).toBeUndefined();
    expectRecordMatchesEc2AndRendersExpanded(instance, record);

    // The subnets recover, demand grows: an ENI holds plain IPs, so the node is no longer
    // prefix-delegated (cilium IsPrefixDelegated) and every later address is a single IP.
    harness.ec2.state.setSubnetFragmented(nodesA.subnetId, false);
    harness.ec2.state.setSubnetFragmented(podsA.subnetId, false);
    await reportUsed(instance, 8);
    await allocateNode(instance.instanceId, harness.dependencies());
    // needed = 8 - (8 - 8) = 8: ENI 1 takes its last free slot, a new ENI the other 7.
    expect(ec2Shape(instance)).toEqual({ 0: none, 1: ips(9), 2: ips(7) });
    record = await recordOf(instance);
    expect(record.prefixDelegation).toBe(false);
    expectRecordMatchesEc2AndRendersExpanded(instance, record);
  });
});

describe('record size', () => {
  it('a fully prefix-allocated m5.24xlarge (15 ENIs × 49 /28s) is stored as prefixes in DynamoDB Local, far under 400 KB', async () => {
    await startWithPrefixDelegation();
    const state = harness.ec2.state;
    const large = state.addSubnet({
      vpcId: harness.seed.vpc.vpcId,
      availabilityZone: harness.seed.availabilityZones[0],
      cidrBlock: '10.0.128.0/17',
    });
    // eth0 carries our tags (set by the node launch template), so it is ours to fill too.
    const instance = harness.launch('m5.24xlarge', {
      subnetId: large.subnetId,
      primaryNetworkInterfaceTags: ownershipTags(CLUSTER_NAME, 'launch-template'),
    });
    const maximum = 15 * 49 * 16;
    await harness.createCiliumNode(instance, {
      eni: { 'first-interface-index': 0 },
      ipam: { 'min-allocate': maximum },
    });
    const outcome = await allocateNode(instance.instanceId, harness.dependencies());
    expect(outcome).toMatchObject({ kind: 'reconciled', neededIps: 0 });

    const expected = Object.fromEntries(Array.from({ length: 15 }, (_, index) => [index, prefixes(49)]));
    expect(ec2Shape(instance)).toEqual(expected);
    const record = await recordOf(instance); // read back from DynamoDB Local
    expect(recordShape(record)).toEqual(expected);
    expect(record.enis.every((eni) => eni.secondaryIps.length === 0)).toBe(true);
    expect(record.enis.every((eni) => eni.prefixes.every((prefix) => prefix.endsWith('/28')))).toBe(true);
    expectRecordMatchesEc2AndRendersExpanded(instance, record);
    expect(Object.keys(desiredPool(record))).toHaveLength(maximum);

    const sizeBytes = dynamoItemSizeBytes(record);
    expect(sizeBytes).toBeLessThan(DYNAMODB_ITEM_LIMIT_BYTES / 8);
    // Expanded, the same addresses alone would take more than 3 times the whole record.
    const expandedAddressBytes = Object.keys(desiredPool(record)).reduce(
      (total, address) => total + address.length + 1,
      0,
    );
    expect(expandedAddressBytes).toBeGreaterThan(3 * sizeBytes);
  });
});
