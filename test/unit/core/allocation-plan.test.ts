import { describe, expect, it } from 'vitest';
import {
  type AllocationPlan,
  type AllocationSnapshot,
  computePoolDemand,
  eniDescription,
  planAllocation,
} from '../../../functions/core/allocation-plan.ts';
import type { EniState, InstanceLimits } from '../../../functions/core/model.ts';
import {
  eni,
  INSTANCE_ID,
  instance,
  knobs,
  M5_4XLARGE,
  M5_LARGE,
  NODE_SUBNET,
  refused,
  securityGroup,
  subnet,
  T3_MEDIUM,
} from './fixtures.ts';

const eth0 = eni({ deviceIndex: 0 });
const podsA = subnet('subnet-pods-a', 200, { tags: { role: 'pods', tier: 'a' } });
const podsB = subnet('subnet-pods-b', 500, { tags: { role: 'pods', tier: 'b' } });
const other = subnet('subnet-other', 100);
const exhaustedNodeSubnet = { ...NODE_SUBNET, availableAddresses: 0 };
const NODE_GROUPS = ['sg-node-a', 'sg-node-b'];

function snapshotOf(limits: InstanceLimits | undefined, overrides: Partial<AllocationSnapshot> = {}) {
  return {
    instance: instance(),
    limits,
    enis: [eth0],
    subnets: [NODE_SUBNET],
    securityGroups: [],
    knobs: knobs(),
    usedIpCount: 0,
    prefixDelegationEnabled: false,
    refusals: refused(),
    ...overrides,
  } satisfies AllocationSnapshot;
}

/** Full ENIs at the given device indexes (secondary count = the per-ENI limit). */
function fullEnis(limits: InstanceLimits, ...indexes: number[]): EniState[] {
  return indexes.map((deviceIndex) => eni({ deviceIndex, secondaryCount: limits.ipv4PerInterface - 1 }));
}

function createEni(fields: {
  deviceIndex: number;
  neededIps: number;
  ipCount?: number;
  prefixCount?: number;
  subnetCandidates?: string[];
  securityGroupIds?: string[];
}): AllocationPlan {
  const { ipCount, prefixCount, ...rest } = fields;
  return {
    kind: 'create',
    subnetCandidates: ['subnet-node'],
    securityGroupIds: NODE_GROUPS,
    description: `Cilium-CNI (${INSTANCE_ID})`,
    ...rest,
    ...(prefixCount === undefined ? { ipCount: ipCount ?? 0 } : { prefixCount }),
  };
}

function assign(fields: {
  eniId: string;
  neededIps: number;
  ipCount?: number;
  prefixCount?: number;
  subnetId?: string;
}): AllocationPlan {
  const { ipCount, prefixCount, ...rest } = fields;
  return {
    kind: 'assign',
    subnetId: 'subnet-node',
    ...rest,
    ...(prefixCount === undefined ? { ipCount: ipCount ?? 0 } : { prefixCount }),
  };
}

type Scenario = { case: string; snapshot: AllocationSnapshot; plan: AllocationPlan };

