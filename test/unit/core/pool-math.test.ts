import { describe, expect, it } from 'vitest';
import { isExcluded } from '../../../functions/core/eni-selection.ts';
import type { EniState, NodeKnobs } from '../../../functions/core/model.ts';
import {
  calculateExcessIps,
  calculateNeededIps,
  countAvailableIps,
  DEFAULT_PRE_ALLOCATE_IPS,
  maxAllocatableIps,
  minAllocatableIps,
  poolAddressesOfEni,
  resolveMaxAllocate,
  resolvePreAllocate,
  slotMixCapacityAdjustmentIps,
} from '../../../functions/core/pool-math.ts';
import { eni, knobs, M5_4XLARGE, M5_LARGE, T3_MEDIUM, T3_NANO } from './fixtures.ts';

/** One pool entry: an address and the ENI that holds it (`spec.ipam.pool[ip].resource`). */
interface PoolAddress {
  readonly ip: string;
  readonly eniId: string;
}

/**
 * The listing `countAvailableIps` is checked against: every address of the pool, those of
 * non-excluded ENIs (cilium `ResyncInterfacesAndIPs`), ENIs in the given order, addresses
 * numerically within each.
 */
function poolAddresses(
  enis: readonly EniState[],
  knobSet: Pick<NodeKnobs, 'firstInterfaceIndex' | 'excludeInterfaceTags' | 'usePrimaryAddress'>,
): PoolAddress[] {
  return enis
    .filter((eni) => !isExcluded(eni, knobSet))
    .flatMap((eni) =>
      poolAddressesOfEni(eni, knobSet.usePrimaryAddress).map((ip) => ({ ip, eniId: eni.id })),
    );
}

describe('calculateNeededIps', () => {
  // The first ten rows are cilium's own table (`neededDef`, pkg/ipam/node_test.go).
  it.each([
    {
      case: 'cilium: empty pool, min-allocate 16 wins',
      available: 0,
      used: 0,
      pre: 0,
      min: 16,
      max: 0,
      needed: 16,
    },
    {
      case: 'cilium: min-allocate 16 beats pre-allocate 8',
      available: 0,
      used: 0,
      pre: 8,
      min: 16,
      max: 0,
      needed: 16,
    },
    {
      case: 'cilium: pre-allocate 16 beats min-allocate 8',
      available: 0,
      used: 0,
      pre: 16,
      min: 8,
      max: 0,
      needed: 16,
    },
    { case: 'cilium: pre-allocate only', available: 0, used: 0, pre: 16, min: 0, max: 0, needed: 16 },
    {
      case: 'cilium: min-allocate tops up 8 to 16',
      available: 8,
      used: 0,
      pre: 0,
      min: 16,
      max: 0,
      needed: 8,
    },
    { case: 'cilium: keep 8 free over 4 used', available: 8, used: 4, pre: 8, min: 0, max: 0, needed: 4 },
    { case: 'cilium: min-allocate already met', available: 8, used: 4, pre: 8, min: 8, max: 0, needed: 4 },
    {
      case: 'cilium: max-allocate below available clamps to 0',
      available: 8,
      used: 4,
      pre: 8,
      min: 8,
      max: 6,
      needed: 0,
    },
    {
      case: 'cilium: max-allocate equal to available',
      available: 8,
      used: 4,
      pre: 8,
      min: 0,
      max: 8,
      needed: 0,
    },
    { case: 'cilium: max-allocate caps 8 to 4', available: 4, used: 4, pre: 8, min: 0, max: 8, needed: 4 },
    { case: 'pool larger than the watermark', available: 20, used: 2, pre: 8, min: 0, max: 0, needed: 0 },
    { case: 'used beyond available (stale pool)', available: 5, used: 9, pre: 8, min: 0, max: 0, needed: 12 },
    {
      case: 'min-allocate below available is ignored',
      available: 12,
      used: 10,
      pre: 2,
      min: 10,
      max: 0,
      needed: 0,
    },
  ])('$case', ({ available, used, pre, min, max, needed }) => {
    expect(
      calculateNeededIps({
        availableIpCount: available,
        usedIpCount: used,
        preAllocate: pre,
        minAllocate: min,
        maxAllocate: max,
      }),
    ).toBe(needed);
  });
});

