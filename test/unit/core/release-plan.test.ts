import { describe, expect, it } from 'vitest';
import type { CiliumNode, ReleaseStatus } from '../../../functions/core/ciliumnode.ts';
import { expandCidr } from '../../../functions/core/ip-math.ts';
import type {
  EniState,
  ExcessMark,
  NodeKnobs,
  NodeRecord,
  ReleaseState,
} from '../../../functions/core/model.ts';
import {
  enisAfterUnassign,
  isMultiPoolNode,
  marksAfterUnassign,
  planRelease,
  type ReleaseInputs,
  type ReleasePlan,
} from '../../../functions/core/release-plan.ts';
import { decideNodeSweep } from '../../../functions/core/sweep-plan.ts';
import { eni, INSTANCE_ID, instance, ipOn, knobs, M5_LARGE } from './fixtures.ts';

const NOW = 10_000_000;
const DELAY_MS = 180_000;
const LONG_AGO = NOW - DELAY_MS - 1;

const eth0 = eni({ deviceIndex: 0 });
/** 10.0.1.10 … 10.0.1.17 */
const eth1 = eni({ deviceIndex: 1, secondaryCount: 8 });
const on1 = (...hosts: number[]) => hosts.map((host) => ipOn(1, host));
/** first-interface-index 1, pre-allocate 2: with .16 and .17 used, cilium's excess is 8 - 2 - 2 = 4. */
const nodeKnobs: NodeKnobs = knobs({ firstInterfaceIndex: 1, preAllocate: 2 });
const USED = on1(16, 17);
/** `PrepareIPRelease` on one ENI without prefixes: its 4 lowest free addresses. */
const EXCESS = on1(10, 11, 12, 13);

interface NodeView {
  used?: readonly string[];
  answers?: Record<string, ReleaseStatus>;
  /** Pool IPs; default: every address of eth1. */
  pool?: readonly string[];
}

function ciliumNode(view: NodeView = {}, enis: readonly EniState[] = [eth1]): CiliumNode {
  const pool = view.pool ?? enis.flatMap((e) => [...e.secondaryIps, ...e.prefixes.flatMap(expandCidr)]);
  return {
    metadata: { name: 'ip-10-0-0-4.ec2.internal', resourceVersion: '7' },
    spec: {
      'instance-id': INSTANCE_ID,
      ipam: { pool: Object.fromEntries(pool.map((ip) => [ip, { resource: 'eni-1' }])) },
    },
    status: {
      ipam: {
        used: Object.fromEntries((view.used ?? USED).map((ip) => [ip, { owner: 'pod', resource: 'eni-1' }])),
        ...(view.answers ? { 'release-ips': view.answers } : {}),
      },
    },
  };
}

function marksOf(ips: readonly string[], state?: ReleaseState, sinceEpochMs = LONG_AGO) {
  return Object.fromEntries(
    ips.map((ip) => [ip, state === undefined ? { sinceEpochMs } : { sinceEpochMs, state }]),
  ) as Record<string, ExcessMark>;
}

function answersOf(ips: readonly string[], answer: ReleaseStatus): Record<string, ReleaseStatus> {
  return Object.fromEntries(ips.map((ip) => [ip, answer]));
}

function inputs(
  overrides: Partial<ReleaseInputs> & { marks?: Record<string, ExcessMark> } = {},
): ReleaseInputs {
  const { marks, ...rest } = overrides;
  return {
    record: { enis: [eth0, eth1], excessMarks: marks ?? {} },
    ciliumNode: ciliumNode(),
    limits: M5_LARGE,
    knobs: nodeKnobs,
    prefixDelegationEnabled: false,
    releaseEnabled: true,
    releaseDelayMs: DELAY_MS,
    nowEpochMs: NOW,
    ...rest,
  };
}

/**
 * The next record's marks as states (`pending` for a mark inside its delay), for compact
 * expectations; a `none` plan leaves the given marks as they are.
 */