describe('planAllocation on m5.large (3 ENIs x 10 addresses)', () => {
  const m5 = (overrides: Partial<AllocationSnapshot> = {}) => snapshotOf(M5_LARGE, overrides);
  const fii1 = knobs({ firstInterfaceIndex: 1 });

  it.each<Scenario>([
    {
      case: 'fresh node, first-interface-index 0: fill eth0 up to pre-allocate 8',
      snapshot: m5(),
      plan: assign({ eniId: 'eni-0', ipCount: 8, neededIps: 8 }),
    },
    {
      case: 'fresh node, first-interface-index 1: eth0 excluded, create at device 1',
      snapshot: m5({ knobs: fii1 }),
      plan: createEni({ deviceIndex: 1, ipCount: 8, neededIps: 8 }),
    },
    {
      case: 'max-above-watermark 3: the new ENI takes 9, its limit, not 11',
      snapshot: m5({ knobs: knobs({ firstInterfaceIndex: 1, maxAboveWatermark: 3 }) }),
      plan: createEni({ deviceIndex: 1, ipCount: 9, neededIps: 8 }),
    },
    {
      case: 'pool satisfied: 9 free against pre-allocate 8',
      snapshot: m5({ knobs: fii1, enis: [eth0, ...fullEnis(M5_LARGE, 1)] }),
      plan: { kind: 'done', reason: 'pool-satisfied', neededIps: 0 },
    },
    {
      case: 'explicit pre-allocate 2 with 3 free: satisfied',
      snapshot: m5({
        knobs: knobs({ firstInterfaceIndex: 1, preAllocate: 2 }),
        enis: [eth0, eni({ deviceIndex: 1, secondaryCount: 5 })],
        usedIpCount: 2,
      }),
      plan: { kind: 'done', reason: 'pool-satisfied', neededIps: 0 },
    },
    {
      case: 'eth1 full and 5 used: create at device 2 for the missing 4',
      snapshot: m5({ knobs: fii1, enis: [eth0, ...fullEnis(M5_LARGE, 1)], usedIpCount: 5 }),
      plan: createEni({ deviceIndex: 2, ipCount: 4, neededIps: 4 }),
    },
    {
      case: 'partly used eth1 is filled with needed + max-above-watermark, bounded by its room',
      snapshot: m5({
        knobs: knobs({ firstInterfaceIndex: 1, maxAboveWatermark: 2 }),
        enis: [eth0, eni({ deviceIndex: 1, secondaryCount: 4 })],
        usedIpCount: 3,
      }),
      plan: assign({ eniId: 'eni-1', ipCount: 5, neededIps: 7 }),
    },
    {
      case: 'instance at capacity: 18 of 18 with eth0 excluded',
      snapshot: m5({ knobs: fii1, enis: [eth0, ...fullEnis(M5_LARGE, 1, 2)], usedIpCount: 18 }),
      plan: { kind: 'done', reason: 'instance-at-capacity', neededIps: 0 },
    },
    {
      case: 'max-allocate 10 lets only one more address in',
      snapshot: m5({
        knobs: knobs({ firstInterfaceIndex: 1, maxAllocate: 10 }),
        enis: [eth0, ...fullEnis(M5_LARGE, 1)],
        usedIpCount: 9,
      }),
      plan: createEni({ deviceIndex: 2, ipCount: 1, neededIps: 1 }),
    },
    {
      case: 'max-allocate reached',
      snapshot: m5({
        knobs: knobs({ firstInterfaceIndex: 1, maxAllocate: 9 }),
        enis: [eth0, ...fullEnis(M5_LARGE, 1)],
        usedIpCount: 9,
      }),
      plan: { kind: 'done', reason: 'max-allocate-reached', neededIps: 0 },
    },
    {
      case: 'min-allocate 20 is capped at the 18 the instance holds; one ENI at a time',
      snapshot: m5({ knobs: knobs({ firstInterfaceIndex: 1, minAllocate: 20 }) }),
      plan: createEni({ deviceIndex: 1, ipCount: 9, neededIps: 18 }),
    },
    {
      case: 'ENI excluded by tags is neither counted nor filled; next slot is device 2',
      snapshot: m5({
        knobs: knobs({ firstInterfaceIndex: 1, excludeInterfaceTags: { 'cilium.io/no-manage': 'true' } }),
        enis: [eth0, eni({ deviceIndex: 1, secondaryCount: 2, tags: { 'cilium.io/no-manage': 'true' } })],
      }),
      plan: createEni({ deviceIndex: 2, ipCount: 8, neededIps: 8 }),
    },
    {
      case: 'subnet-ids: listed subnets first, most free first',
      snapshot: m5({
        knobs: knobs({ firstInterfaceIndex: 1, subnetIds: ['subnet-pods-a', 'subnet-pods-b'] }),
        subnets: [NODE_SUBNET, podsA, podsB],
      }),
      plan: createEni({
        deviceIndex: 1,
        ipCount: 8,
        neededIps: 8,
        subnetCandidates: ['subnet-pods-b', 'subnet-pods-a', 'subnet-node'],
      }),
    },
    {
      case: 'subnet-tags: matching subnet first, then the node subnet',
      snapshot: m5({
        knobs: knobs({ firstInterfaceIndex: 1, subnetTags: { role: 'pods', tier: 'a' } }),
        subnets: [NODE_SUBNET, podsA, podsB],
      }),
      plan: createEni({
        deviceIndex: 1,
        ipCount: 8,
        neededIps: 8,
        subnetCandidates: ['subnet-pods-a', 'subnet-node', 'subnet-pods-b'],
      }),
    },
    {
      case: 'exhausted node subnet is not offered',
      snapshot: m5({ knobs: fii1, subnets: [exhaustedNodeSubnet, other] }),
      plan: createEni({ deviceIndex: 1, ipCount: 8, neededIps: 8, subnetCandidates: ['subnet-other'] }),
    },
    {
      case: 'ENI with room in an exhausted subnet: a new ENI goes elsewhere',
      snapshot: m5({
        knobs: fii1,
        enis: [eth0, eni({ deviceIndex: 1, secondaryCount: 3 })],
        subnets: [exhaustedNodeSubnet, other],
        usedIpCount: 3,
      }),
      plan: createEni({ deviceIndex: 2, ipCount: 8, neededIps: 8, subnetCandidates: ['subnet-other'] }),
    },
    {
      case: 'ENI with room in an exhausted subnet and no free slot: blocked',
      snapshot: m5({
        knobs: fii1,
        enis: [eth0, eni({ deviceIndex: 1, secondaryCount: 3 }), ...fullEnis(M5_LARGE, 2)],
        subnets: [exhaustedNodeSubnet, other],
        usedIpCount: 12,
      }),
      plan: {
        kind: 'blocked',
        code: 'NoSubnetWithFreeAddresses',
        message: `instance ${INSTANCE_ID} has ENIs with room but their subnets have no free addresses, and no device slot is free for an ENI in another subnet`,
      },
    },
    {
      case: 'no subnet with free addresses in the VPC and zone: blocked with cilium wording',
      snapshot: m5({
        knobs: knobs({ firstInterfaceIndex: 1, subnetIds: ['subnet-pods-a'], subnetTags: { role: 'pods' } }),
        subnets: [exhaustedNodeSubnet, { ...podsA, availableAddresses: 0 }],
      }),
      plan: {
        kind: 'blocked',
        code: 'NoSuitableSubnet',
        message:
          'No matching subnet available for interface creation (VPC=vpc-0a1b2c AZ=us-east-1a ' +
          'SubnetIDs=[subnet-pods-a] SubnetTags=map[role:pods])',
      },
    },
    {
      case: 'subnet-ids naming only subnets elsewhere: refused, never the node subnet instead',
      snapshot: m5({
        knobs: knobs({ firstInterfaceIndex: 1, subnetIds: ['subnet-other-vpc', 'subnet-pods-a'] }),
        subnets: [NODE_SUBNET, { ...podsA, availabilityZone: 'us-east-1b' }],
      }),
      plan: {
        kind: 'blocked',
        code: 'SubnetIdsUnusable',
        message:
          'spec.eni.subnet-ids [subnet-other-vpc subnet-pods-a] names no subnet of VPC vpc-0a1b2c in zone ' +
          'us-east-1a (each is unknown, in another VPC or in another zone); no ENI is created for ' +
          'instance i-0123456789abcdef0 outside the subnets it names',
      },
    },
    {
      case: 'subnet-ids elsewhere but subnet-tags matching here: the tagged subnet',
      snapshot: m5({
        knobs: knobs({
          firstInterfaceIndex: 1,
          subnetIds: ['subnet-other-vpc'],
          subnetTags: { role: 'pods' },
        }),
        subnets: [NODE_SUBNET, podsA],
      }),
      plan: createEni({
        deviceIndex: 1,
        subnetCandidates: ['subnet-pods-a', 'subnet-node'],
        ipCount: 8,
        neededIps: 8,
      }),
    },
    {
      case: 'a malformed knob: refused, naming it',
      snapshot: m5({
        knobs: knobs({ firstInterfaceIndex: 1, malformed: ['spec.eni.subnet-tags: expected a map'] }),
      }),
      plan: {
        kind: 'blocked',
        code: 'MalformedKnob',
        message:
          'refusing to allocate for instance i-0123456789abcdef0 until its CiliumNode is fixed: ' +
          'spec.eni.subnet-tags: expected a map',
      },
    },
    {
      case: 'subnets refused this round are named in the blocked message',
      snapshot: m5({ knobs: fii1, refusals: refused({ fullSubnetIds: ['subnet-node'] }) }),
      plan: {
        kind: 'blocked',
        code: 'NoSuitableSubnet',
        message:
          'No matching subnet available for interface creation (VPC=vpc-0a1b2c AZ=us-east-1a ' +
          'SubnetIDs=[] SubnetTags=map[] RefusedThisRound=[subnet-node])',
      },
    },
    {
      case: 'an ENI EC2 called full this invocation is not filled: a new ENI takes the need',
      snapshot: m5({ refusals: refused({ fullEniIds: ['eni-0'] }) }),
      plan: createEni({ deviceIndex: 1, ipCount: 8, neededIps: 8 }),
    },
    {
      case: 'a subnet refused this round: eth0 is not filled, a new ENI goes to the fallback',
      snapshot: m5({ subnets: [NODE_SUBNET, podsB], refusals: refused({ fullSubnetIds: ['subnet-node'] }) }),
      plan: createEni({ deviceIndex: 1, ipCount: 8, neededIps: 8, subnetCandidates: ['subnet-pods-b'] }),
    },
    {
      case: 'security-group tags: matching groups of the VPC, sorted',
      snapshot: m5({
        knobs: knobs({ firstInterfaceIndex: 1, securityGroupTags: { role: 'pods' } }),
        securityGroups: [
          securityGroup('sg-pods-2', { role: 'pods' }),
          securityGroup('sg-pods-1', { role: 'pods' }),
          securityGroup('sg-pods-x', { role: 'pods' }, 'vpc-elsewhere'),
        ],
      }),
      plan: createEni({
        deviceIndex: 1,
        ipCount: 8,
        neededIps: 8,
        securityGroupIds: ['sg-pods-1', 'sg-pods-2'],
      }),
    },
    {
      case: 'explicit security groups',
      snapshot: m5({ knobs: knobs({ firstInterfaceIndex: 1, securityGroups: ['sg-explicit'] }) }),
      plan: createEni({ deviceIndex: 1, ipCount: 8, neededIps: 8, securityGroupIds: ['sg-explicit'] }),
    },
    {
      case: 'no security group anywhere: blocked',
      snapshot: m5({ knobs: fii1, enis: [eni({ deviceIndex: 0, securityGroupIds: [] })] }),
      plan: {
        kind: 'blocked',
        code: 'NoSecurityGroups',
        message: `failed to get security group ids: none configured, none in vpc-0a1b2c matching SecurityGroupTags=map[], and the primary ENI has none`,
      },
    },
    {
      case: 'delete-on-termination false plans the same ENI (the flag is set by a later repair step)',
      snapshot: m5({ knobs: knobs({ firstInterfaceIndex: 1, deleteOnTermination: false }) }),
      plan: createEni({ deviceIndex: 1, ipCount: 8, neededIps: 8 }),
    },
    {
      case: 'use-primary-address: eth0 primary counts as available',
      snapshot: m5({ knobs: knobs({ usePrimaryAddress: true }) }),
      plan: assign({ eniId: 'eni-0', ipCount: 7, neededIps: 7 }),
    },
    {
      case: 'prefix delegation, fresh node: one /28 on the new ENI',
      snapshot: m5({ knobs: fii1, prefixDelegationEnabled: true }),
      plan: createEni({ deviceIndex: 1, prefixCount: 1, neededIps: 8 }),
    },
    {
      case: 'prefix delegation with max-above-watermark 40: three /28s',
      snapshot: m5({
        knobs: knobs({ firstInterfaceIndex: 1, maxAboveWatermark: 40 }),
        prefixDelegationEnabled: true,
      }),
      plan: createEni({ deviceIndex: 1, prefixCount: 3, neededIps: 8 }),
    },
    {
      case: 'prefix delegation: fill the ENI already holding a /28',
      snapshot: m5({
        knobs: fii1,
        enis: [eth0, eni({ deviceIndex: 1, prefixCount: 1 })],
        usedIpCount: 12,
        prefixDelegationEnabled: true,
      }),
      plan: assign({ eniId: 'eni-1', prefixCount: 1, neededIps: 4 }),
    },
    {
      case: 'prefix delegation with use-primary-address: the prefix count is bounded by free slots, not room',
      snapshot: m5({
        knobs: knobs({ firstInterfaceIndex: 1, usePrimaryAddress: true, minAllocate: 200 }),
        enis: [eth0, eni({ deviceIndex: 1, prefixCount: 8 })],
        prefixDelegationEnabled: true,
      }),
      plan: assign({ eniId: 'eni-1', prefixCount: 1, neededIps: 71 }),
    },
    {
      case: 'prefix delegation disabled on this node: secondary IPs',
      snapshot: m5({
        knobs: knobs({ firstInterfaceIndex: 1, disablePrefixDelegation: true }),
        prefixDelegationEnabled: true,
      }),
      plan: createEni({ deviceIndex: 1, ipCount: 8, neededIps: 8 }),
    },
    {
      case: 'prefix delegation stays off once an ENI holds plain secondaries',
      snapshot: m5({
        knobs: fii1,
        enis: [eth0, eni({ deviceIndex: 1, secondaryCount: 3 })],
        prefixDelegationEnabled: true,
      }),
      plan: assign({ eniId: 'eni-1', ipCount: 5, neededIps: 5 }),
    },
    {
      case: 'unknown instance limits: blocked',
      snapshot: snapshotOf(undefined, { knobs: fii1 }),
      plan: {
        kind: 'blocked',
        code: 'UnknownInstanceLimits',
        message: `unable to determine limits of instance type m5.large (instance ${INSTANCE_ID})`,
      },
    },
    {
      case: 'no ENI observed: blocked',
      snapshot: m5({ enis: [] }),
      plan: {
        kind: 'blocked',
        code: 'NoInterfacesObserved',
        message: `unable to retrieve ENIs of instance ${INSTANCE_ID}: none observed attached`,
      },
    },
    {
      case: 'stopped instance: nothing to do',
      snapshot: m5({ instance: instance({ state: 'stopped' }) }),
      plan: { kind: 'done', reason: 'instance-not-running', neededIps: 0 },
    },
  ])('$case', ({ snapshot, plan }) => {
    expect(planAllocation(snapshot)).toEqual(plan);
  });
});

