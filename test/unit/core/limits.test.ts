import { describe, expect, it } from 'vitest';
import {
  basePodIpLimitPerEni,
  effectiveIpLimitPerEni,
  eniAddressCount,
  freeAddressSlots,
  isPrefixDelegationActive,
  leftoverPrefixCapacityIps,
  roomOnEniIps,
} from '../../../functions/core/limits.ts';
import { eni, M5_4XLARGE, M5_LARGE, M5_METAL, T2_MEDIUM, T3_MEDIUM } from './fixtures.ts';

describe('basePodIpLimitPerEni', () => {
  it.each([
    { case: 'm5.large reserves the primary', limits: M5_LARGE, usePrimary: false, limit: 9 },
    { case: 'm5.large with use-primary-address', limits: M5_LARGE, usePrimary: true, limit: 10 },
    { case: 't3.medium', limits: T3_MEDIUM, usePrimary: false, limit: 5 },
    { case: 'm5.4xlarge', limits: M5_4XLARGE, usePrimary: false, limit: 29 },
    {
      case: 'no addresses at all is 0, not -1',
      limits: { ...M5_LARGE, ipv4PerInterface: 0 },
      usePrimary: false,
      limit: 0,
    },
  ])('$case', ({ limits, usePrimary, limit }) => {
    expect(basePodIpLimitPerEni(limits, usePrimary)).toBe(limit);
  });
});

describe('effectiveIpLimitPerEni', () => {
  it.each([
    { case: 'plain', usePrimary: false, pd: false, prefixes: 0, limit: 9 },
    { case: 'use-primary-address adds one', usePrimary: true, pd: false, prefixes: 0, limit: 10 },
    { case: 'prefix delegation multiplies by 16', usePrimary: false, pd: true, prefixes: 0, limit: 144 },
    {
      case: 'prefix delegation with use-primary-address',
      usePrimary: true,
      pd: true,
      prefixes: 1,
      limit: 160,
    },
    {
      case: 'leftover prefixes add 15 each when delegation is off',
      usePrimary: false,
      pd: false,
      prefixes: 2,
      limit: 39,
    },
  ])('$case', ({ usePrimary, pd, prefixes, limit }) => {
    const context = { limits: M5_LARGE, usePrimaryAddress: usePrimary, prefixDelegation: pd };
    expect(effectiveIpLimitPerEni(context, eni({ deviceIndex: 1, prefixCount: prefixes }))).toBe(limit);
  });

  it('without an ENI gives the node-wide per-ENI limit', () => {
    expect(
      effectiveIpLimitPerEni({ limits: M5_LARGE, usePrimaryAddress: false, prefixDelegation: false }),
    ).toBe(9);
  });

  it('leftover capacity is 0 on a prefix-delegated node', () => {
    expect(leftoverPrefixCapacityIps(eni({ deviceIndex: 1, prefixCount: 3 }), true)).toBe(0);
    expect(leftoverPrefixCapacityIps(eni({ deviceIndex: 1, prefixCount: 3 }), false)).toBe(45);
  });
});

describe('room and slots on an ENI (m5.large)', () => {
  it.each([
    {
      case: 'empty ENI',
      secondaries: 0,
      prefixes: 0,
      usePrimary: false,
      pd: false,
      count: 0,
      room: 9,
      slots: 9,
    },
    {
      case: 'half full',
      secondaries: 4,
      prefixes: 0,
      usePrimary: false,
      pd: false,
      count: 4,
      room: 5,
      slots: 5,
    },
    { case: 'full', secondaries: 9, prefixes: 0, usePrimary: false, pd: false, count: 9, room: 0, slots: 0 },
    {
      case: 'use-primary-address counts the primary',
      secondaries: 4,
      prefixes: 0,
      usePrimary: true,
      pd: false,
      count: 5,
      room: 5,
      slots: 5,
    },
    {
      case: 'prefix-delegated, two prefixes',
      secondaries: 0,
      prefixes: 2,
      usePrimary: false,
      pd: true,
      count: 32,
      room: 112,
      slots: 7,
    },
    {
      case: 'prefix-delegated, full',
      secondaries: 0,
      prefixes: 9,
      usePrimary: false,
      pd: true,
      count: 144,
      room: 0,
      slots: 0,
    },
    {
      case: 'leftover prefix after delegation went off',
      secondaries: 3,
      prefixes: 1,
      usePrimary: false,
      pd: false,
      count: 19,
      room: 5,
      slots: 5,
    },
  ])('$case', ({ secondaries, prefixes, usePrimary, pd, count, room, slots }) => {
    const subject = eni({ deviceIndex: 1, secondaryCount: secondaries, prefixCount: prefixes });
    const context = { limits: M5_LARGE, usePrimaryAddress: usePrimary, prefixDelegation: pd };
    expect(eniAddressCount(subject, usePrimary)).toBe(count);
    expect(roomOnEniIps(context, subject)).toBe(room);
    expect(freeAddressSlots(M5_LARGE, subject)).toBe(slots);
  });
});

describe('isPrefixDelegationActive', () => {
  const primaryOnly = eni({ deviceIndex: 0 });
  const withPrefixes = eni({ deviceIndex: 1, prefixCount: 2 });
  const withSecondaries = eni({ deviceIndex: 2, secondaryCount: 3 });
  const mixedOnOneEni = eni({ deviceIndex: 2, secondaryCount: 3, prefixCount: 1 });

  it.each([
    {
      case: 'enabled on nitro with fresh ENIs',
      stack: true,
      limits: M5_LARGE,
      disabled: false,
      enis: [primaryOnly],
      active: true,
    },
    {
      case: 'stack switch off',
      stack: false,
      limits: M5_LARGE,
      disabled: false,
      enis: [primaryOnly],
      active: false,
    },
    {
      case: 'unknown limits',
      stack: true,
      limits: undefined,
      disabled: false,
      enis: [primaryOnly],
      active: false,
    },
    {
      case: 'xen hypervisor',
      stack: true,
      limits: T2_MEDIUM,
      disabled: false,
      enis: [primaryOnly],
      active: false,
    },
    {
      case: 'bare metal (no hypervisor)',
      stack: true,
      limits: M5_METAL,
      disabled: false,
      enis: [primaryOnly],
      active: true,
    },
    {
      case: 'disabled on this node',
      stack: true,
      limits: M5_LARGE,
      disabled: true,
      enis: [primaryOnly],
      active: false,
    },
    {
      case: 'every ENI with addresses has prefixes',
      stack: true,
      limits: M5_LARGE,
      disabled: false,
      enis: [primaryOnly, withPrefixes],
      active: true,
    },
    {
      case: 'all-or-nothing: one ENI with plain secondaries turns it off',
      stack: true,
      limits: M5_LARGE,
      disabled: false,
      enis: [primaryOnly, withPrefixes, withSecondaries],
      active: false,
    },
    {
      case: 'an ENI holding both still counts as prefixed',
      stack: true,
      limits: M5_LARGE,
      disabled: false,
      enis: [withPrefixes, mixedOnOneEni],
      active: true,
    },
  ])('$case', ({ stack, limits, disabled, enis, active }) => {
    expect(
      isPrefixDelegationActive({
        stackPrefixDelegationEnabled: stack,
        limits,
        knobs: { disablePrefixDelegation: disabled },
        enis,
      }),
    ).toBe(active);
  });
});