describe('calculateExcessIps', () => {
  // The first ten rows are cilium's own table (`excessDef`, pkg/ipam/node_test.go).
  it.each([
    { case: 'cilium: empty pool', available: 0, used: 0, pre: 0, min: 16, maw: 0, excess: 0 },
    {
      case: 'cilium: below min-allocate + watermark',
      available: 15,
      used: 0,
      pre: 8,
      min: 16,
      maw: 8,
      excess: 0,
    },
    { case: 'cilium: one above min-allocate', available: 17, used: 0, pre: 8, min: 16, maw: 0, excess: 1 },
    {
      case: 'cilium: within max-above-watermark',
      available: 20,
      used: 0,
      pre: 8,
      min: 16,
      maw: 4,
      excess: 0,
    },
    {
      case: 'cilium: no min-allocate, 9 over the watermark',
      available: 21,
      used: 0,
      pre: 8,
      min: 0,
      maw: 4,
      excess: 9,
    },
    {
      case: 'cilium: min-allocate 20 + watermark 8',
      available: 20,
      used: 0,
      pre: 8,
      min: 20,
      maw: 8,
      excess: 0,
    },
    {
      case: 'cilium: one used, under the upper bound',
      available: 16,
      used: 1,
      pre: 8,
      min: 16,
      maw: 8,
      excess: 0,
    },
    {
      case: 'cilium: min-allocate 17 + watermark 8',
      available: 20,
      used: 4,
      pre: 8,
      min: 17,
      maw: 8,
      excess: 0,
    },
    { case: 'cilium: 8 over pre-allocate', available: 20, used: 4, pre: 8, min: 0, maw: 0, excess: 8 },
    { case: 'cilium: watermark absorbs 8', available: 20, used: 4, pre: 8, min: 0, maw: 8, excess: 0 },
    // functions/README.md, Cilium's formulas: the `used + preAllocate <= upper bound` branch (ba8f5c897f, #27970).
    {
      case: 'cilium ENI test example releases 5 (was 3 before #27970)',
      available: 18,
      used: 10,
      pre: 2,
      min: 10,
      maw: 3,
      excess: 5,
    },
    {
      case: 'used + pre exactly at the bound takes the #27970 branch',
      available: 20,
      used: 10,
      pre: 3,
      min: 10,
      maw: 3,
      excess: 7,
    },
    {
      case: 'used + pre above the bound falls to the default formula',
      available: 18,
      used: 10,
      pre: 4,
      min: 10,
      maw: 3,
      excess: 1,
    },
    { case: 'used above the bound', available: 30, used: 20, pre: 4, min: 10, maw: 3, excess: 3 },
    { case: 'never negative', available: 10, used: 9, pre: 8, min: 0, maw: 0, excess: 0 },
  ])('$case', ({ available, used, pre, min, maw, excess }) => {
    expect(
      calculateExcessIps({
        availableIpCount: available,
        usedIpCount: used,
        preAllocate: pre,
        minAllocate: min,
        maxAboveWatermark: maw,
      }),
    ).toBe(excess);
  });
});