function statesOf(plan: ReleasePlan, given: ReleaseInputs): Record<string, string> {
  const marks = plan.kind === 'none' ? (given.record.excessMarks ?? {}) : plan.marks;
  return Object.fromEntries(Object.entries(marks).map(([ip, mark]) => [ip, mark.state ?? 'pending']));
}

function statesFor(ips: readonly string[], state: string): Record<string, string> {
  return Object.fromEntries(ips.map((ip) => [ip, state]));
}

function reasonsOf(plan: ReleasePlan): Record<string, string> {
  if (plan.kind === 'none') return {};
  return Object.fromEntries(plan.changes.map((change) => [change.ip, change.reason]));
}

describe('planRelease (a): the excess set gets marks, marks outside it are dropped', () => {
  it.each([
    {
      case: "cilium's excess (8 available, 2 used, pre-allocate 2 → 4) is marked, delay starting now",
      given: inputs(),
      kind: 'update-marks',
      states: statesFor(EXCESS, 'pending'),
      reasons: statesFor(EXCESS, 'excess'),
    },
    {
      case: 'demand rose (6 used → excess 0): every mark not yet released is dropped, ready ones too',
      given: inputs({
        ciliumNode: ciliumNode({ used: on1(12, 13, 14, 15, 16, 17), pool: on1(12, 13, 14, 15, 16, 17) }),
        marks: {
          ...marksOf(on1(10, 11), 'ready-for-release'),
          ...marksOf(on1(12, 13), 'marked-for-release'),
        },
      }),
      kind: 'update-marks',
      states: {},
      reasons: statesFor(EXCESS, 'no-longer-excess'),
    },
    {
      case: 'one more IP used (excess 3): the IP that left the selection loses its mark, the rest stay',
      given: inputs({
        ciliumNode: ciliumNode({ used: on1(13, 16, 17) }),
        marks: marksOf(EXCESS, 'marked-for-release'),
      }),
      kind: 'update-marks',
      states: statesFor(on1(10, 11, 12), 'marked-for-release'),
      reasons: { [ipOn(1, 13)]: 'no-longer-excess' },
    },
    {
      case: 'release switched off: marks in progress are aborted, nothing new is marked',
      given: inputs({ releaseEnabled: false, marks: marksOf(on1(10, 11), 'marked-for-release') }),
      kind: 'update-marks',
      states: {},
      reasons: statesFor(on1(10, 11), 'release-disabled'),
    },
    {
      case: 'a 1.20 multi-pool agent: marks are aborted (it never answers the handshake)',
      given: inputs({
        ciliumNode: {
          ...ciliumNode({ used: [] }),
          spec: { ipam: { pools: { requested: [{ pool: 'default', needed: { 'ipv4-addrs': 2 } }] } } },
        },
        marks: marksOf(on1(10)),
      }),
      kind: 'update-marks',
      states: {},
      reasons: { [ipOn(1, 10)]: 'multi-pool-node' },
    },
    {
      case: 'limits unknown: cilium computes no excess, so marks are dropped',
      given: inputs({ limits: undefined, marks: marksOf(on1(10)) }),
      kind: 'update-marks',
      states: {},
      reasons: { [ipOn(1, 10)]: 'no-longer-excess' },
    },
  ])('$case', ({ given, kind, states, reasons }) => {
    const plan = planRelease(given);
    expect(plan.kind).toBe(kind);
    expect(statesOf(plan, given)).toEqual(states);
    expect(reasonsOf(plan)).toEqual(reasons);
  });

  it.each([
    {
      case: 'nothing excess, nothing marked',
      given: inputs({ ciliumNode: ciliumNode({ used: on1(12, 13, 14, 15, 16, 17) }) }),
      reason: 'no-excess',
    },
    {
      case: 'release off, nothing marked',
      given: inputs({ releaseEnabled: false }),
      reason: 'release-disabled',
    },
    {
      case: 'multi-pool agent, nothing marked',
      given: inputs({
        ciliumNode: {
          ...ciliumNode({ used: [] }),
          spec: { ipam: { pools: { requested: [{ pool: 'default' }] } } },
        },
      }),
      reason: 'multi-pool-node',
    },
  ])('nothing to do: $case', ({ given, reason }) => {
    expect(planRelease(given)).toMatchObject({ kind: 'none', reason });
  });

  it('new marks keep the time they were first seen in excess, continuously', () => {
    const plan = planRelease(inputs({ marks: marksOf(on1(10), undefined, NOW - 1000) }));
    expect(plan.kind === 'none' ? {} : plan.marks).toEqual({
      [ipOn(1, 10)]: { sinceEpochMs: NOW - 1000 },
      ...marksOf(on1(11, 12, 13), undefined, NOW),
    });
  });
});

