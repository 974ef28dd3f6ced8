import { describe, expect, it } from 'vitest';
import { eniClientToken, MAX_CLIENT_TOKEN_LENGTH } from '../../../functions/core/client-token.ts';

const base = { instanceId: 'i-0123456789abcdef0', deviceIndex: 1, recordVersion: 7, attempt: 0 };

describe('eniClientToken', () => {
  it('is the same for the same inputs (a replayed create gets the same ENI)', () => {
    expect(eniClientToken({ ...base })).toBe(eniClientToken({ ...base }));
  });

  it('has a pinned value, so a change of scheme is a deliberate decision', () => {
    // cilium-eni- + sha256('["i-0123456789abcdef0",1,7,0]') truncated to 53 hex characters.
    expect(eniClientToken(base)).toBe('cilium-eni-54cc961fcc0c8e18c7bf056da209c8f84179843bd46d46a833b20');
  });

  it('is at most 64 printable ASCII characters', () => {
    const token = eniClientToken(base);
    expect(token.length).toBeLessThanOrEqual(MAX_CLIENT_TOKEN_LENGTH);
    expect(token).toMatch(/^[\x21-\x7e]+$/);
  });

  it.each([
    { case: 'another instance', change: { instanceId: 'i-0fedcba9876543210' } },
    { case: 'another device index', change: { deviceIndex: 2 } },
    { case: 'another record version', change: { recordVersion: 8 } },
    { case: 'another attempt salt', change: { attempt: 1 } },
    {
      case: 'fields cannot be shifted into each other',
      change: { instanceId: 'i-0123456789abcdef01', deviceIndex: 0 },
    },
  ])('differs for $case', ({ change }) => {
    expect(eniClientToken({ ...base, ...change })).not.toBe(eniClientToken(base));
  });

  it.each([
    { case: 'empty instance id', change: { instanceId: '' } },
    { case: 'negative device index', change: { deviceIndex: -1 } },
    { case: 'fractional record version', change: { recordVersion: 1.5 } },
    { case: 'negative attempt', change: { attempt: -1 } },
  ])('rejects $case', ({ change }) => {
    expect(() => eniClientToken({ ...base, ...change })).toThrow(RangeError);
  });
});
