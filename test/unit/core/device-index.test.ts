import { describe, expect, it } from 'vitest';
import {
  emptyInterfaceSlots,
  firstFreeDeviceIndex,
  nextFreeIndexAfter,
} from '../../../functions/core/device-index.ts';
import { eni, M5_4XLARGE, M5_LARGE } from './fixtures.ts';

const at = (...indexes: number[]) => indexes.map((deviceIndex) => ({ deviceIndex }));

describe('firstFreeDeviceIndex', () => {
  it.each([
    { case: 'only eth0, first index 1', used: at(0), start: 1, max: 3, index: 1 },
    { case: 'only eth0, first index 0 skips eth0', used: at(0), start: 0, max: 3, index: 1 },
    { case: 'a gap is reused', used: at(0, 1, 3), start: 1, max: 8, index: 2 },
    { case: 'first index 2 skips a free 1', used: at(0), start: 2, max: 3, index: 2 },
    { case: 'unordered input', used: at(2, 0, 1), start: 1, max: 8, index: 3 },
    { case: 'all slots used', used: at(0, 1, 2), start: 1, max: 3, index: undefined },
    { case: 'first index at the limit', used: at(0), start: 3, max: 3, index: undefined },
    { case: 'negative start is treated as 0', used: at(1), start: -4, max: 3, index: 0 },
  ])('$case', ({ used, start, max, index }) => {
    expect(firstFreeDeviceIndex(used, start, max)).toBe(index);
  });
});

describe('nextFreeIndexAfter', () => {
  it.each([
    { case: 'conflict at 1 with stale view: try 2', used: at(0), conflict: 1, max: 3, index: 2 },
    { case: 'skips indexes known to be used', used: at(0, 2, 3), conflict: 1, max: 8, index: 4 },
    { case: 'conflict on the last index: none left', used: at(0), conflict: 2, max: 3, index: undefined },
  ])('$case', ({ used, conflict, max, index }) => {
    expect(nextFreeIndexAfter(used, conflict, max)).toBe(index);
  });
});

describe('emptyInterfaceSlots', () => {
  it.each([
    { case: 'm5.large with eth0', limits: M5_LARGE, count: 1, slots: 2 },
    { case: 'm5.large full', limits: M5_LARGE, count: 3, slots: 0 },
    { case: 'm5.4xlarge with 5', limits: M5_4XLARGE, count: 5, slots: 3 },
    { case: 'more observed than the limit never goes negative', limits: M5_LARGE, count: 4, slots: 0 },
  ])('$case', ({ limits, count, slots }) => {
    const enis = Array.from({ length: count }, (_, deviceIndex) => eni({ deviceIndex }));
    expect(emptyInterfaceSlots(limits, enis)).toBe(slots);
  });
});