describe('planRelease (b): the release delay', () => {
  it.each([
    {
      case: 'exactly the delay ago: still pending (cilium compares strictly)',
      since: NOW - DELAY_MS,
      state: 'pending',
    },
    {
      case: 'one millisecond past the delay: marked-for-release',
      since: NOW - DELAY_MS - 1,
      state: 'marked-for-release',
    },
    { case: 'just marked', since: NOW, state: 'pending' },
  ])('$case', ({ since, state }) => {
    const given = inputs({ marks: marksOf(EXCESS, undefined, since) });
    const plan = planRelease(given);
    expect(statesOf(plan, given)).toEqual(statesFor(EXCESS, state));
    expect(plan.kind).toBe(state === 'pending' ? 'none' : 'update-marks');
  });

  it('with a zero delay a new mark is published on the next plan, not the one that creates it', () => {
    const firstInputs = inputs({ releaseDelayMs: 0 });
    expect(statesOf(planRelease(firstInputs), firstInputs)).toEqual(statesFor(EXCESS, 'pending'));
    const secondInputs = inputs({
      releaseDelayMs: 0,
      nowEpochMs: NOW + 1,
      marks: marksOf(EXCESS, undefined, NOW),
    });
    expect(statesOf(planRelease(secondInputs), secondInputs)).toEqual(
      statesFor(EXCESS, 'marked-for-release'),
    );
  });
});

describe("planRelease (c): the agent's answers", () => {
  it.each([
    {
      case: 'ready-for-release turns a marked IP ready (the sync then drops it from the pool)',
      marks: marksOf(EXCESS, 'marked-for-release'),
      answers: answersOf(EXCESS, 'ready-for-release'),
      states: statesFor(EXCESS, 'ready-for-release'),
      reasons: statesFor(EXCESS, 'agent-ready'),
    },
    {
      case: 'do-not-release drops the mark',
      marks: marksOf(EXCESS, 'marked-for-release'),
      answers: {
        ...answersOf(on1(10), 'do-not-release'),
        ...answersOf(on1(11, 12, 13), 'ready-for-release'),
      },
      states: statesFor(on1(11, 12, 13), 'ready-for-release'),
      reasons: { [ipOn(1, 10)]: 'agent-do-not-release', ...statesFor(on1(11, 12, 13), 'agent-ready') },
    },
    {
      case: 'do-not-release drops a ready mark too',
      marks: { ...marksOf(on1(10), 'ready-for-release'), ...marksOf(on1(11, 12, 13), 'marked-for-release') },
      answers: answersOf(on1(10), 'do-not-release'),
      states: statesFor(on1(11, 12, 13), 'marked-for-release'),
      reasons: { [ipOn(1, 10)]: 'agent-do-not-release' },
    },
    {
      case: 'answers to a mark still inside its delay are leftovers and ignored',
      marks: marksOf(EXCESS, undefined, NOW),
      answers: { ...answersOf(on1(10), 'do-not-release'), ...answersOf(on1(11), 'ready-for-release') },
      states: statesFor(EXCESS, 'pending'),
      reasons: {},
    },
    {
      case: 'no answer yet: marked-for-release waits',
      marks: marksOf(EXCESS, 'marked-for-release'),
      answers: answersOf(EXCESS, 'marked-for-release'),
      states: statesFor(EXCESS, 'marked-for-release'),
      reasons: {},
    },
  ])('$case', ({ marks, answers, states, reasons }) => {
    const given = inputs({ marks, ciliumNode: ciliumNode({ answers }) });
    const plan = planRelease(given);
    expect(plan.kind).not.toBe('unassign');
    expect(statesOf(plan, given)).toEqual(states);
    expect(reasonsOf(plan)).toEqual(reasons);
  });
});