describe('planAllocation on t3.medium (3 ENIs x 6 addresses)', () => {
  const t3 = (overrides: Partial<AllocationSnapshot> = {}) =>
    snapshotOf(T3_MEDIUM, { instance: instance({ instanceType: 't3.medium' }), ...overrides });

  it.each<Scenario>([
    {
      case: 'first-interface-index 2: pre-allocate seeds to the 5 one ENI holds',
      snapshot: t3({ knobs: knobs({ firstInterfaceIndex: 2 }) }),
      plan: createEni({ deviceIndex: 2, ipCount: 5, neededIps: 5 }),
    },
    {
      case: 'first-interface-index 0: fill eth0 to its 5',
      snapshot: t3(),
      plan: assign({ eniId: 'eni-0', ipCount: 5, neededIps: 8 }),
    },
    {
      case: 'demand capped by the 10 the instance holds with eth0 excluded',
      snapshot: t3({
        knobs: knobs({ firstInterfaceIndex: 1 }),
        enis: [eth0, ...fullEnis(T3_MEDIUM, 1)],
        usedIpCount: 3,
      }),
      plan: createEni({ deviceIndex: 2, ipCount: 5, neededIps: 5 }),
    },
    {
      case: 'max-above-watermark 10 still gives one ENI its 5',
      snapshot: t3({ knobs: knobs({ firstInterfaceIndex: 1, maxAboveWatermark: 10 }) }),
      plan: createEni({ deviceIndex: 1, ipCount: 5, neededIps: 8 }),
    },
    {
      case: 'all 15 used: instance at capacity',
      snapshot: t3({ enis: fullEnis(T3_MEDIUM, 0, 1, 2), usedIpCount: 15 }),
      plan: { kind: 'done', reason: 'instance-at-capacity', neededIps: 0 },
    },
    {
      case: 'first-interface-index 3: no ENI can ever be used, so the knob is refused, not read as a full node',
      snapshot: t3({ knobs: knobs({ firstInterfaceIndex: 3 }), usedIpCount: 2 }),
      plan: {
        kind: 'blocked',
        code: 'FirstInterfaceIndexOutOfRange',
        message:
          'spec.eni.first-interface-index 3 is beyond instance type t3.medium, whose 3 interfaces have ' +
          'device indexes 0 to 2: no ENI of instance i-0123456789abcdef0 may be used or attached',
      },
    },
    {
      case: 'first-interface-index 9 and nothing used: refused all the same',
      snapshot: t3({ knobs: knobs({ firstInterfaceIndex: 9 }) }),
      plan: expect.objectContaining({ kind: 'blocked', code: 'FirstInterfaceIndexOutOfRange' }),
    },
    {
      case: 'first-interface-index 2, the last index: served',
      snapshot: t3({ knobs: knobs({ firstInterfaceIndex: 2 }) }),
      plan: expect.objectContaining({ kind: 'create', deviceIndex: 2 }),
    },
    {
      case: 'prefix delegation: one /28',
      snapshot: t3({ knobs: knobs({ firstInterfaceIndex: 1 }), prefixDelegationEnabled: true }),
      plan: createEni({ deviceIndex: 1, prefixCount: 1, neededIps: 8 }),
    },
    {
      case: 'excluded eth1 by tags still takes a slot: create at 2',
      snapshot: t3({
        knobs: knobs({ firstInterfaceIndex: 1, excludeInterfaceTags: { owner: 'other-cni' } }),
        enis: [eth0, eni({ deviceIndex: 1, tags: { owner: 'other-cni', extra: 'x' } })],
      }),
      plan: createEni({ deviceIndex: 2, ipCount: 5, neededIps: 8 }),
    },
  ])('$case', ({ snapshot, plan }) => {
    expect(planAllocation(snapshot)).toEqual(plan);
  });
});