describe('maxAllocatableIps', () => {
  it.each([
    { case: 'm5.large, all ENIs', limits: M5_LARGE, fii: 0, pd: false, max: 27 },
    { case: 'm5.large, eth0 excluded', limits: M5_LARGE, fii: 1, pd: false, max: 18 },
    { case: 'm5.large, prefix delegation', limits: M5_LARGE, fii: 0, pd: true, max: 432 },
    { case: 'm5.large, eth0 excluded, prefix delegation', limits: M5_LARGE, fii: 1, pd: true, max: 288 },
    { case: 't3.medium', limits: T3_MEDIUM, fii: 0, pd: false, max: 15 },
    { case: 'm5.4xlarge, eth0 excluded', limits: M5_4XLARGE, fii: 1, pd: false, max: 203 },
    { case: 'm5.4xlarge, prefix delegation', limits: M5_4XLARGE, fii: 0, pd: true, max: 3712 },
    { case: 'first index equals the ENI count: 0 ENIs usable', limits: M5_LARGE, fii: 3, pd: false, max: 0 },
    {
      case: 'first index beyond the ENI count: 0 = no cap (cilium)',
      limits: M5_LARGE,
      fii: 4,
      pd: false,
      max: 0,
    },
    { case: 'unknown limits: 0 = no cap', limits: undefined, fii: 0, pd: false, max: 0 },
  ])('$case', ({ limits, fii, pd, max }) => {
    expect(maxAllocatableIps(limits, { firstInterfaceIndex: fii }, pd)).toBe(max);
  });
});

describe('minAllocatableIps', () => {
  it.each([
    { case: 'unknown limits: the default 8', limits: undefined, fii: 0, min: 8 },
    { case: 'm5.large: the default 8', limits: M5_LARGE, fii: 0, min: 8 },
    { case: 't3.nano, all ENIs: 2', limits: T3_NANO, fii: 0, min: 2 },
    { case: 't3.nano, eth0 excluded: 1', limits: T3_NANO, fii: 1, min: 1 },
    { case: 't3.nano, every ENI excluded: 0', limits: T3_NANO, fii: 2, min: 0 },
    { case: 't3.medium, two ENIs excluded: 5', limits: T3_MEDIUM, fii: 2, min: 5 },
    { case: 'first index beyond the ENI count: 0', limits: T3_MEDIUM, fii: 7, min: 0 },
  ])('$case', ({ limits, fii, min }) => {
    expect(minAllocatableIps(limits, { firstInterfaceIndex: fii })).toBe(min);
  });
});

describe('resolvePreAllocate', () => {
  it.each([
    { case: 'configured value wins', pre: 3, limits: M5_LARGE, fii: 0, resolved: 3 },
    { case: 'configured value wins even above capacity', pre: 50, limits: T3_NANO, fii: 0, resolved: 50 },
    { case: '0 seeds the default 8', pre: 0, limits: M5_LARGE, fii: 0, resolved: DEFAULT_PRE_ALLOCATE_IPS },
    { case: '0 seeds the capacity of a tiny instance', pre: 0, limits: T3_NANO, fii: 1, resolved: 1 },
    { case: '0 with unknown limits seeds 8', pre: 0, limits: undefined, fii: 1, resolved: 8 },
  ])('$case', ({ pre, limits, fii, resolved }) => {
    expect(resolvePreAllocate({ preAllocate: pre, firstInterfaceIndex: fii }, limits)).toBe(resolved);
  });
});

describe('resolveMaxAllocate', () => {
  it.each([
    { case: 'configured value wins', max: 12, pd: false, resolved: 12 },
    { case: '0 falls back to instance capacity', max: 0, pd: false, resolved: 18 },
    { case: '0 falls back to prefix capacity', max: 0, pd: true, resolved: 288 },
  ])('$case', ({ max, pd, resolved }) => {
    expect(resolveMaxAllocate({ maxAllocate: max, firstInterfaceIndex: 1 }, M5_LARGE, pd)).toBe(resolved);
  });
});