describe('planRelease (d): unassigning in EC2', () => {
  const outOfPool = on1(14, 15, 16, 17);

  it('ready, out of spec.ipam.pool and unused: unassigned, grouped per ENI, marks released', () => {
    const given = inputs({
      marks: marksOf(EXCESS, 'ready-for-release'),
      ciliumNode: ciliumNode({ pool: outOfPool, answers: answersOf(EXCESS, 'ready-for-release') }),
    });
    const plan = planRelease(given);
    expect(plan).toMatchObject({
      kind: 'unassign',
      unassignments: [{ eniId: 'eni-1', ips: EXCESS, prefixes: [], addresses: EXCESS }],
    });
    expect(statesOf(plan, given)).toEqual(statesFor(EXCESS, 'released'));
    expect(reasonsOf(plan)).toEqual(statesFor(EXCESS, 'unassigned'));
  });

  it.each([
    {
      case: 'still in spec.ipam.pool (the sync has not dropped it yet): waits',
      marks: marksOf(EXCESS, 'ready-for-release'),
      node: ciliumNode({ answers: answersOf(EXCESS, 'ready-for-release') }),
    },
    {
      case: 'turned ready in this very plan: waits for the sync to drop it from the pool first',
      marks: marksOf(EXCESS, 'marked-for-release'),
      node: ciliumNode({ pool: outOfPool, answers: answersOf(EXCESS, 'ready-for-release') }),
    },
    {
      case: 'no CiliumNode to confirm the pool: waits',
      marks: marksOf(EXCESS, 'ready-for-release'),
      node: undefined,
    },
  ])('nothing is unassigned: $case', ({ marks, node }) => {
    expect(planRelease(inputs({ marks, ciliumNode: node })).kind).not.toBe('unassign');
  });

  it('a ready IP that EC2 no longer holds (a release that crashed before recording it) becomes released', () => {
    const without10 = { ...eth1, secondaryIps: eth1.secondaryIps.filter((ip) => ip !== ipOn(1, 10)) };
    const given = inputs({
      record: { enis: [eth0, without10], excessMarks: marksOf(on1(10), 'ready-for-release') },
      ciliumNode: ciliumNode({
        pool: on1(11, 12, 13, 14, 15),
        answers: answersOf(on1(10), 'ready-for-release'),
      }),
    });
    const plan = planRelease(given);
    expect(plan.kind).toBe('update-marks');
    expect(statesOf(plan, given)[ipOn(1, 10)]).toBe('released');
    expect(reasonsOf(plan)[ipOn(1, 10)]).toBe('gone-from-ec2');
  });

  describe('with /28 prefixes', () => {
    const prefixEni = eni({ deviceIndex: 1, prefixCount: 2 });
    const [firstPrefix = '', secondPrefix = ''] = prefixEni.prefixes;
    const firstAddresses = expandCidr(firstPrefix);
    const used = [expandCidr(secondPrefix)[3] ?? ''];
    const prefixInputs = (marks: Record<string, ExcessMark>, answered: readonly string[]) =>
      inputs({
        prefixDelegationEnabled: true,
        record: { enis: [eth0, prefixEni], excessMarks: marks },
        ciliumNode: ciliumNode(
          { used, pool: expandCidr(secondPrefix), answers: answersOf(answered, 'ready-for-release') },
          [prefixEni],
        ),
      });

    it('the excess set is the whole unused prefix (32 available, 1 used → 29 excess → one /28)', () => {
      const plan = planRelease(prefixInputs({}, []));
      expect(Object.keys(plan.kind === 'none' ? {} : plan.marks)).toEqual(firstAddresses);
    });

    it('all 16 addresses ready and out of the pool: the prefix is unassigned whole', () => {
      const plan = planRelease(prefixInputs(marksOf(firstAddresses, 'ready-for-release'), firstAddresses));
      expect(plan).toMatchObject({
        kind: 'unassign',
        unassignments: [{ eniId: 'eni-1', ips: [], prefixes: [firstPrefix], addresses: firstAddresses }],
      });
    });

    it('only some addresses ready: the prefix waits (EC2 releases prefixes whole)', () => {
      const marks = {
        ...marksOf(firstAddresses.slice(0, 15), 'ready-for-release'),
        ...marksOf(firstAddresses.slice(15), 'marked-for-release'),
      };
      const plan = planRelease(prefixInputs(marks, firstAddresses.slice(0, 15)));
      expect(plan).toMatchObject({ kind: 'none', reason: 'awaiting-handshake' });
    });
  });
});

