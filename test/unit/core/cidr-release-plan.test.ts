import { describe, expect, it } from 'vitest';
import {
  type CidrReleaseInputs,
  planCidrRelease,
  releasableCidrs,
  unassignmentStillWanted,
  withoutTombstoned,
  withWithdrawalVersions,
} from '../../../functions/core/cidr-release-plan.ts';
import {
  type CiliumNode,
  RECORD_TABLE_ANNOTATION,
  RECORD_VERSION_ANNOTATION,
} from '../../../functions/core/ciliumnode.ts';
import type { CidrRelease, EniState } from '../../../functions/core/model.ts';
import { eni, ipOn, knobs } from './fixtures.ts';

/**
 * The multi-pool release planner against cilium's operator-side cases
 * (https://github.com/cilium/cilium/blob/711821bf3b/operator/pkg/ipam/nodemanager/node_test.go `TestTrackMultiPoolAllocatedLocked`, `TestHandleMultiPoolCIDRRelease`,
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
/** The record version read; the withdrawing entries below were made so by this version's write. */
const VERSION = 7;
const TABLE = 'nodes@2026-11-30T12:00:00.000Z';

/**
 * The CiliumNode: by default it carries the record version that made the entries withdrawing
 * (`annotation`: the record-version annotation, `undefined` for none; `table`: the record-table
 * annotation, none by default, which counts as the sync's own table).
 */
