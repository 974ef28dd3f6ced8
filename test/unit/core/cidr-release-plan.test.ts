import { describe, expect, it } from 'vitest';
import {
  type CidrReleaseInputs,
  planCidrRelease,
  releasableCidrs,
  unassignmentStillWanted,
  withoutTombstoned,
} from '../../../functions/core/cidr-release-plan.ts';
import type { CiliumNode } from '../../../functions/core/ciliumnode.ts';
import type { CidrRelease, EniState } from '../../../functions/core/model.ts';
import { eni, ipOn, knobs } from './fixtures.ts';

/**
 * The multi-pool release planner against cilium's operator-side cases (reference
 * cilium-multipool.md §4.1 `TestTrackMultiPoolAllocatedLocked`, `TestHandleMultiPoolCIDRRelease`,
 * `PrepareCIDRRelease`), adapted to the durable, withdraw-first release: "marked" is an entry,
 * "released" is an unassignment once the status no longer lists the CIDR.
 */

const NOW = 10_000_000;
const DELAY_MS = 5_000;
const PAST = NOW - 3_600_000;
const eth1: EniState = eni({ deviceIndex: 1, secondaryCount: 3, prefixCount: 1 });
// eth1: primary 10.0.1.4, secondaries 10.0.1.10-12, prefix 10.0.1.128/28
const A = `${ipOn(1, 10)}/32`;
const B = `${ipOn(1, 11)}/32`;
const C = `${ipOn(1, 12)}/32`;
const P = `${ipOn(1, 128)}/28`;

function node(
  allocated: readonly string[] | undefined,
  options: { used?: boolean; published?: readonly string[] } = {},
): CiliumNode {
  const published = options.published ?? [A, B, C, P];
  return {
    metadata: { name: 'n1', resourceVersion: '9' },
    spec: {
      eni: { 'first-interface-index': 1 },
      ipam: {
        'pre-allocate': 2,
        pools: {
          requested: [{ pool: 'default', needed: { 'ipv4-addrs': 4 } }],
          ...(allocated ? { allocated: [{ pool: 'default', cidrs: [...allocated] }] } : {}),
        },
      },
    },
    status: {
      eni: {
        enis: {
          'eni-1': {
            id: 'eni-1',
            addresses: published.filter((cidr) => cidr.endsWith('/32')).map((cidr) => cidr.slice(0, -3)),
            prefixes: published.filter((cidr) => !cidr.endsWith('/32')),
          },
        },
      },
      ...(options.used ? { ipam: { used: { [ipOn(1, 10)]: { owner: 'pod' } } } } : {}),
    },
  };
}

function inputs(
  cn: CiliumNode,
  releases: Record<string, CidrRelease> = {},
  overrides: Partial<CidrReleaseInputs> = {},
): CidrReleaseInputs {
  return {
    record: { enis: [eni({ deviceIndex: 0 }), eth1], cidrReleases: releases },
    ciliumNode: cn,
    knobs: knobs({ firstInterfaceIndex: 1 }),
    releaseEnabled: true,
    releaseDelayMs: DELAY_MS,
    tombstoneMs: 300_000,
    nowEpochMs: NOW,
    ...overrides,
  };
}

const pending = (since = PAST): CidrRelease => ({ eniId: 'eni-1', state: 'pending', sinceEpochMs: since });
const withdrawing: CidrRelease = { eniId: 'eni-1', state: 'withdrawing', sinceEpochMs: PAST };

function entries(plan: ReturnType<typeof planCidrRelease>): Record<string, string> {
  if (plan.kind === 'none') return {};
  return Object.fromEntries(Object.entries(plan.releases).map(([cidr, entry]) => [cidr, entry.state]));
}

describe('tracking what the agent dropped from allocated', () => {
  it.each([
    {
      case: 'non-multi-pool (used reported): nothing tracked',
      cn: node([A], { used: true }),
      releases: {},
      expected: {},
    },
    { case: 'everything allocated: nothing tracked', cn: node([A, B, C, P]), releases: {}, expected: {} },
    {
      case: 'a /32 missing from allocated: pending',
      cn: node([A, B, P]),
      releases: {},
      expected: { [C]: 'pending' },
    },
    {
      case: 'a /28 missing: pending as the whole prefix',
      cn: node([A, B, C]),
      releases: {},
      expected: { [P]: 'pending' },
    },
    {
      case: 'reappearing in allocated: dropped',
      cn: node([A, B, C, P]),
      releases: { [C]: pending() },
      expected: {},
    },
    {
      case: 'gone from EC2 (detached): becomes a tombstone',
      cn: node([A, B, P]),
      releases: { [`${ipOn(1, 99)}/32`]: pending() },
      expected: { [C]: 'pending', [`${ipOn(1, 99)}/32`]: 'released' },
    },
    {
      case: 'release switched off: pending entries dropped',
      cn: node([A, B, P]),
      releases: { [C]: pending() },
      overrides: { releaseEnabled: false },
      expected: {},
    },
  ])('$case', ({ cn, releases, expected, overrides }) => {
    expect(entries(planCidrRelease(inputs(cn, releases, overrides)))).toEqual(expected);
  });

  it('keeps the first-observation timestamp while the CIDR stays out', () => {
    const since = NOW - 1_000;
    const plan = planCidrRelease(inputs(node([A, B, P]), { [C]: pending(since) }));
    expect(plan.kind).toBe('none');
  });
});