describe('planRelease (e): released marks', () => {
  const released = marksOf(on1(9), 'released');
  it.each([
    {
      case: 'the agent still shows the entry: kept',
      answers: answersOf(on1(9), 'released'),
      enis: [eth0, eth1],
      expected: 'released',
      reason: undefined,
    },
    {
      case: 'the agent deleted the entry: dropped, the handshake is over',
      answers: {},
      enis: [eth0, eth1],
      expected: undefined,
      reason: 'agent-acknowledged',
    },
    {
      case: 'EC2 assigned the IP to the node again: dropped, so it can join the pool',
      answers: answersOf(on1(9), 'released'),
      enis: [eth0, { ...eth1, secondaryIps: [ipOn(1, 9), ...eth1.secondaryIps] }],
      expected: undefined,
      reason: 'reassigned',
    },
  ])('$case', ({ answers, enis, expected, reason }) => {
    const plan = planRelease(
      inputs({
        record: { enis, excessMarks: { ...released, ...marksOf(EXCESS, undefined, NOW) } },
        ciliumNode: ciliumNode({ answers }),
      }),
    );
    const mark = plan.kind === 'none' ? released[ipOn(1, 9)] : plan.marks[ipOn(1, 9)];
    expect(mark?.state).toBe(expected);
    expect(reasonsOf(plan)[ipOn(1, 9)]).toBe(reason);
  });
});

describe('planRelease (f): an IP in status.ipam.used is never unassigned', () => {
  it('a ready mark on an IP the agent now reports used is dropped, not unassigned', () => {
    const plan = planRelease(
      inputs({
        marks: marksOf(EXCESS, 'ready-for-release'),
        ciliumNode: ciliumNode({
          used: [...on1(10), ...USED],
          pool: on1(14, 15, 16, 17),
          answers: answersOf(EXCESS, 'ready-for-release'),
        }),
      }),
    );
    expect(plan.kind).toBe('unassign');
    const unassigned = plan.kind === 'unassign' ? plan.unassignments.flatMap((u) => u.addresses) : [];
    expect(unassigned).toEqual(on1(11, 12, 13));
    expect(reasonsOf(plan)[ipOn(1, 10)]).toBe('no-longer-excess');
  });

  // Every combination of mark state, answer, pool membership and use, for every address of the ENI.
  const states: (ReleaseState | undefined)[] = [
    undefined,
    'marked-for-release',
    'ready-for-release',
    'released',
  ];
  const answers: (ReleaseStatus | undefined)[] = [
    undefined,
    'marked-for-release',
    'ready-for-release',
    'do-not-release',
    'released',
  ];
  const cases = states.flatMap((state) =>
    answers.flatMap((answer) =>
      [true, false].flatMap((inPool) => [true, false].map((isUsed) => ({ state, answer, inPool, isUsed }))),
    ),
  );
  it.each(cases)(
    'state $state, answer $answer, in pool $inPool, used $isUsed',
    ({ state, answer, inPool, isUsed }) => {
      const addresses = eth1.secondaryIps;
      const used = isUsed ? addresses : [];
      const plan = planRelease(
        inputs({
          marks: marksOf(addresses, state),
          ciliumNode: ciliumNode({
            used,
            pool: inPool ? addresses : [],
            ...(answer ? { answers: answersOf(addresses, answer) } : {}),
          }),
        }),
      );
      const unassigned = plan.kind === 'unassign' ? plan.unassignments.flatMap((u) => u.addresses) : [];
      for (const ip of used) expect(unassigned).not.toContain(ip);
      // Only a mark that was already ready, out of the pool, can be unassigned.
      if (state !== 'ready-for-release' || inPool) expect(unassigned).toEqual([]);
    },
  );
});

