import { describe, expect, it } from 'vitest';
import {
  anyEniHasRoom,
  isExcluded,
  matchesAllTags,
  orderEnisToFill,
} from '../../../functions/core/eni-selection.ts';
import type { Tags } from '../../../functions/core/model.ts';
import { eni, knobs, M5_LARGE, NODE_SUBNET, subnet } from './fixtures.ts';

describe('matchesAllTags', () => {
  it.each<{ case: string; tags: Tags; required: Tags; matches: boolean }>([
    { case: 'empty requirement matches', tags: { a: '1' }, required: {}, matches: true },
    {
      case: 'all present and equal',
      tags: { a: '1', b: '2', c: '3' },
      required: { a: '1', b: '2' },
      matches: true,
    },
    { case: 'one value differs', tags: { a: '1', b: '3' }, required: { a: '1', b: '2' }, matches: false },
    { case: 'one key missing', tags: { a: '1' }, required: { a: '1', b: '2' }, matches: false },
    { case: 'empty value must match empty value', tags: { a: '' }, required: { a: '' }, matches: true },
    { case: 'inherited keys do not count', tags: {}, required: { toString: '' }, matches: false },
  ])('$case', ({ tags, required, matches }) => {
    expect(matchesAllTags(tags, required)).toBe(matches);
  });
});

describe('isExcluded', () => {
  const skipTags = { 'cilium.io/skip': 'true', team: 'net' };
  it.each<{ case: string; deviceIndex: number; tags: Tags; fii: number; exclude: Tags; excluded: boolean }>([
    {
      case: 'eth0 with first-interface-index 1',
      deviceIndex: 0,
      tags: {},
      fii: 1,
      exclude: {},
      excluded: true,
    },
    {
      case: 'eth0 with first-interface-index 0',
      deviceIndex: 0,
      tags: {},
      fii: 0,
      exclude: {},
      excluded: false,
    },
    { case: 'at first-interface-index', deviceIndex: 1, tags: {}, fii: 1, exclude: {}, excluded: false },
    { case: 'below first-interface-index 2', deviceIndex: 1, tags: {}, fii: 2, exclude: {}, excluded: true },
    {
      case: 'tags match all exclude tags',
      deviceIndex: 1,
      tags: { ...skipTags, x: 'y' },
      fii: 0,
      exclude: skipTags,
      excluded: true,
    },
    {
      case: 'tags match only some exclude tags',
      deviceIndex: 1,
      tags: { 'cilium.io/skip': 'true' },
      fii: 0,
      exclude: skipTags,
      excluded: false,
    },
    {
      case: 'empty exclude tags exclude nothing',
      deviceIndex: 1,
      tags: { any: 'tag' },
      fii: 0,
      exclude: {},
      excluded: false,
    },
  ])('$case', ({ deviceIndex, tags, fii, exclude, excluded }) => {
    expect(
      isExcluded(eni({ deviceIndex, tags }), { firstInterfaceIndex: fii, excludeInterfaceTags: exclude }),
    ).toBe(excluded);
  });
});

describe('orderEnisToFill', () => {
  const plain = { limits: M5_LARGE, usePrimaryAddress: false, prefixDelegation: false };
  const exhausted = subnet('subnet-exhausted', 0);
  const other = subnet('subnet-other', 100);

  it.each([
    {
      case: 'lowest device index first, whatever the input order',
      enis: [eni({ deviceIndex: 2, secondaryCount: 1 }), eni({ deviceIndex: 1, secondaryCount: 5 })],
      knobSet: knobs({ firstInterfaceIndex: 1 }),
      context: plain,
      refusedSubnetIds: [],
      order: ['eni-1', 'eni-2'],
    },
    {
      case: 'full ENIs are skipped',
      enis: [eni({ deviceIndex: 1, secondaryCount: 9 }), eni({ deviceIndex: 2, secondaryCount: 8 })],
      knobSet: knobs({ firstInterfaceIndex: 1 }),
      context: plain,
      refusedSubnetIds: [],
      order: ['eni-2'],
    },
    {
      case: 'excluded ENIs are skipped',
      enis: [
        eni({ deviceIndex: 0 }),
        eni({ deviceIndex: 1, tags: { skip: 'yes' } }),
        eni({ deviceIndex: 2 }),
      ],
      knobSet: knobs({ firstInterfaceIndex: 1, excludeInterfaceTags: { skip: 'yes' } }),
      context: plain,
      refusedSubnetIds: [],
      order: ['eni-2'],
    },
    {
      case: 'ENIs in an exhausted or unknown subnet are skipped',
      enis: [
        eni({ deviceIndex: 1, subnetId: 'subnet-exhausted' }),
        eni({ deviceIndex: 2, subnetId: 'subnet-unknown' }),
        eni({ deviceIndex: 3, subnetId: 'subnet-other' }),
      ],
      knobSet: knobs({ firstInterfaceIndex: 1 }),
      context: plain,
      refusedSubnetIds: [],
      order: ['eni-3'],
    },
    {
      case: 'ENIs in a subnet that refused this round are skipped',
      enis: [eni({ deviceIndex: 1 }), eni({ deviceIndex: 2, subnetId: 'subnet-other' })],
      knobSet: knobs({ firstInterfaceIndex: 1 }),
      context: plain,
      refusedSubnetIds: ['subnet-node'],
      order: ['eni-2'],
    },
    {
      case: 'prefix delegation needs a free slot, not just room',
      enis: [eni({ deviceIndex: 1, prefixCount: 9 }), eni({ deviceIndex: 2, prefixCount: 8 })],
      knobSet: knobs({ firstInterfaceIndex: 1, usePrimaryAddress: true }),
      context: { limits: M5_LARGE, usePrimaryAddress: true, prefixDelegation: true },
      refusedSubnetIds: [],
      order: ['eni-2'],
    },
  ])('$case', ({ enis, knobSet, context, refusedSubnetIds, order }) => {
    const ordered = orderEnisToFill({
      enis,
      subnets: [NODE_SUBNET, exhausted, other],
      knobs: knobSet,
      limitContext: context,
      refusedSubnetIds,
    });
    expect(ordered.map((candidate) => candidate.eni.id)).toEqual(order);
  });

  it('the first candidate carries its room, slots and subnet', () => {
    const [chosen] = orderEnisToFill({
      enis: [eni({ deviceIndex: 0, secondaryCount: 6 })],
      subnets: [NODE_SUBNET],
      knobs: knobs(),
      limitContext: plain,
    });
    expect(chosen).toMatchObject({ roomIps: 3, freeSlots: 3, subnet: { id: 'subnet-node' } });
    expect(chosen?.eni.id).toBe('eni-0');
  });

  it('anyEniHasRoom ignores subnet state but honours exclusion', () => {
    const enis = [
      eni({ deviceIndex: 0 }),
      eni({ deviceIndex: 1, secondaryCount: 9, subnetId: 'subnet-exhausted' }),
    ];
    expect(anyEniHasRoom({ enis, knobs: knobs({ firstInterfaceIndex: 1 }), limitContext: plain })).toBe(
      false,
    );
    expect(anyEniHasRoom({ enis, knobs: knobs({ firstInterfaceIndex: 0 }), limitContext: plain })).toBe(true);
  });
});
