import { describe, expect, it } from 'vitest';
import { jsonEqual } from '../../../functions/core/json-equal.ts';

describe('jsonEqual', () => {
  it.each([
    { case: 'key order ignored', left: { a: 1, b: [1, 2] }, right: { b: [1, 2], a: 1 }, equal: true },
    { case: 'list order kept', left: [1, 2], right: [2, 1], equal: false },
    { case: 'undefined member counts as absent', left: { a: 1, b: undefined }, right: { a: 1 }, equal: true },
    { case: 'null is a value', left: { a: null }, right: {}, equal: false },
    { case: 'nested difference', left: { a: { b: { c: 1 } } }, right: { a: { b: { c: 2 } } }, equal: false },
    { case: 'object against list', left: { 0: 1 }, right: [1], equal: false },
  ])('$case', ({ left, right, equal }) => {
    expect(jsonEqual(left, right)).toBe(equal);
    expect(jsonEqual(right, left)).toBe(equal);
  });
});