describe('planAllocation on m5.4xlarge (8 ENIs x 30 addresses)', () => {
  const m5x = (overrides: Partial<AllocationSnapshot> = {}) =>
    snapshotOf(M5_4XLARGE, { instance: instance({ instanceType: 'm5.4xlarge' }), ...overrides });
  const fii1 = knobs({ firstInterfaceIndex: 1 });

  it.each<Scenario>([
    {
      case: 'fill the second ENI with needed + max-above-watermark',
      snapshot: m5x({
        knobs: knobs({ firstInterfaceIndex: 1, maxAboveWatermark: 10 }),
        enis: [eth0, ...fullEnis(M5_4XLARGE, 1), eni({ deviceIndex: 2, secondaryCount: 10 })],
        usedIpCount: 35,
      }),
      plan: assign({ eniId: 'eni-2', ipCount: 14, neededIps: 4 }),
    },
    {
      case: 'a gap in device indexes is reused',
      snapshot: m5x({ knobs: fii1, enis: [eth0, ...fullEnis(M5_4XLARGE, 1, 3)], usedIpCount: 58 }),
      plan: createEni({ deviceIndex: 2, ipCount: 8, neededIps: 8 }),
    },
    {
      case: 'the last slot, device 7',
      snapshot: m5x({
        knobs: fii1,
        enis: [eth0, ...fullEnis(M5_4XLARGE, 1, 2, 3, 4, 5, 6)],
        usedIpCount: 174,
      }),
      plan: createEni({ deviceIndex: 7, ipCount: 8, neededIps: 8 }),
    },
    {
      case: 'all 203 used: instance at capacity',
      snapshot: m5x({
        knobs: fii1,
        enis: [eth0, ...fullEnis(M5_4XLARGE, 1, 2, 3, 4, 5, 6, 7)],
        usedIpCount: 203,
      }),
      plan: { kind: 'done', reason: 'instance-at-capacity', neededIps: 0 },
    },
    {
      case: 'min-allocate 40: fill the empty third ENI with the 11 missing',
      snapshot: m5x({
        knobs: knobs({ firstInterfaceIndex: 1, minAllocate: 40 }),
        enis: [eth0, ...fullEnis(M5_4XLARGE, 1), eni({ deviceIndex: 2 })],
      }),
      plan: assign({ eniId: 'eni-2', ipCount: 11, neededIps: 11 }),
    },
    {
      case: 'fill is bounded by the subnet free addresses',
      snapshot: m5x({
        knobs: knobs({ firstInterfaceIndex: 1, maxAboveWatermark: 20 }),
        enis: [eth0, eni({ deviceIndex: 1, subnetId: 'subnet-small' })],
        subnets: [NODE_SUBNET, subnet('subnet-small', 6)],
      }),
      plan: assign({ eniId: 'eni-1', subnetId: 'subnet-small', ipCount: 6, neededIps: 8 }),
    },
    {
      case: 'excluded interface and subnet tags: create at device 2 in the tagged subnet',
      snapshot: m5x({
        knobs: knobs({
          firstInterfaceIndex: 1,
          excludeInterfaceTags: { 'cilium.io/no-manage': 'true' },
          subnetTags: { role: 'pods' },
        }),
        enis: [eth0, eni({ deviceIndex: 1, tags: { 'cilium.io/no-manage': 'true' } })],
        subnets: [NODE_SUBNET, podsA, podsB],
      }),
      plan: createEni({
        deviceIndex: 2,
        ipCount: 8,
        neededIps: 8,
        subnetCandidates: ['subnet-pods-b', 'subnet-pods-a', 'subnet-node'],
      }),
    },
    {
      case: 'prefix delegation: one more /28 on the prefixed ENI',
      snapshot: m5x({
        knobs: fii1,
        enis: [eth0, eni({ deviceIndex: 1, prefixCount: 2 })],
        usedIpCount: 30,
        prefixDelegationEnabled: true,
      }),
      plan: assign({ eniId: 'eni-1', prefixCount: 1, neededIps: 6 }),
    },
    {
      case: 'prefix delegation with max-above-watermark 100: seven /28s on a new ENI',
      snapshot: m5x({
        knobs: knobs({ firstInterfaceIndex: 1, maxAboveWatermark: 100 }),
        prefixDelegationEnabled: true,
      }),
      plan: createEni({ deviceIndex: 1, prefixCount: 7, neededIps: 8 }),
    },
    {
      case: 'prefix delegation with min-allocate 1000: a new ENI takes at most 29 /28s',
      snapshot: m5x({
        knobs: knobs({ firstInterfaceIndex: 1, minAllocate: 1000 }),
        prefixDelegationEnabled: true,
      }),
      plan: createEni({ deviceIndex: 1, prefixCount: 29, neededIps: 1000 }),
    },
    {
      case: 'prefix delegation: fill bounded by free slots',
      snapshot: m5x({
        knobs: knobs({ firstInterfaceIndex: 1, minAllocate: 1000 }),
        enis: [eth0, eni({ deviceIndex: 1, prefixCount: 27 })],
        prefixDelegationEnabled: true,
      }),
      plan: assign({ eniId: 'eni-1', prefixCount: 2, neededIps: 568 }),
    },
  ])('$case', ({ snapshot, plan }) => {
    expect(planAllocation(snapshot)).toEqual(plan);
  });
});