describe('after the unassignments', () => {
  const plan = planRelease(
    inputs({
      record: { enis: [eth0, eth1], excessMarks: marksOf(EXCESS, 'ready-for-release') },
      ciliumNode: ciliumNode({ pool: on1(14, 15, 16, 17), answers: answersOf(EXCESS, 'ready-for-release') }),
    }),
  );
  if (plan.kind !== 'unassign') throw new Error(`expected an unassign plan, got ${plan.kind}`);
  const previous = marksOf(EXCESS, 'ready-for-release');

  it.each([
    { case: 'confirmed: released', confirmed: ['eni-1'], expected: 'released' },
    {
      case: 'not confirmed: stays ready, tried again next time',
      confirmed: [],
      expected: 'ready-for-release',
    },
  ])('marksAfterUnassign, $case', ({ confirmed, expected }) => {
    const marks = marksAfterUnassign(plan, previous, new Set(confirmed));
    expect(Object.values(marks).map((mark) => mark.state)).toEqual(EXCESS.map(() => expected));
  });

  it('enisAfterUnassign drops exactly the confirmed addresses and stamps the ENI', () => {
    const enis = enisAfterUnassign([eth0, eth1], plan.unassignments, NOW);
    expect(enis[1]?.secondaryIps).toEqual(on1(14, 15, 16, 17));
    expect(enis[1]?.lastMutatedAtEpochMs).toBe(NOW);
    expect(enis[0]).toBe(eth0);
  });

  it('enisAfterUnassign drops released prefixes', () => {
    const prefixEni = eni({ deviceIndex: 1, prefixCount: 2 });
    const [first = '', second = ''] = prefixEni.prefixes;
    const enis = enisAfterUnassign(
      [prefixEni],
      [{ eniId: prefixEni.id, ips: [], prefixes: [first], addresses: expandCidr(first) }],
      NOW,
    );
    expect(enis[0]?.prefixes).toEqual([second]);
  });
});

describe('isMultiPoolNode', () => {
  it.each([
    {
      case: 'requests pool default, used empty',
      ipam: { pools: { requested: [{ pool: 'default' }] } },
      used: [],
      expected: true,
    },
    {
      case: 'requests pool default, used reported (a downgraded 1.19 agent)',
      ipam: { pools: { requested: [{ pool: 'default' }] } },
      used: USED,
      expected: false,
    },
    { case: 'no pools', ipam: {}, used: [], expected: false },
    {
      case: 'another pool only',
      ipam: { pools: { requested: [{ pool: 'blue' }] } },
      used: [],
      expected: false,
    },
  ])('$case', ({ ipam, used, expected }) => {
    expect(isMultiPoolNode({ ...ciliumNode({ used }), spec: { ipam } })).toBe(expected);
  });
});

