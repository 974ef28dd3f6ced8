import { describe, expect, it } from 'vitest';
import type { CiliumNode } from '../../../functions/core/ciliumnode.ts';
import { UNCONFIGURED_KNOBS } from '../../../functions/core/knobs.ts';
import { ciliumNodeDemand, watchTrigger } from '../../../functions/core/watch-plan.ts';

const INSTANCE_ID = 'i-0123456789abcdef0';
const DEFAULTS = { ...UNCONFIGURED_KNOBS, preAllocate: 8 };

/** A CiliumNode with `poolSize` pool IPs; demand as a 1.19 agent (`used`) or a 1.20 agent (`requested`). */
function node(options: {
  poolSize: number;
  used?: number;
  requested?: number;
  /** `requested.ipv6-addrs` (a 1.20 agent with IPv6 on). */
  requested6?: number;
  /** The /80 the status publishes on eni-1. */
  ipv6Prefix?: string;
  releaseIps?: Record<string, string>;
}): CiliumNode {
  const pool = Object.fromEntries(
    Array.from({ length: options.poolSize }, (_, index) => [`10.0.0.${index + 10}`, { resource: 'eni-1' }]),
  );
  const used = Object.fromEntries(
    Object.keys(pool)
      .slice(0, options.used ?? 0)
      .map((ip, index) => [ip, { owner: `default/pod-${index}`, resource: 'eni-1' }]),
  );
  return {
    metadata: { name: 'node-a', resourceVersion: '1' },
    spec: {
      'instance-id': INSTANCE_ID,
      ipam: {
        pool,
        ...(options.requested === undefined
          ? {}
          : {
              pools: {
                requested: [
                  {
                    pool: 'default',
                    needed: {
                      'ipv4-addrs': options.requested,
                      ...(options.requested6 === undefined ? {} : { 'ipv6-addrs': options.requested6 }),
                    },
                  },
                ],
              },
            }),
      },
    },
    status: {
      ...(options.ipv6Prefix === undefined
        ? {}
        : { eni: { enis: { 'eni-1': { id: 'eni-1', 'ipv6-prefixes': [options.ipv6Prefix] } } } }),
      ipam: {
        ...(options.used === undefined ? {} : { used }),
        ...(options.releaseIps === undefined ? {} : { 'release-ips': options.releaseIps }),
      },
    },
  } as unknown as CiliumNode;
}

describe('ciliumNodeDemand', () => {
  it.each([
    { case: '1.19: pool meets used + pre-allocate', cn: node({ poolSize: 8, used: 0 }), expected: 0 },
    { case: '1.19: five pods on a pool of eight', cn: node({ poolSize: 8, used: 5 }), expected: 5 },
    {
      case: '1.20: requested is in-use + pending + 8, none in use',
      cn: node({ poolSize: 8, requested: 8 }),
      expected: 0,
    },
    {
      case: '1.20: five pods requested beyond the pre-allocation',
      cn: node({ poolSize: 8, requested: 13 }),
      expected: 5,
    },
    {
      case: '1.20: a request the pool already covers',
      cn: node({ poolSize: 13, requested: 13 }),
      expected: 0,
    },
  ])('$case', ({ cn, expected }) => {
    expect(ciliumNodeDemand(cn, DEFAULTS)).toBe(expected);
  });
});

describe('watchTrigger', () => {
  it.each([
    {
      case: '1.19 demand crosses the watermark',
      previous: node({ poolSize: 8, used: 0 }),
      current: node({ poolSize: 8, used: 5 }),
      expected: { instanceId: INSTANCE_ID, allocate: true, release: false },
    },
    {
      case: '1.20 demand crosses the watermark',
      previous: node({ poolSize: 8, requested: 8 }),
      current: node({ poolSize: 8, requested: 13 }),
      expected: { instanceId: INSTANCE_ID, allocate: true, release: false },
    },
    {
      case: '1.20 demand first seen above the watermark',
      previous: undefined,
      current: node({ poolSize: 8, requested: 13 }),
      expected: { instanceId: INSTANCE_ID, allocate: true, release: false },
    },
    {
      case: '1.20 demand that stays above the watermark (being served) starts nothing again',
      previous: node({ poolSize: 8, requested: 12 }),
      current: node({ poolSize: 8, requested: 13 }),
      expected: undefined,
    },
    {
      case: '1.19 demand below the watermark',
      previous: node({ poolSize: 8, used: 0 }),
      current: node({ poolSize: 13, used: 5 }),
      expected: undefined,
    },
    {
      case: 'a 1.20 agent starts asking for IPv6 with its IPv4 satisfied',
      previous: node({ poolSize: 8, requested: 8 }),
      current: node({ poolSize: 8, requested: 8, requested6: 8 }),
      expected: { instanceId: INSTANCE_ID, allocate: true, release: false },
    },
    {
      case: 'an agent asking for IPv6 that already has its /80 starts nothing',
      previous: node({ poolSize: 8, requested: 8 }),
      current: node({ poolSize: 8, requested: 8, requested6: 8, ipv6Prefix: '2600:1f18:4a01:ab01:1::/80' }),
      expected: undefined,
    },
    {
      case: 'an agent still waiting for its /80 (being served, or blocked) starts nothing again',
      previous: node({ poolSize: 8, requested: 8, requested6: 8 }),
      current: node({ poolSize: 8, requested: 8, requested6: 9 }),
      expected: undefined,
    },
    {
      case: 'the agent answered the release handshake',
      previous: node({ poolSize: 10, used: 0, releaseIps: { '10.0.0.19': 'marked-for-release' } }),
      current: node({ poolSize: 10, used: 0, releaseIps: { '10.0.0.19': 'ready-for-release' } }),
      expected: { instanceId: INSTANCE_ID, allocate: false, release: true },
    },
  ])('$case', ({ previous, current, expected }) => {
    expect(watchTrigger(previous, current, DEFAULTS)).toEqual(expected);
  });

  it('starts nothing for a CiliumNode that names no instance yet', () => {
    const current = node({ poolSize: 0, requested: 13 });
    delete (current.spec as Record<string, unknown>)['instance-id'];
    expect(watchTrigger(undefined, current, DEFAULTS)).toBeUndefined();
  });
});