describe('planAllocation when subnets refuse /28 prefixes (InsufficientCidrBlocks)', () => {
  // The node subnet and pods-a share nothing but VPC and zone: both are suitable for a new ENI.
  const pods = subnet('subnet-pods', 300);
  const pd = (overrides: Partial<AllocationSnapshot> = {}) =>
    snapshotOf(M5_LARGE, {
      knobs: knobs({ firstInterfaceIndex: 1 }),
      subnets: [NODE_SUBNET, pods],
      prefixDelegationEnabled: true,
      ...overrides,
    });
  const prefixedEni1 = eni({ deviceIndex: 1, prefixCount: 1 });

  it.each<Scenario>([
    {
      case: 'nothing refused: prefixes in the node subnet first, the other subnet as fallback candidate',
      snapshot: pd(),
      plan: createEni({
        deviceIndex: 1,
        prefixCount: 1,
        neededIps: 8,
        subnetCandidates: ['subnet-node', 'subnet-pods'],
      }),
    },
    {
      case: 'node subnet refused: prefixes in the other subnet only (cilium #46644)',
      snapshot: pd({ refusals: refused({ prefixRefusedSubnetIds: ['subnet-node'] }) }),
      plan: createEni({ deviceIndex: 1, prefixCount: 1, neededIps: 8, subnetCandidates: ['subnet-pods'] }),
    },
    {
      case: 'every subnet refused: a new ENI with single IPs, min(needed, ipv4 - 1) as cilium (#20822)',
      snapshot: pd({ refusals: refused({ prefixRefusedSubnetIds: ['subnet-node', 'subnet-pods'] }) }),
      plan: {
        ...createEni({
          deviceIndex: 1,
          ipCount: 8,
          neededIps: 8,
          subnetCandidates: ['subnet-node', 'subnet-pods'],
        }),
        prefixFallback: true,
      } as AllocationPlan,
    },
    {
      case: "the ENI's subnet refused and a slot is free: a new ENI with prefixes elsewhere before single IPs",
      snapshot: pd({
        enis: [eth0, prefixedEni1],
        usedIpCount: 16,
        refusals: refused({ prefixRefusedSubnetIds: ['subnet-node'] }),
      }),
      plan: createEni({ deviceIndex: 2, prefixCount: 1, neededIps: 8, subnetCandidates: ['subnet-pods'] }),
    },
    {
      case: 'an ENI in a subnet that did not refuse is filled with prefixes first',
      snapshot: pd({
        enis: [eth0, prefixedEni1, eni({ deviceIndex: 2, prefixCount: 1, subnetId: 'subnet-pods' })],
        usedIpCount: 32,
        refusals: refused({ prefixRefusedSubnetIds: ['subnet-node'] }),
      }),
      plan: assign({ eniId: 'eni-2', subnetId: 'subnet-pods', prefixCount: 1, neededIps: 8 }),
    },
    {
      case: 'everything refused, no slot: single IPs on the prefixed ENI, bounded by its free slots',
      snapshot: pd({
        knobs: knobs({ firstInterfaceIndex: 1, maxAboveWatermark: 20 }),
        enis: [
          eth0,
          eni({ deviceIndex: 1, prefixCount: 3 }),
          eni({ deviceIndex: 2, prefixCount: 9, subnetId: 'subnet-pods' }),
        ],
        usedIpCount: 192,
        refusals: refused({ prefixRefusedSubnetIds: ['subnet-node', 'subnet-pods'] }),
      }),
      plan: {
        ...assign({ eniId: 'eni-1', ipCount: 6, neededIps: 8 }),
        prefixFallback: true,
      } as AllocationPlan,
    },
    {
      case: 'fallback prefers an ENI holding prefixes over an empty one (which would end delegation)',
      snapshot: pd({
        knobs: knobs({ firstInterfaceIndex: 0 }),
        enis: [eth0, eni({ deviceIndex: 1, prefixCount: 9 }), eni({ deviceIndex: 2, prefixCount: 8 })],
        usedIpCount: 272,
        refusals: refused({ prefixRefusedSubnetIds: ['subnet-node', 'subnet-pods'] }),
      }),
      plan: {
        ...assign({ eniId: 'eni-2', ipCount: 1, neededIps: 8 }),
        prefixFallback: true,
      } as AllocationPlan,
    },
    {
      case: 'refusals are ignored once the node is off prefixes (an ENI holds plain IPs)',
      snapshot: pd({
        enis: [eth0, eni({ deviceIndex: 1, secondaryCount: 8 })],
        usedIpCount: 8,
        refusals: refused({ prefixRefusedSubnetIds: ['subnet-node', 'subnet-pods'] }),
      }),
      plan: assign({ eniId: 'eni-1', ipCount: 1, neededIps: 8 }),
    },
  ])('$case', ({ snapshot, plan }) => {
    expect(planAllocation(snapshot)).toEqual(plan);
  });
});