function node(
  allocated: readonly string[] | undefined,
  options: {
    used?: boolean;
    published?: readonly string[];
    annotation?: number | undefined;
    table?: string;
  } = {},
): CiliumNode {
  const published = options.published ?? [A, B, C, P];
  const annotation = 'annotation' in options ? options.annotation : VERSION;
  return {
    metadata: {
      name: 'n1',
      resourceVersion: '9',
      annotations: {
        ...(annotation === undefined ? {} : { [RECORD_VERSION_ANNOTATION]: String(annotation) }),
        ...(options.table === undefined ? {} : { [RECORD_TABLE_ANNOTATION]: options.table }),
      },
    },
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
    record: { version: VERSION, enis: [eni({ deviceIndex: 0 }), eth1], cidrReleases: releases },
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
const withdrawing: CidrRelease = {
  eniId: 'eni-1',
  state: 'withdrawing',
  sinceEpochMs: PAST,
  withdrawnInVersion: VERSION,
};

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

  // Guards the `reallocated` removal: `entries` maps a `none` plan to `{}` as well, so these
  // assert the update itself. A kept entry would keep its old `sinceEpochMs`, and the agent's next
  // drop of the CIDR would skip the release delay.
  it.each([
    { case: 'a pending entry reappearing in allocated: dropped (reallocated)', entry: pending() },
    {
      case: 'a withdrawing entry the agent took back into allocated: the withdrawal aborted (reallocated)',
      entry: withdrawing,
    },
  ])('$case', ({ entry }) => {
    const plan = planCidrRelease(inputs(node([A, B, C, P]), { [C]: entry }));
    expect(plan).toEqual({
      kind: 'update',
      releases: {},
      changes: [{ cidr: C, to: 'dropped', reason: 'reallocated' }],
      unassignments: [],
    });
  });

  it('a CIDR dropped again after it was re-allocated waits the whole release delay anew', () => {
    const firstDrop = pending(PAST);
    const retaken = planCidrRelease(inputs(node([A, B, C, P]), { [C]: firstDrop }));
    const afterRetake = retaken.kind === 'update' ? retaken.releases : { [C]: firstDrop };
    const droppedAgain = planCidrRelease(inputs(node([A, B, P]), afterRetake));
    expect(droppedAgain).toMatchObject({
      kind: 'update',
      releases: { [C]: { state: 'pending', sinceEpochMs: NOW } },
      changes: [{ cidr: C, to: 'pending', reason: 'not-allocated' }],
    });
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
      unassignments: [{ eniId: 'eni-1', ips: [ipOn(1, 12)], prefixes: [], withdrawnInVersion: VERSION }],
    });
    expect(entries(plan)).toEqual({ [C]: 'released' });
  });

  it('unassigns a /28 whole (never its 16 addresses one by one, cilium #48125)', () => {
    const plan = planCidrRelease(inputs(node([A, B, C], { published: [A, B, C] }), { [P]: withdrawing }));
    expect(plan).toMatchObject({ unassignments: [{ eniId: 'eni-1', ips: [], prefixes: [P] }] });
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

describe('unassigned only once the CiliumNode carries the withdrawal (record version W)', () => {
  // A sync that read a record older than W may still write the CIDR into status, even when status
  // does not list it now (a CIDR assigned but never published is absent from status all along).
  const outOfStatus = (options: Parameters<typeof node>[1] = {}) =>
    node([A, B, P], { published: [A, B, P], ...options });
  const W = VERSION;
  const plannedUnassignments = (
    cn: CiliumNode,
    entry: CidrRelease,
    overrides: Partial<CidrReleaseInputs> = {},
  ) => {
    const plan = planCidrRelease(inputs(cn, { [C]: entry }, overrides));
    return plan.kind === 'none' ? 'none' : plan.unassignments.flatMap((unassignment) => unassignment.ips);
  };

  it.each([
    {
      case: 'the CiliumNode behind W: stays withdrawing, nothing written',
      cn: outOfStatus({ annotation: W - 1 }),
      expected: 'none',
    },
    {
      case: 'no record-version annotation (an agent restart wiped it): stays withdrawing',
      cn: outOfStatus({ annotation: undefined }),
      expected: 'none',
    },
    { case: 'the CiliumNode at W: unassigned', cn: outOfStatus({ annotation: W }), expected: [ipOn(1, 12)] },
    {
      case: 'the CiliumNode past W: unassigned',
      cn: outOfStatus({ annotation: W + 3 }),
      expected: [ipOn(1, 12)],
    },
  ])('$case', ({ cn, expected }) => {
    expect(plannedUnassignments(cn, withdrawing)).toEqual(expected);
  });

  it.each([
    {
      case: 'an annotation of an older table (before a restore): stays withdrawing, whatever its number',
      table: 'nodes@2026-11-01T12:00:00.000Z',
      expected: 'none',
    },
    {
      case: 'an annotation of a newer table: stays withdrawing',
      table: 'nodes-restored@2026-12-01T12:00:00.000Z',
      expected: 'none',
    },
    { case: 'an annotation of the same table: unassigned', table: TABLE, expected: [ipOn(1, 12)] },
  ])('$case', ({ table, expected }) => {
    const cn = outOfStatus({ annotation: W + 10, table });
    expect(plannedUnassignments(cn, withdrawing, { table: TABLE })).toEqual(expected);
  });

  it('an entry written before entries carried W waits for the record version read', () => {
    const { withdrawnInVersion: _absent, ...older } = withdrawing;
    expect(plannedUnassignments(outOfStatus({ annotation: VERSION - 1 }), older)).toBe('none');
    expect(plannedUnassignments(outOfStatus({ annotation: VERSION }), older)).toEqual([ipOn(1, 12)]);
  });

  it('asks the CiliumNode for the newest W among the CIDRs of one ENI', () => {
    const plan = planCidrRelease(
      inputs(node([A, P], { published: [A, P], annotation: W + 2 }), {
        [B]: { ...withdrawing, withdrawnInVersion: W + 2 },
        [C]: withdrawing,
      }),
    );
    expect(plan).toMatchObject({
      unassignments: [{ eniId: 'eni-1', ips: [ipOn(1, 11), ipOn(1, 12)], withdrawnInVersion: W + 2 }],
    });
  });

  it('re-checks the annotation on the fresh read: behind W, wiped, or of another table, not released', () => {
    const unassignment = { eniId: 'eni-1', ips: [ipOn(1, 12)], prefixes: [], withdrawnInVersion: W };
    expect(unassignmentStillWanted(unassignment, outOfStatus({ annotation: W }), TABLE)).toBe(true);
    expect(unassignmentStillWanted(unassignment, outOfStatus({ annotation: W, table: TABLE }), TABLE)).toBe(
      true,
    );
    expect(unassignmentStillWanted(unassignment, outOfStatus({ annotation: W - 1 }), TABLE)).toBe(false);
    expect(unassignmentStillWanted(unassignment, outOfStatus({ annotation: undefined }), TABLE)).toBe(false);
    expect(
      unassignmentStillWanted(
        unassignment,
        outOfStatus({ annotation: W, table: 'nodes@2026-11-01T12:00:00.000Z' }),
        TABLE,
      ),
    ).toBe(false);
  });

  it('the write that makes an entry withdrawing stamps it with its own version; others are kept', () => {
    const { withdrawnInVersion: _absent, ...unstamped } = withdrawing;
    const tombstone: CidrRelease = { ...withdrawing, state: 'released', releasedAtEpochMs: NOW };
    expect(
      withWithdrawalVersions({ [A]: unstamped, [B]: withdrawing, [C]: pending(), [P]: tombstone }, W + 1),
    ).toEqual({
      [A]: { ...unstamped, withdrawnInVersion: W + 1 },
      [B]: withdrawing,
      [C]: pending(),
      [P]: tombstone,
    });
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
    const unassignment = { eniId: 'eni-1', ips: [ipOn(1, 12)], prefixes: [], withdrawnInVersion: VERSION };
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
