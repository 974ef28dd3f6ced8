import { describe, expect, it } from 'vitest';
import {
  type AllocationPlan,
  type AllocationSnapshot,
  computePoolDemand,
  neededIpv6Prefixes,
  planAllocation,
} from '../../../functions/core/allocation-plan.ts';
import type { EniState, InstanceLimits } from '../../../functions/core/model.ts';
import { eni, INSTANCE_ID, instance, knobs, M5_LARGE, NODE_SUBNET, refused, subnet } from './fixtures.ts';

/**
 * The /80 a 1.20 agent with IPv6 asks for (functions/README.md, *Agent protocols*): cilium's
 * `neededPrefixes6` (one /80 when `requested.ipv6-addrs > 0` and no ENI the agent derives from holds
 * one, never more), and where the planner puts it: on the ENI chosen for IPv4, on a new ENI, or
 * alone; never at the expense of IPv4, and never silently when no dual-stack subnet can take it.
 */

const PREFIX = '2600:1f18:4a01:ab01:1::/80';
const DUAL_STACK_NODE_SUBNET = { ...NODE_SUBNET, ipv6Cidr: '2600:1f18:4a01:ab01::/64' };
const ipv4OnlyPods = subnet('subnet-pods', 200, { tags: { role: 'pods' } });
const dualStackPods = subnet('subnet-pods-v6', 300, {
  tags: { role: 'pods' },
  ipv6Cidr: '2600:1f18:4a01:ab02::/64',
});
const NODE_GROUPS = ['sg-node-a', 'sg-node-b'];
const eth0 = eni({ deviceIndex: 0 });
const withPrefix = (state: EniState, prefix = PREFIX): EniState => ({ ...state, ipv6Prefixes: [prefix] });

function snapshot(overrides: Partial<AllocationSnapshot> = {}): AllocationSnapshot {
  return {
    instance: instance(),
    limits: M5_LARGE,
    enis: [eth0],
    subnets: [DUAL_STACK_NODE_SUBNET],
    securityGroups: [],
    knobs: knobs({ firstInterfaceIndex: 1 }),
    usedIpCount: 0,
    wantsIpv6: true,
    prefixDelegationEnabled: false,
    refusals: refused(),
    ...overrides,
  };
}

/** An ENI with room to spare against pre-allocate 8 (9 free of m5.large's 9). */
const filled = (deviceIndex: number, subnetId = 'subnet-node') =>
  eni({ deviceIndex, secondaryCount: 9, subnetId });

describe('neededIpv6Prefixes (cilium neededPrefixes6)', () => {
  const fii1 = knobs({ firstInterfaceIndex: 1 });
  it.each<{
    case: string;
    wantsIpv6?: boolean;
    enis: EniState[];
    knobs?: ReturnType<typeof knobs>;
    needed: number;
  }>([
    { case: 'no IPv6 asked (a 1.19 node, an IPv4-only agent)', enis: [eth0], needed: 0 },
    { case: 'IPv6 asked, no /80 anywhere', wantsIpv6: true, enis: [eth0, filled(1)], needed: 1 },
    {
      case: 'IPv6 asked, one /80 on an ENI the agent derives from',
      wantsIpv6: true,
      enis: [eth0, withPrefix(filled(1))],
      needed: 0,
    },
    {
      case: 'never a second one, whatever ipv6-addrs asks',
      wantsIpv6: true,
      enis: [eth0, withPrefix(filled(1)), withPrefix(filled(2), '2600:1f18:4a01:ab01:2::/80')],
      needed: 0,
    },
    {
      case: 'a /80 below first-interface-index does not count: the agent skips that ENI',
      wantsIpv6: true,
      enis: [withPrefix(eth0), filled(1)],
      knobs: fii1,
      needed: 1,
    },
    {
      case: 'a /80 on an ENI excluded by tags does not count',
      wantsIpv6: true,
      enis: [eth0, withPrefix({ ...filled(1), tags: { skip: 'yes' } })],
      knobs: knobs({ excludeInterfaceTags: { skip: 'yes' } }),
      needed: 1,
    },
    {
      case: 'a /80 on an ENI that is not ours but not excluded by spec counts (cilium-operator assigned it)',
      wantsIpv6: true,
      enis: [withPrefix({ ...eth0, foreign: true }), filled(1)],
      needed: 0,
    },
  ])('$case: $needed', ({ wantsIpv6, enis, knobs: nodeKnobs, needed }) => {
    expect(neededIpv6Prefixes({ wantsIpv6, enis, knobs: nodeKnobs ?? knobs() })).toBe(needed);
    expect(
      computePoolDemand({ ...snapshot({ enis, knobs: nodeKnobs ?? knobs() }), wantsIpv6 }).neededIpv6Prefixes,
    ).toBe(needed);
  });

  it('is 0 while the node cannot be sized or observed, as `needed` is', () => {
    expect(computePoolDemand(snapshot({ limits: undefined })).neededIpv6Prefixes).toBe(0);
    expect(computePoolDemand(snapshot({ enis: [] })).neededIpv6Prefixes).toBe(0);
  });
});