describe('planAllocation determinism', () => {
  it('ENI order in the snapshot does not change the plan', () => {
    const enis = [
      eth0,
      eni({ deviceIndex: 2, secondaryCount: 1 }),
      eni({ deviceIndex: 1, secondaryCount: 1 }),
    ];
    const forward = snapshotOf(M5_LARGE, { knobs: knobs({ firstInterfaceIndex: 1 }), enis });
    const backward = { ...forward, enis: [...enis].reverse() };
    expect(planAllocation(forward)).toEqual(assign({ eniId: 'eni-1', ipCount: 6, neededIps: 6 }));
    expect(planAllocation(backward)).toEqual(planAllocation(forward));
  });

  it('eniDescription follows cilium', () => {
    expect(eniDescription('i-abc')).toBe('Cilium-CNI (i-abc)');
  });
});

describe('computePoolDemand', () => {
  it.each([
    {
      case: 'cilium ENI test example: 18 available, 10 used, pre 2, min 10, maw 3 releases 5',
      snapshot: snapshotOf(M5_LARGE, {
        knobs: knobs({ firstInterfaceIndex: 1, preAllocate: 2, minAllocate: 10, maxAboveWatermark: 3 }),
        enis: [eth0, ...fullEnis(M5_LARGE, 1, 2)],
        usedIpCount: 10,
      }),
      demand: {
        availableIpCount: 18,
        preAllocate: 2,
        maxAllocate: 18,
        neededIps: 0,
        excessIps: 5,
        prefixDelegation: false,
      },
    },
    {
      case: 'fresh node with prefix delegation',
      snapshot: snapshotOf(M5_LARGE, {
        knobs: knobs({ firstInterfaceIndex: 1 }),
        prefixDelegationEnabled: true,
      }),
      demand: {
        availableIpCount: 0,
        preAllocate: 8,
        maxAllocate: 288,
        neededIps: 8,
        excessIps: 0,
        prefixDelegation: true,
      },
    },
    {
      case: 'prefix-delegated with single IPs from a fallback: each takes a slot that could hold 16',
      snapshot: snapshotOf(M5_LARGE, {
        knobs: knobs({ firstInterfaceIndex: 1 }),
        enis: [eth0, eni({ deviceIndex: 1, secondaryCount: 8, prefixCount: 1 })],
        usedIpCount: 24,
        prefixDelegationEnabled: true,
      }),
      demand: {
        availableIpCount: 24,
        maxAllocate: 288 - 8 * 15,
        neededIps: 8,
        prefixDelegation: true,
      },
    },
    {
      case: 'off prefixes with a leftover /28: it still holds 16 in one slot',
      snapshot: snapshotOf(M5_LARGE, {
        knobs: knobs({ firstInterfaceIndex: 1 }),
        enis: [eth0, eni({ deviceIndex: 1, prefixCount: 9 }), eni({ deviceIndex: 2, secondaryCount: 9 })],
        usedIpCount: 150,
        prefixDelegationEnabled: true,
      }),
      demand: {
        availableIpCount: 153,
        maxAllocate: 18 + 9 * 15,
        neededIps: 0,
        prefixDelegation: false,
      },
    },
    {
      case: 'unknown limits zero both demands, as cilium does',
      snapshot: snapshotOf(undefined, { enis: [eth0, eni({ deviceIndex: 1, secondaryCount: 20 })] }),
      demand: {
        availableIpCount: 20,
        preAllocate: 8,
        maxAllocate: 0,
        neededIps: 0,
        excessIps: 0,
        prefixDelegation: false,
      },
    },
    {
      case: 'no ENI observed zeroes both demands',
      snapshot: snapshotOf(M5_LARGE, { enis: [] }),
      demand: {
        availableIpCount: 0,
        preAllocate: 8,
        maxAllocate: 27,
        neededIps: 0,
        excessIps: 0,
        prefixDelegation: false,
      },
    },
  ])('$case', ({ snapshot, demand }) => {
    expect(computePoolDemand(snapshot)).toMatchObject(demand);
  });
});