describe('release after the delay: withdraw, then unassign', () => {
  it.each([
    { case: 'delay not elapsed: waits', releases: { [C]: pending(NOW - 1_000) }, expected: 'none' },
    {
      case: 'delay elapsed: withdrawing (the sync takes it out of status first)',
      releases: { [C]: pending() },
      expected: { [C]: 'withdrawing' },
    },
  ])('$case', ({ releases, expected }) => {
    const plan = planCidrRelease(inputs(node([A, B, P]), releases));
    expect(plan.kind === 'none' ? 'none' : entries(plan)).toEqual(expected);
  });

  it('unassigns a withdrawn /32 once status no longer lists it; never before', () => {
    const listed = planCidrRelease(inputs(node([A, B, P]), { [C]: withdrawing }));
    expect(listed.kind).toBe('none');
    const plan = planCidrRelease(inputs(node([A, B, P], { published: [A, B, P] }), { [C]: withdrawing }));
    expect(plan).toMatchObject({
      kind: 'update',
      unassignments: [{ eniId: 'eni-1', ips: [ipOn(1, 12)], prefixes: [] }],
    });
    expect(entries(plan)).toEqual({ [C]: 'released' });
  });

  it('unassigns a /28 whole (never its 16 addresses one by one, cilium #48125)', () => {
    const plan = planCidrRelease(inputs(node([A, B, C], { published: [A, B, C] }), { [P]: withdrawing }));
    expect(plan).toMatchObject({ unassignments: [{ eniId: 'eni-1', ips: [], prefixes: [P] }] });
  });

  it('aborts a withdrawal the agent took back into allocated', () => {
    expect(entries(planCidrRelease(inputs(node([A, B, C, P]), { [C]: withdrawing })))).toEqual({});
  });

  it('aborts the withdrawal when the node goes back to the CRD protocol (downgrade)', () => {
    expect(entries(planCidrRelease(inputs(node([A, B, P], { used: true }), { [C]: withdrawing })))).toEqual(
      {},
    );
  });

  it('releases only while the pool stays at or above requested (no churn with the allocator)', () => {
    // requested 4; available 3 + 16 = 19: the /28 (16) cannot go, the /32s can (19 - 1 - 1 - 1 >= 4).
    const allOut = { [A]: pending(), [B]: pending(), [C]: pending(), [P]: pending() };
    expect(entries(planCidrRelease(inputs(node([]), allOut)))).toEqual({
      [A]: 'withdrawing',
      [B]: 'withdrawing',
      [C]: 'withdrawing',
      [P]: 'pending',
    });
  });

  it('drops a tombstone after its time, keeps it before', () => {
    const tombstone: CidrRelease = {
      eniId: 'eni-1',
      state: 'released',
      sinceEpochMs: PAST,
      releasedAtEpochMs: NOW - 1_000,
    };
    const gone = `${ipOn(1, 13)}/32`;
    expect(planCidrRelease(inputs(node([A, B, C, P]), { [gone]: tombstone })).kind).toBe('none');
    const later = planCidrRelease(
      inputs(node([A, B, C, P]), { [gone]: tombstone }, { nowEpochMs: NOW + 300_000 }),
    );
    expect(entries(later)).toEqual({});
  });
});

describe('what is releasable (cilium PrepareCIDRRelease)', () => {
  it('never the primary IP, never an excluded ENI, prefixes whole', () => {
    const withPrimary: EniState = { ...eth1, secondaryIps: [...eth1.secondaryIps, eth1.primaryIp] };
    const cidrs = releasableCidrs(
      [eni({ deviceIndex: 0, secondaryCount: 2 }), withPrimary],
      knobs({ firstInterfaceIndex: 1 }),
    );
    expect([...cidrs.keys()].sort()).toEqual([A, B, C, P].sort());
  });

  it('re-checks on a fresh read: not when the agent lists it again, or status publishes it, or the node left multi-pool', () => {
    const unassignment = { eniId: 'eni-1', ips: [ipOn(1, 12)], prefixes: [] };
    expect(unassignmentStillWanted(unassignment, node([A, B, P], { published: [A, B, P] }))).toBe(true);
    expect(unassignmentStillWanted(unassignment, node([A, B, C, P], { published: [A, B, P] }))).toBe(false);
    expect(unassignmentStillWanted(unassignment, node([A, B, P]))).toBe(false);
    expect(unassignmentStillWanted(unassignment, node([A, B, P], { used: true, published: [A, B, P] }))).toBe(
      false,
    );
  });

  it('tombstones hide what a lagging Describe still lists', () => {
    expect(withoutTombstoned([eth1], new Set([C, P]))[0]).toMatchObject({
      secondaryIps: [ipOn(1, 10), ipOn(1, 11)],
      prefixes: [],
    });
  });
});
