import { describe, expect, it } from 'vitest';
import type { SubnetView } from '../../../functions/core/model.ts';
import { chooseSubnets, subnetIdsOf } from '../../../functions/core/subnet-choice.ts';
import { instance, knobs, NODE_SUBNET, subnet } from './fixtures.ts';

const podsA = subnet('subnet-pods-a', 200, { tags: { role: 'pods', tier: 'a' } });
const podsB = subnet('subnet-pods-b', 500, { tags: { role: 'pods', tier: 'b' } });
const sameRouteTable = subnet('subnet-same-rtb', 300, { routeTableId: 'rtb-main' });
const sameRouteTableSmall = subnet('subnet-same-rtb-small', 20, { routeTableId: 'rtb-main' });
const otherZone = subnet('subnet-other-zone', 9000, { availabilityZone: 'us-east-1b' });
const otherVpc = subnet('subnet-other-vpc', 9000, { vpcId: 'vpc-elsewhere' });
const exhausted = subnet('subnet-exhausted', 0, { tags: { role: 'pods' }, routeTableId: 'rtb-main' });
const tieLow = subnet('subnet-tie-1', 700);
const tieHigh = subnet('subnet-tie-2', 700);

function nodeSubnetWith(availableAddresses: number): SubnetView {
  return { ...NODE_SUBNET, availableAddresses };
}

describe('chooseSubnets', () => {
  it.each([
    {
      case: 'no constraints: node subnet, then its route table, then the rest by free addresses',
      subnets: [podsA, podsB, sameRouteTable, NODE_SUBNET, otherZone, otherVpc, exhausted],
      knobSet: knobs(),
      excluded: [],
      expected: [
        ['subnet-node', 'node-subnet'],
        ['subnet-same-rtb', 'node-route-table'],
        ['subnet-pods-b', 'vpc-and-zone'],
        ['subnet-pods-a', 'vpc-and-zone'],
      ],
    },
    {
      case: 'subnet-ids first, most free first, then the fallbacks',
      subnets: [podsA, podsB, sameRouteTable, NODE_SUBNET],
      knobSet: knobs({ subnetIds: ['subnet-pods-a', 'subnet-pods-b'] }),
      excluded: [],
      expected: [
        ['subnet-pods-b', 'subnet-ids'],
        ['subnet-pods-a', 'subnet-ids'],
        ['subnet-node', 'node-subnet'],
        ['subnet-same-rtb', 'node-route-table'],
      ],
    },
    {
      case: 'subnet-ids naming nothing in the VPC and zone: no subnet at all, never the node subnet',
      subnets: [podsA, otherZone, otherVpc, NODE_SUBNET],
      knobSet: knobs({ subnetIds: ['subnet-other-zone', 'subnet-other-vpc', 'subnet-unknown'] }),
      excluded: [],
      expected: [],
    },
    {
      case: 'subnet-ids spanning zones: the one of this zone, then the fallbacks',
      subnets: [podsA, otherZone, NODE_SUBNET],
      knobSet: knobs({ subnetIds: ['subnet-other-zone', 'subnet-pods-a'] }),
      excluded: [],
      expected: [
        ['subnet-pods-a', 'subnet-ids'],
        ['subnet-node', 'node-subnet'],
      ],
    },
    {
      case: 'subnet-ids elsewhere, subnet-tags matching here: the tagged subnets and the fallbacks',
      subnets: [podsA, otherVpc, NODE_SUBNET],
      knobSet: knobs({ subnetIds: ['subnet-other-vpc'], subnetTags: { role: 'pods' } }),
      excluded: [],
      expected: [
        ['subnet-pods-a', 'subnet-tags'],
        ['subnet-node', 'node-subnet'],
      ],
    },
    {
      case: 'subnet-ids beat subnet-tags',
      subnets: [podsA, podsB, NODE_SUBNET],
      knobSet: knobs({ subnetIds: ['subnet-pods-a'], subnetTags: { role: 'pods' } }),
      excluded: [],
      expected: [
        ['subnet-pods-a', 'subnet-ids'],
        ['subnet-pods-b', 'subnet-tags'],
        ['subnet-node', 'node-subnet'],
      ],
    },
    {
      case: 'subnet-tags must all match',
      subnets: [podsA, podsB, NODE_SUBNET],
      knobSet: knobs({ subnetTags: { role: 'pods', tier: 'a' } }),
      excluded: [],
      expected: [
        ['subnet-pods-a', 'subnet-tags'],
        ['subnet-node', 'node-subnet'],
        ['subnet-pods-b', 'vpc-and-zone'],
      ],
    },
    {
      case: 'node subnet below ipv4PerInterface free drops to the last rule',
      subnets: [nodeSubnetWith(9), sameRouteTableSmall, podsA],
      knobSet: knobs(),
      excluded: [],
      expected: [
        ['subnet-same-rtb-small', 'node-route-table'],
        ['subnet-pods-a', 'vpc-and-zone'],
        ['subnet-node', 'vpc-and-zone'],
      ],
    },
    {
      case: 'node subnet with exactly ipv4PerInterface free qualifies (cilium TestInterfaceCreatedInInitialSubnet)',
      subnets: [nodeSubnetWith(10), podsB],
      knobSet: knobs(),
      excluded: [],
      expected: [
        ['subnet-node', 'node-subnet'],
        ['subnet-pods-b', 'vpc-and-zone'],
      ],
    },
    {
      case: 'exhausted subnets are never offered, even when listed',
      subnets: [exhausted, nodeSubnetWith(0), podsA],
      knobSet: knobs({ subnetIds: ['subnet-exhausted'], subnetTags: { role: 'pods' } }),
      excluded: [],
      expected: [['subnet-pods-a', 'subnet-tags']],
    },
    {
      case: 'subnets that refused this round are skipped',
      subnets: [podsA, podsB, NODE_SUBNET],
      knobSet: knobs({ subnetTags: { role: 'pods' } }),
      excluded: ['subnet-pods-b', 'subnet-node'],
      expected: [['subnet-pods-a', 'subnet-tags']],
    },
    {
      case: 'ties on free addresses are broken by subnet id',
      subnets: [tieHigh, tieLow],
      knobSet: knobs(),
      excluded: [],
      expected: [
        ['subnet-tie-1', 'vpc-and-zone'],
        ['subnet-tie-2', 'vpc-and-zone'],
      ],
    },
    {
      case: 'nothing eligible gives an empty list',
      subnets: [otherZone, otherVpc, exhausted],
      knobSet: knobs(),
      excluded: [],
      expected: [],
    },
  ])('$case', ({ subnets, knobSet, excluded, expected }) => {
    const candidates = chooseSubnets({
      instance: instance(),
      subnets,
      knobs: knobSet,
      ipv4PerInterface: 10,
      refusedSubnetIds: excluded,
    });
    expect(candidates.map((candidate) => [candidate.subnet.id, candidate.rule])).toEqual(expected);
    expect(subnetIdsOf(candidates)).toEqual(expected.map(([id]) => id));
  });

  it('without a route table on the node subnet, the route-table rule is skipped', () => {
    const candidates = chooseSubnets({
      instance: instance(),
      subnets: [{ ...nodeSubnetWith(5), routeTableId: undefined }, sameRouteTable],
      knobs: knobs(),
      ipv4PerInterface: 10,
    });
    expect(candidates.map((candidate) => candidate.rule)).toEqual(['vpc-and-zone', 'vpc-and-zone']);
  });
});
