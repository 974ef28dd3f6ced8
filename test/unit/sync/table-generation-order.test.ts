import { describe, expect, it } from 'vitest';
import {
  compareTableGenerations,
  formatTableGeneration,
  isReconciledIn,
  parseTableGeneration,
} from '../../../functions/core/table-generation.ts';

const at = (iso: string) => Date.parse(iso);

describe('table generations', () => {
  it('format as <name>@<ISO creation time> and parse back', () => {
    const generation = { name: 'eni-ipam-nodes', createdAtEpochMs: at('2026-11-30T12:00:00.000Z') };
    expect(formatTableGeneration(generation)).toBe('eni-ipam-nodes@2026-11-30T12:00:00.000Z');
    expect(parseTableGeneration(formatTableGeneration(generation))).toEqual(generation);
    expect(parseTableGeneration('eni-ipam-nodes')).toEqual({ name: 'eni-ipam-nodes' });
    expect(parseTableGeneration('nodes@yesterday')).toBeUndefined();
    expect(parseTableGeneration('')).toBeUndefined();
  });

  it('are ordered by creation time, a bare name first, the name breaking ties, on both sides alike', () => {
    const a = { name: 'a', createdAtEpochMs: 1 };
    const b = { name: 'b', createdAtEpochMs: 2 };
    expect(compareTableGenerations(a, b)).toBe('older');
    expect(compareTableGenerations(b, a)).toBe('newer');
    expect(compareTableGenerations({ name: 'a', createdAtEpochMs: 3 }, a)).toBe('newer');
    expect(compareTableGenerations({ name: 'z' }, a)).toBe('older');
    expect(compareTableGenerations({ name: 'a' }, a)).toBe('same');
    expect(compareTableGenerations({ name: 'b', createdAtEpochMs: 1 }, a)).toBe('newer');
    expect(compareTableGenerations(a, { name: 'b', createdAtEpochMs: 1 })).toBe('older');
  });

  it('reconcile a record only in the very generation its stamp names', () => {
    const own = 'nodes@2026-06-01T00:00:00.000Z';
    expect(isReconciledIn(own, own)).toBe(true);
    expect(isReconciledIn('nodes@2026-01-01T00:00:00.000Z', own)).toBe(false);
    expect(isReconciledIn(undefined, own)).toBe(false);
  });
});