describe('slotMixCapacityAdjustmentIps and the adjusted cap', () => {
  const fii1 = { firstInterfaceIndex: 1, excludeInterfaceTags: {} };
  it.each([
    {
      case: 'prefixes only, delegated: no change',
      enis: [eni({ deviceIndex: 1, prefixCount: 4 })],
      pd: true,
      adjustment: 0,
    },
    {
      case: 'single IPs only, not delegated: no change',
      enis: [eni({ deviceIndex: 1, secondaryCount: 4 })],
      pd: false,
      adjustment: 0,
    },
    {
      case: 'delegated, an ENI with 3 fallback IPs: -45',
      enis: [eni({ deviceIndex: 1, secondaryCount: 3, prefixCount: 2 })],
      pd: true,
      adjustment: -45,
    },
    {
      case: 'not delegated, 2 leftover prefixes: +30',
      enis: [eni({ deviceIndex: 1, secondaryCount: 3, prefixCount: 2 })],
      pd: false,
      adjustment: 30,
    },
    {
      case: 'excluded ENIs do not count',
      enis: [eni({ deviceIndex: 0, prefixCount: 2 }), eni({ deviceIndex: 1, secondaryCount: 2 })],
      pd: true,
      adjustment: -30,
    },
  ])('$case', ({ enis, pd, adjustment }) => {
    expect(slotMixCapacityAdjustmentIps(enis, fii1, pd)).toBe(adjustment);
  });

  it.each([
    { case: 'adjusts the instance maximum', max: 0, limits: M5_LARGE, adjustment: -45, resolved: 243 },
    {
      case: 'a configured max-allocate is taken as is',
      max: 12,
      limits: M5_LARGE,
      adjustment: -45,
      resolved: 12,
    },
    { case: 'unknown limits stay "no cap"', max: 0, limits: undefined, adjustment: 30, resolved: 0 },
  ])('resolveMaxAllocate: $case', ({ max, limits, adjustment, resolved }) => {
    expect(resolveMaxAllocate({ maxAllocate: max, firstInterfaceIndex: 1 }, limits, true, adjustment)).toBe(
      resolved,
    );
  });
});

describe('pool addresses and available count', () => {
  const mixed = eni({ deviceIndex: 1, secondaryCount: 2, prefixCount: 1 });

  it.each([
    {
      case: 'secondaries and every prefix address, primary left out',
      usePrimaryAddress: false,
      expected: ['10.0.1.10', '10.0.1.11', ...Array.from({ length: 16 }, (_, i) => `10.0.1.${128 + i}`)],
    },
    {
      case: 'primary included with use-primary-address, sorted numerically',
      usePrimaryAddress: true,
      expected: [
        '10.0.1.4',
        '10.0.1.10',
        '10.0.1.11',
        ...Array.from({ length: 16 }, (_, i) => `10.0.1.${128 + i}`),
      ],
    },
  ])('$case', ({ usePrimaryAddress, expected }) => {
    expect(poolAddressesOfEni(mixed, usePrimaryAddress)).toEqual(expected);
  });

  const enis = [
    eni({ deviceIndex: 0, secondaryCount: 3 }),
    eni({ deviceIndex: 1, secondaryCount: 2, prefixCount: 1 }),
    eni({ deviceIndex: 2, secondaryCount: 4, tags: { 'cilium.io/skip': 'true' } }),
  ];

  it.each([
    { case: 'all ENIs', knobSet: knobs(), available: 3 + 18 + 4 },
    {
      case: 'eth0 excluded by first-interface-index',
      knobSet: knobs({ firstInterfaceIndex: 1 }),
      available: 18 + 4,
    },
    {
      case: 'tagged ENI excluded',
      knobSet: knobs({ excludeInterfaceTags: { 'cilium.io/skip': 'true' } }),
      available: 3 + 18,
    },
    {
      case: 'primaries counted with use-primary-address',
      knobSet: knobs({ usePrimaryAddress: true }),
      available: 28,
    },
  ])('$case: count matches the listed pool', ({ knobSet, available }) => {
    expect(countAvailableIps(enis, knobSet)).toBe(available);
    expect(poolAddresses(enis, knobSet)).toHaveLength(available);
  });

  it('pool entries name the ENI that holds each address', () => {
    const pool = poolAddresses(enis, knobs({ firstInterfaceIndex: 2 }));
    expect(pool).toEqual([
      { ip: '10.0.2.10', eniId: 'eni-2' },
      { ip: '10.0.2.11', eniId: 'eni-2' },
      { ip: '10.0.2.12', eniId: 'eni-2' },
      { ip: '10.0.2.13', eniId: 'eni-2' },
    ]);
  });
});