function assign(fields: {
  eniId: string;
  neededIps: number;
  ipCount: number;
  subnetId?: string;
  ipv6?: boolean;
}): AllocationPlan {
  const { ipv6, ...rest } = fields;
  return { kind: 'assign', subnetId: 'subnet-node', ...rest, ...(ipv6 ? { ipv6PrefixCount: 1 } : {}) };
}

function create(fields: {
  deviceIndex: number;
  neededIps: number;
  ipCount: number;
  subnetCandidates?: string[];
  ipv6?: boolean;
}): AllocationPlan {
  const { ipv6, ...rest } = fields;
  return {
    kind: 'create',
    subnetCandidates: ['subnet-node'],
    securityGroupIds: NODE_GROUPS,
    description: `Cilium-CNI (${INSTANCE_ID})`,
    ...rest,
    ...(ipv6 ? { ipv6PrefixCount: 1 } : {}),
  };
}

const blocked = (code: string) => expect.objectContaining({ kind: 'blocked', code });

describe('planAllocation with an agent that asks for IPv6', () => {
  const NO_IPV6: InstanceLimits = { ...M5_LARGE, ipv6PerInterface: 0 };
  const allIpv4Only = [NODE_SUBNET, ipv4OnlyPods];

  it.each<{ case: string; snapshot: AllocationSnapshot; plan: AllocationPlan | ReturnType<typeof blocked> }>([
    {
      case: 'fresh node: the new ENI is created with its IPv4 and the /80 in one call',
      snapshot: snapshot(),
      plan: create({ deviceIndex: 1, ipCount: 8, neededIps: 8, ipv6: true }),
    },
    {
      case: 'first-interface-index 0: the /80 goes on the ENI chosen for IPv4',
      snapshot: snapshot({ knobs: knobs() }),
      plan: assign({ eniId: 'eni-0', ipCount: 8, neededIps: 8, ipv6: true }),
    },
    {
      case: 'IPv4 satisfied: the /80 alone, on the first ENI in a dual-stack subnet',
      snapshot: snapshot({ enis: [eth0, filled(1), filled(2)] }),
      plan: assign({ eniId: 'eni-1', ipCount: 0, neededIps: 0, ipv6: true }),
    },
    {
      case: 'IPv4 satisfied and the /80 there: nothing',
      snapshot: snapshot({ enis: [eth0, withPrefix(filled(1))] }),
      plan: { kind: 'done', reason: 'pool-satisfied', neededIps: 0 },
    },
    {
      case: 'the IPv4 ENI is in an IPv4-only subnet: IPv4 first, the /80 follows',
      snapshot: snapshot({
        subnets: [DUAL_STACK_NODE_SUBNET, ipv4OnlyPods],
        enis: [eth0, eni({ deviceIndex: 1, secondaryCount: 2, subnetId: 'subnet-pods' })],
      }),
      plan: assign({ eniId: 'eni-1', ipCount: 6, neededIps: 6, subnetId: 'subnet-pods' }),
    },
    {
      case: 'then, IPv4 satisfied on that ENI: a new ENI in the dual-stack subnet for the /80 alone',
      snapshot: snapshot({
        subnets: [DUAL_STACK_NODE_SUBNET, ipv4OnlyPods],
        enis: [eth0, filled(1, 'subnet-pods')],
      }),
      plan: create({ deviceIndex: 2, ipCount: 0, neededIps: 0, ipv6: true }),
    },
    {
      case: 'a new ENI whose best subnet is IPv4-only: created without the /80',
      snapshot: snapshot({
        subnets: [DUAL_STACK_NODE_SUBNET, ipv4OnlyPods],
        knobs: knobs({ firstInterfaceIndex: 1, subnetTags: { role: 'pods' } }),
      }),
      plan: create({
        deviceIndex: 1,
        ipCount: 8,
        neededIps: 8,
        subnetCandidates: ['subnet-pods', 'subnet-node'],
      }),
    },
    {
      case: 'a new ENI whose best subnet is dual-stack: the /80 too, fallbacks cut to dual-stack subnets',
      snapshot: snapshot({
        subnets: [DUAL_STACK_NODE_SUBNET, ipv4OnlyPods, dualStackPods],
        knobs: knobs({ firstInterfaceIndex: 1, subnetTags: { role: 'pods' } }),
      }),
      plan: create({
        deviceIndex: 1,
        ipCount: 8,
        neededIps: 8,
        subnetCandidates: ['subnet-pods-v6', 'subnet-node'],
        ipv6: true,
      }),
    },
    {
      case: 'IPv4-only subnets, IPv4 needed: IPv4 served as ever',
      snapshot: snapshot({ subnets: allIpv4Only }),
      plan: create({
        deviceIndex: 1,
        ipCount: 8,
        neededIps: 8,
        subnetCandidates: ['subnet-node', 'subnet-pods'],
      }),
    },
    {
      case: 'IPv4-only subnets, IPv4 satisfied: blocked, so the node says why it has no IPv6',
      snapshot: snapshot({ subnets: allIpv4Only, enis: [eth0, filled(1)] }),
      plan: blocked('NoDualStackSubnet'),
    },
    {
      case: 'a dual-stack subnet that refused a /80 this invocation counts as IPv4-only',
      snapshot: snapshot({
        enis: [eth0, filled(1)],
        refusals: refused({ ipv6RefusedSubnetIds: ['subnet-node'] }),
      }),
      plan: blocked('NoDualStackSubnet'),
    },
    {
      case: 'every slot taken by ENIs in IPv4-only subnets: blocked',
      snapshot: snapshot({
        subnets: [DUAL_STACK_NODE_SUBNET, ipv4OnlyPods],
        enis: [eth0, filled(1, 'subnet-pods'), filled(2, 'subnet-pods')],
      }),
      plan: blocked('NoDualStackSubnet'),
    },
    {
      case: 'a type without IPv6, IPv4 needed: IPv4 without the /80',
      snapshot: snapshot({ limits: NO_IPV6, knobs: knobs() }),
      plan: assign({ eniId: 'eni-0', ipCount: 8, neededIps: 8 }),
    },
    {
      case: 'a type without IPv6, IPv4 satisfied: blocked with the reason',
      snapshot: snapshot({ limits: NO_IPV6, enis: [eth0, filled(1)] }),
      plan: blocked('Ipv6NotSupported'),
    },
    {
      case: 'a Xen type with IPv6 addresses: EC2 delegates no prefix there, blocked with the reason',
      snapshot: snapshot({ limits: { ...M5_LARGE, hypervisor: 'xen' }, enis: [eth0, filled(1)] }),
      plan: blocked('Ipv6NotSupported'),
    },
    {
      case: 'IPv4 blocked (subnet exhausted, no slot): the /80 still goes on an ENI that can hold it',
      snapshot: snapshot({
        subnets: [{ ...DUAL_STACK_NODE_SUBNET, availableAddresses: 0 }],
        enis: [eth0, eni({ deviceIndex: 1, secondaryCount: 2 }), eni({ deviceIndex: 2, secondaryCount: 2 })],
      }),
      plan: assign({ eniId: 'eni-1', ipCount: 0, neededIps: 4, ipv6: true }),
    },
    {
      case: 'the /80 below first-interface-index does not count: another on an ENI the agent derives from',
      snapshot: snapshot({
        knobs: knobs({ firstInterfaceIndex: 2 }),
        enis: [eth0, withPrefix(filled(1)), filled(2)],
      }),
      plan: assign({ eniId: 'eni-2', ipCount: 0, neededIps: 0, ipv6: true }),
    },
  ])('$case', ({ snapshot: input, plan }) => {
    expect(planAllocation(input)).toEqual(plan);
  });

  it('leaves a node whose agent does not ask for IPv6 exactly as before, dual-stack subnet or not', () => {
    for (const enis of [[eth0], [eth0, filled(1)]]) {
      const asked = planAllocation(snapshot({ enis, wantsIpv6: false }));
      const unasked = planAllocation({ ...snapshot({ enis }), wantsIpv6: undefined });
      expect(asked).toEqual(unasked);
      expect(asked).not.toHaveProperty('ipv6PrefixCount');
    }
  });

  it('names the VPC, zone and subnet knobs in the NoDualStackSubnet message, and says IPv4 is still served', () => {
    const plan = planAllocation(snapshot({ subnets: allIpv4Only, enis: [eth0, filled(1)] }));
    expect(plan.kind === 'blocked' ? plan.message : '').toMatch(
      /asks for IPv6.*no subnet a new ENI may go to has an IPv6 CIDR block \(VPC=vpc-0a1b2c AZ=us-east-1a .*IPv4 is still served/,
    );
  });
});