describe('decideNodeSweep: the release reason', () => {
  const record: NodeRecord = {
    instanceId: INSTANCE_ID,
    version: 3,
    nodeName: 'ip-10-0-0-4.ec2.internal',
    instanceType: 'm5.large',
    availabilityZone: 'us-east-1a',
    nodeSubnetId: 'subnet-node',
    vpc: { id: 'vpc-0a1b2c', primaryCidr: '10.0.0.0/16', secondaryCidrs: [] },
    enis: [eth0, eth1],
    knobs: nodeKnobs,
    prefixDelegation: false,
    agentProtocol: 'crd',
    lifecycle: 'active',
    createdAtEpochMs: 1,
    updatedAtEpochMs: 1,
  };
  const nodeSpec = {
    'instance-id': INSTANCE_ID,
    eni: { 'first-interface-index': 1 },
    ipam: { 'pre-allocate': 2 },
  };
  const decide = (overrides: { record?: NodeRecord; node?: CiliumNode; releaseEnabled?: boolean }) =>
    decideNodeSweep({
      cluster: { instance: instance(), attachedEnis: [eth0, eth1] },
      record: overrides.record ?? record,
      ciliumNode: overrides.node ?? { ...ciliumNode(), spec: { ...ciliumNode().spec, ...nodeSpec } },
      defaultKnobs: knobs(),
      limits: M5_LARGE,
      prefixDelegationEnabled: false,
      nowEpochMs: NOW,
      consistencyGraceMs: 60_000,
      releaseEnabled: overrides.releaseEnabled ?? true,
      releaseDelayMs: DELAY_MS,
    });

  it.each([
    {
      case: 'excess and nothing marked: release',
      given: {},
      expected: { kind: 'reconcile', reason: 'release', release: true },
    },
    {
      case: 'excess, release off: in sync',
      given: { releaseEnabled: false },
      expected: { kind: 'skip', reason: 'in-sync' },
    },
    {
      case: 'release off, the agent now speaks multi-pool (upgraded to 1.20): protocol-changed',
      given: {
        releaseEnabled: false,
        node: {
          ...ciliumNode({ used: [] }),
          spec: {
            ...ciliumNode().spec,
            ...nodeSpec,
            ipam: {
              ...nodeSpec.ipam,
              pools: { requested: [{ pool: 'default', needed: { 'ipv4-addrs': 2 + USED.length } }] },
            },
          },
        },
      },
      expected: { kind: 'reconcile', reason: 'protocol-changed', release: false },
    },
    {
      case: 'release off, the 1.20 agent asks for IPv6 and no ENI holds a /80: needs-ipv6-prefix',
      given: {
        releaseEnabled: false,
        node: {
          ...ciliumNode({ used: [] }),
          spec: {
            ...ciliumNode().spec,
            ...nodeSpec,
            ipam: {
              ...nodeSpec.ipam,
              pools: {
                requested: [{ pool: 'default', needed: { 'ipv4-addrs': 2 + USED.length, 'ipv6-addrs': 8 } }],
              },
            },
          },
        },
      },
      expected: { kind: 'reconcile', reason: 'needs-ipv6-prefix', release: false },
    },
    {
      case: 'marks waiting inside the delay: in sync (costs nothing)',
      given: { record: { ...record, excessMarks: marksOf(EXCESS, undefined, NOW - 1000) } },
      expected: { kind: 'skip', reason: 'in-sync' },
    },
    {
      case: 'marks waiting for the agent: in sync',
      given: { record: { ...record, excessMarks: marksOf(EXCESS, 'marked-for-release') } },
      expected: { kind: 'skip', reason: 'in-sync' },
    },
    {
      case: 'marks past the delay: release',
      given: { record: { ...record, excessMarks: marksOf(EXCESS) } },
      expected: { kind: 'reconcile', reason: 'release', release: true },
    },
    {
      case: 'needs IPs with marks to abort: allocation, with the release first',
      given: {
        record: { ...record, excessMarks: marksOf(EXCESS, 'ready-for-release') },
        node: {
          ...ciliumNode({ used: eth1.secondaryIps }),
          spec: { ...ciliumNode().spec, ...nodeSpec },
        },
      },
      expected: { kind: 'reconcile', reason: 'needs-ips', release: true },
    },
    {
      case: 'needs IPs, nothing marked: allocation only',
      given: {
        node: { ...ciliumNode({ used: eth1.secondaryIps }), spec: { ...ciliumNode().spec, ...nodeSpec } },
      },
      expected: { kind: 'reconcile', reason: 'needs-ips', release: false },
    },
  ])('$case', ({ given, expected }) => {
    expect(decide(given)).toEqual(expected);
  });
});
