import { agentProtocolOf } from './agent-protocol.ts';
import { computePoolDemand } from './allocation-plan.ts';
import type { CiliumNode, ReleaseStatus } from './ciliumnode.ts';
import { isExcluded } from './eni-selection.ts';
import { computeExcessIps } from './excess-selection.ts';
import { compareIpv4, expandCidr, sortIpv4 } from './ip-math.ts';
import { usedIps } from './knobs.ts';
import type { EniState, ExcessMark, InstanceLimits, NodeKnobs, NodeRecord, ReleaseState } from './model.ts';
import { poolAddressesOfEni } from './pool-math.ts';

/**
 * The excess-IP release planner: cilium-operator's release path and its side of the release
 * handshake (functions/README.md, *Agent protocols*; https://github.com/cilium/cilium/blob/507103c61f/pkg/ipam/node.go `handleIPRelease`,
 * `abortNoLongerExcessIPs`, `PopulateIPReleaseStatus`; `pkg/aws/eni/node.go` `PrepareIPRelease`,
 * `ReleaseIPs`, `ReleaseIPPrefixes`), made durable: cilium keeps `ipsMarkedForRelease` and
 * `ipReleaseStatus` in operator memory and loses them on restart; here they are the node record's
 * `excessMarks`, and every step is one record version. Pure.
 *
 * Who writes what (the sync publishes the record, the agent answers in the CiliumNode):
 *
 *   record mark            sync publishes                      agent answers / does
 *   (none) → {since}       nothing (inside the release delay)  may still hand the IP out
 *   marked-for-release     release-ips[ip] = marked            ready (in pool, unused) / do-not
 *   ready-for-release      drops ip from spec.ipam.pool FIRST  keeps its `ready` answer
 *   released (unassigned)  drops it from status, `released`    deletes the entry (out of pool)
 *   (dropped)              the entry disappears                —
 *
 * One stricter rule than cilium: cilium unassigns as soon as the agent says ready, while the IP may
 * still sit in `spec.ipam.pool`. Here the IP is unassigned only once the CiliumNode shows it out of
 * the pool and not in `status.ipam.used` (invariant 1 on the way down, invariant 5 always).
 */

export interface ReleaseInputs {
  /** The ENIs as last confirmed by EC2 and the record's marks (`NodeRecord.excessMarks`). */
  readonly record: Pick<NodeRecord, 'enis' | 'excessMarks'>;
  /**
   * The node's CiliumNode, already checked to belong to this instance, as last read: demand
   * (`status.ipam.used`), the agent's answers (`status.ipam.release-ips`) and what the agent can
   * hand out (`spec.ipam.pool`). `undefined` when there is none (no handshake can progress).
   */
  readonly ciliumNode: CiliumNode | undefined;
  readonly limits: InstanceLimits | undefined;
  readonly knobs: NodeKnobs;
  /** The stack-wide prefix-delegation switch (cilium `--aws-enable-prefix-delegation`). */
  readonly prefixDelegationEnabled: boolean;
  /** cilium `--aws-release-excess-ips`; when off, marks in progress are aborted and none are made. */
  readonly releaseEnabled: boolean;
  /** cilium `--excess-ip-release-delay` (default 180 s), in milliseconds. */
  readonly releaseDelayMs: number;
  readonly nowEpochMs: number;
}

/** Where an IP stands: not marked, marked but inside the delay (`pending`), or a handshake state. */
type MarkStage = 'unmarked' | 'pending' | ReleaseState;

type MarkChangeReason =
  /** (a) The IP entered the excess set: its delay starts now. */
  | 'excess'
  /** (a) The IP left the excess set before it was released: the handshake is aborted. */
  | 'no-longer-excess'
  /** (a) Release is switched off: every handshake that has not reached EC2 is aborted. */
  | 'release-disabled'
  /** (a) A 1.20 multi-pool agent: it derives its pools itself and takes no part in this handshake. */
  | 'multi-pool-node'
  /** (b) In the excess set for longer than the delay: the sync publishes `marked-for-release`. */
  | 'release-delay-elapsed'
  /** (c) The agent answered `ready-for-release`: the sync drops the IP from the pool first. */
  | 'agent-ready'
  /** (c) The agent answered `do-not-release` (it uses the IP, or does not have it in its pool). */
  | 'agent-do-not-release'
  /** (d) Ready, out of `spec.ipam.pool` and unused: unassigned in EC2 now. */
  | 'unassigned'
  /** (d) Ready and already gone from EC2 (a release that crashed before recording it, or out of band). */
  | 'gone-from-ec2'
  /** (e) The agent deleted the `released` entry: the handshake is over. */
  | 'agent-acknowledged'
  /** (e) EC2 assigned the released IP to this node again (cilium `7fbf7c6b64`). */
  | 'reassigned'
  /** (g) The IP's ENI is now excluded and the IP is in the pool, unused: it leaves through the handshake. */
  | 'excluded-eni'
  /** (g) An excluded ENI's IP the agent answered ready for is out of the pool: released, kept on EC2. */
  | 'left-pool';

interface MarkChange {
  readonly ip: string;
  readonly from: MarkStage;
  readonly to: MarkStage;
  readonly reason: MarkChangeReason;
}

/** One UnassignPrivateIpAddresses target: plain IPs and whole /28 prefixes of one ENI. */
export interface Unassignment {
  readonly eniId: string;
  /** Secondary IPs, numerically sorted. */
  readonly ips: readonly string[];
  /** Whole /28 prefixes (every one of their 16 addresses is ready), numerically sorted. */
  readonly prefixes: readonly string[];
  /** Every address leaving the ENI (the IPs and the prefixes' addresses), numerically sorted. */
  readonly addresses: readonly string[];
}

type NoReleaseReason =
  /** Release is off and no handshake is in progress. */
  | 'release-disabled'
  /** A multi-pool agent and no handshake in progress. */
  | 'multi-pool-node'
  /** Nothing is excess (or nothing excess is releasable) and nothing is marked. */
  | 'no-excess'
  /** Marks are in progress but none can move now (inside the delay, waiting for the agent or the sync). */
  | 'awaiting-handshake';

export type ReleasePlan =
  | { readonly kind: 'none'; readonly reason: NoReleaseReason; readonly excessIpCount: number }
  | {
      /** Only the record's marks change (no EC2 call): one conditional write. */
      readonly kind: 'update-marks';
      readonly excessIpCount: number;
      /** The next record's `excessMarks`. */
      readonly marks: Readonly<Record<string, ExcessMark>>;
      readonly changes: readonly MarkChange[];
    }
  | {
      /** Unassign in EC2 (under the node's lease), then record the marks. */
      readonly kind: 'unassign';
      readonly excessIpCount: number;
      /** The next record's marks, assuming every unassignment succeeds (see `marksAfterUnassign`). */
      readonly marks: Readonly<Record<string, ExcessMark>>;
      readonly changes: readonly MarkChange[];
      /** Per ENI, sorted by ENI id. */
      readonly unassignments: readonly Unassignment[];
    };

/**
 * The next marks and the EC2 unassignments for one node. Each mark is judged by the first rule that
 * applies to it:
 *
 * (e) `released` marks: dropped when the IP is on one of the node's ENIs again (`reassigned`), or
 *     when `status.ipam.release-ips` no longer holds the IP (`agent-acknowledged`: the agent deletes
 *     the entry once it reads `released` and the IP is out of `spec.ipam.pool`); kept otherwise.
 * (a) the excess set is cilium's: `calculateExcessIPs` for the count (`computePoolDemand`), then
 *     `PrepareIPRelease` for which addresses (`computeExcessIps`: one ENI, lowest ENI id among
 *     prefix ENIs first, whole unused /28s, never the primary, never an IP in `status.ipam.used`).
 *     Empty when release is off or the agent is a multi-pool (1.20) one. A non-released mark whose
 *     IP is not in the set is dropped (cilium `abortNoLongerExcessIPs`); a `ready-for-release` IP
 *     that EC2 no longer holds at all becomes `released` instead (`gone-from-ec2`), so the agent
 *     still completes its side. An excess IP without a mark gets `{sinceEpochMs: now}`.
 * (c) `do-not-release` in `release-ips` drops a published mark (`marked-for-release` or later);
 *     `ready-for-release` turns a `marked-for-release` mark into `ready-for-release`. Answers to a
 *     mark still inside its delay are leftovers of an aborted handshake and are ignored.
 * (b) a mark without state becomes `marked-for-release` once `now - since > delay` (cilium's strict
 *     comparison), new marks included (so a zero delay marks on the next plan, as cilium does).
 * (d) a mark that was ALREADY `ready-for-release` in the record (so the sync could drop it from the
 *     pool first), whose IP is absent from the CiliumNode's `spec.ipam.pool` and from
 *     `status.ipam.used`, is unassigned and becomes `released`: secondary IPs one by one, a /28
 *     prefix only when all 16 of its addresses qualify (EC2 releases prefixes whole). Grouped per
 *     ENI (cilium `ReleaseIPs` / `ReleaseIPPrefixes`).
 * (f) whatever its mark says, an IP in `status.ipam.used` is never unassigned.
 */
export function planRelease(inputs: ReleaseInputs): ReleasePlan {
  const { record, knobs } = inputs;
  const previous = record.excessMarks ?? {};
  const view = releaseView(inputs);
  const marks: Record<string, ExcessMark> = {};
  const changes: MarkChange[] = [];
  const readyToUnassign = new Set<string>();

  for (const [ip, mark] of Object.entries(previous)) {
    const judged = judgeMark(ip, mark, view);
    if (judged.next) marks[ip] = judged.next;
    if (judged.reason) {
      changes.push({
        ip,
        from: stageOf(mark),
        to: judged.next ? stageOf(judged.next) : 'unmarked',
        reason: judged.reason,
      });
    }
    if (judged.unassign) readyToUnassign.add(ip);
  }
  for (const [ip, mark, reason] of newMarks(previous, view, inputs)) {
    marks[ip] = mark;
    changes.push({ ip, from: 'unmarked', to: stageOf(mark), reason });
  }

  const unassignments = groupUnassignments(record.enis, knobs, readyToUnassign);
  for (const ip of unassignments.flatMap((unassignment) => unassignment.addresses)) {
    const mark = marks[ip];
    if (mark === undefined) continue;
    marks[ip] = { ...mark, state: 'released' };
    changes.push({ ip, from: 'ready-for-release', to: 'released', reason: 'unassigned' });
  }
  return releasePlanOf(inputs, view, {
    marks: sortMarks(marks),
    changes: changes.sort((left, right) => compareIpv4(left.ip, right.ip)),
    unassignments,
  });
}

/** What every mark is judged against: the CiliumNode's answers and pool, EC2's addresses, the excess set. */
interface ReleaseView {
  readonly used: ReadonlySet<string>;
  readonly answers: Readonly<Record<string, ReleaseStatus>>;
  readonly pool: ReadonlySet<string>;
  readonly assigned: ReadonlySet<string>;
  readonly multiPool: boolean;
  readonly excessIpCount: number;
  readonly excessIps: ReadonlySet<string>;
  /** IPs of ENIs that became excluded, leaving the pool (rule for `excluded-eni` marks). */
  readonly leaving: ReadonlySet<string>;
  /** Why a mark whose IP left the excess set is dropped. */
  readonly abortReason: MarkChangeReason;
  readonly published: boolean;
  readonly inputs: ReleaseInputs;
}

function releaseView(inputs: ReleaseInputs): ReleaseView {
  const { record, ciliumNode, knobs } = inputs;
  const used = new Set(usedIps(ciliumNode));
  const multiPool = isMultiPoolNode(ciliumNode);
  const { excessIpCount, excessIps } = excessSetOf(inputs, used, multiPool);
  return {
    used,
    answers: releaseAnswers(ciliumNode),
    pool: new Set(Object.keys(ciliumNode?.spec?.ipam?.pool ?? {})),
    assigned: addressesOnEnis(record.enis),
    multiPool,
    excessIpCount,
    excessIps,
    leaving: multiPool ? new Set<string>() : excludedPoolIps(record.enis, knobs, ciliumNode),
    abortReason: !inputs.releaseEnabled
      ? 'release-disabled'
      : multiPool
        ? 'multi-pool-node'
        : 'no-longer-excess',
    published: ciliumNode !== undefined,
    inputs,
  };
}

/** A recorded mark's next value (none: dropped), why it changed (none: unchanged), and whether rule (d) unassigns it now. */
interface JudgedMark {
  readonly next?: ExcessMark;
  readonly reason?: MarkChangeReason;
  readonly unassign?: true;
}

/** Rules (e), (a), (c), (b) and (d) for one recorded mark, the first that applies. */
function judgeMark(ip: string, mark: ExcessMark, view: ReleaseView): JudgedMark {
  if (mark.cause === 'excluded-eni') {
    const next = nextExclusionMark(ip, mark, view);
    return { ...(next.mark ? { next: next.mark } : {}), ...(next.reason ? { reason: next.reason } : {}) };
  }
  if (mark.state === 'released') {
    if (view.assigned.has(ip)) return { reason: 'reassigned' };
    return view.answers[ip] === undefined ? { reason: 'agent-acknowledged' } : { next: mark };
  }
  if (!view.excessIps.has(ip)) {
    return mark.state === 'ready-for-release' && !view.assigned.has(ip)
      ? { next: { ...mark, state: 'released' }, reason: 'gone-from-ec2' }
      : { reason: view.abortReason };
  }
  return judgeHandshake(ip, mark, view);
}

/** Rules (c), (b) and (d) for a mark whose IP is still excess. */
function judgeHandshake(ip: string, mark: ExcessMark, view: ReleaseView): JudgedMark {
  const answer = view.answers[ip];
  // A `do-not-release` state is never written by this planner (the answer drops the mark); a
  // record holding it is stale.
  if ((mark.state !== undefined && answer === 'do-not-release') || mark.state === 'do-not-release') {
    return { reason: 'agent-do-not-release' };
  }
  if (mark.state === 'marked-for-release' && answer === 'ready-for-release') {
    return { next: { ...mark, state: 'ready-for-release' }, reason: 'agent-ready' };
  }
  if (mark.state === undefined && delayElapsed(mark, view.inputs)) {
    return { next: { ...mark, state: 'marked-for-release' }, reason: 'release-delay-elapsed' };
  }
  const unassign =
    mark.state === 'ready-for-release' && !view.pool.has(ip) && !view.used.has(ip) && view.published;
  return unassign ? { next: mark, unassign: true } : { next: mark };
}

/** Marks for IPs without one: those of excluded ENIs, then the new excess (pending, or marked once the delay is zero). */
function newMarks(
  previous: Readonly<Record<string, ExcessMark>>,
  view: ReleaseView,
  inputs: ReleaseInputs,
): [string, ExcessMark, MarkChangeReason][] {
  const created: [string, ExcessMark, MarkChangeReason][] = [];
  for (const ip of view.leaving) {
    if (Object.hasOwn(previous, ip)) continue;
    created.push([
      ip,
      { sinceEpochMs: inputs.nowEpochMs, state: 'marked-for-release', cause: 'excluded-eni' },
      'excluded-eni',
    ]);
  }
  for (const ip of view.excessIps) {
    if (Object.hasOwn(previous, ip)) continue;
    const mark: ExcessMark = { sinceEpochMs: inputs.nowEpochMs };
    created.push([
      ip,
      delayElapsed(mark, inputs) ? { ...mark, state: 'marked-for-release' } : mark,
      'excess',
    ]);
  }
  return created;
}

/** The plan: unassign when rule (d) found addresses, else record the changed marks, else nothing (and why). */
function releasePlanOf(
  inputs: ReleaseInputs,
  view: ReleaseView,
  next: {
    readonly marks: Readonly<Record<string, ExcessMark>>;
    readonly changes: readonly MarkChange[];
    readonly unassignments: readonly Unassignment[];
  },
): ReleasePlan {
  const { excessIpCount } = view;
  if (next.unassignments.length > 0) return { kind: 'unassign', excessIpCount, ...next };
  if (next.changes.length > 0) {
    return { kind: 'update-marks', excessIpCount, marks: next.marks, changes: next.changes };
  }
  const reason: NoReleaseReason =
    Object.keys(inputs.record.excessMarks ?? {}).length > 0
      ? 'awaiting-handshake'
      : !inputs.releaseEnabled
        ? 'release-disabled'
        : view.multiPool
          ? 'multi-pool-node'
          : 'no-excess';
  return { kind: 'none', reason, excessIpCount };
}

/**
 * The marks to record once only some unassignments went through: every address of an
 * unassignment EC2 did not confirm keeps its previous mark (`ready-for-release`), so the next plan
 * tries again; everything else is as planned.
 */
export function marksAfterUnassign(
  plan: Extract<ReleasePlan, { kind: 'unassign' }>,
  previous: Readonly<Record<string, ExcessMark>>,
  confirmedEniIds: ReadonlySet<string>,
): Record<string, ExcessMark> {
  const marks: Record<string, ExcessMark> = { ...plan.marks };
  for (const unassignment of plan.unassignments) {
    if (confirmedEniIds.has(unassignment.eniId)) continue;
    for (const ip of unassignment.addresses) {
      const mark = previous[ip];
      if (mark !== undefined) marks[ip] = mark;
    }
  }
  return sortMarks(marks);
}

/**
 * The ENIs after the confirmed unassignments: their secondary IPs and prefixes without the released
 * ones, stamped `lastMutatedAtEpochMs` (a Describe lagging behind the release is not drift).
 */
export function enisAfterUnassign(
  enis: readonly EniState[],
  confirmed: readonly Unassignment[],
  nowEpochMs: number,
): EniState[] {
  return enis.map((eni) => {
    const released = confirmed.filter((unassignment) => unassignment.eniId === eni.id);
    if (released.length === 0) return eni;
    const ips = new Set(released.flatMap((unassignment) => unassignment.ips));
    const prefixes = new Set(released.flatMap((unassignment) => unassignment.prefixes));
    return {
      ...eni,
      secondaryIps: eni.secondaryIps.filter((ip) => !ips.has(ip)),
      prefixes: eni.prefixes.filter((prefix) => !prefixes.has(prefix)),
      lastMutatedAtEpochMs: nowEpochMs,
    };
  });
}

/**
 * Whether the CiliumNode belongs to a 1.20 multi-pool agent (`agentProtocolOf`). Such agents
 * ignore `release-ips` (the 1.20 operator writes it as nil for them), so no handshake is started.
 */
export function isMultiPoolNode(cn: CiliumNode | undefined): boolean {
  return agentProtocolOf(cn) === 'multi-pool';
}

/**
 * IPs of now-excluded ENIs that the CiliumNode's `spec.ipam.pool` still offers and the agent does
 * not use: they must leave the pool through the handshake (`excluded-eni` marks), not directly.
 */
export function excludedPoolIps(
  enis: readonly EniState[],
  knobs: Pick<NodeKnobs, 'firstInterfaceIndex' | 'excludeInterfaceTags' | 'usePrimaryAddress'>,
  cn: CiliumNode | undefined,
): Set<string> {
  const pool = cn?.spec?.ipam?.pool ?? {};
  const used = new Set(usedIps(cn));
  return new Set(
    enis
      .filter((eni) => isExcluded(eni, knobs))
      .flatMap((eni) => poolAddressesOfEni(eni, knobs.usePrimaryAddress))
      .filter((ip) => Object.hasOwn(pool, ip) && !used.has(ip)),
  );
}

interface ExclusionView {
  readonly used: ReadonlySet<string>;
  readonly answers: Readonly<Record<string, ReleaseStatus>>;
  readonly pool: ReadonlySet<string>;
  readonly leaving: ReadonlySet<string>;
  readonly multiPool: boolean;
}

/**
 * (g) The next state of an `excluded-eni` mark: the handshake as for excess IPs, except that the
 * end is `released` without any EC2 call (the ENI is excluded, never touched) and the mark is
 * dropped once the agent deleted the entry. A multi-pool node abandons the handshake at once.
 */
function nextExclusionMark(
  ip: string,
  mark: ExcessMark,
  view: ExclusionView,
): { mark?: ExcessMark; reason?: MarkChangeReason } {
  if (view.multiPool) return { reason: 'multi-pool-node' };
  if (mark.state === 'released') {
    return view.answers[ip] === undefined ? { reason: 'agent-acknowledged' } : { mark };
  }
  if (view.used.has(ip) || view.answers[ip] === 'do-not-release') return { reason: 'agent-do-not-release' };
  if (mark.state === 'marked-for-release' && view.answers[ip] === 'ready-for-release') {
    return { mark: { ...mark, state: 'ready-for-release' }, reason: 'agent-ready' };
  }
  if (mark.state === 'ready-for-release' && !view.pool.has(ip)) {
    return { mark: { ...mark, state: 'released' }, reason: 'left-pool' };
  }
  if (mark.state === 'marked-for-release' && !view.leaving.has(ip) && !view.pool.has(ip)) {
    return { reason: 'no-longer-excess' };
  }
  return { mark };
}

function excessSetOf(
  inputs: ReleaseInputs,
  used: ReadonlySet<string>,
  multiPool: boolean,
): { excessIpCount: number; excessIps: ReadonlySet<string> } {
  const { record, knobs } = inputs;
  const demand = computePoolDemand({
    limits: inputs.limits,
    enis: record.enis,
    knobs,
    usedIpCount: used.size,
    prefixDelegationEnabled: inputs.prefixDelegationEnabled,
  });
  if (!inputs.releaseEnabled || multiPool) return { excessIpCount: demand.excessIps, excessIps: new Set() };
  const selection = computeExcessIps({
    enis: record.enis,
    knobs,
    usedIps: used,
    excessIpCount: demand.excessIps,
  });
  return { excessIpCount: demand.excessIps, excessIps: new Set(selection?.ips ?? []) };
}

/** `status.ipam.release-ips`, or an empty map when the CiliumNode has none. */
function releaseAnswers(cn: CiliumNode | undefined): Readonly<Record<string, ReleaseStatus>> {
  const answers = cn?.status?.ipam?.['release-ips'];
  return typeof answers === 'object' && answers !== null ? answers : {};
}

/** Every address any ENI of the node holds (secondary IPs, prefix addresses, primaries). */
function addressesOnEnis(enis: readonly EniState[]): Set<string> {
  return new Set(enis.flatMap((eni) => poolAddressesOfEni(eni, true)));
}

function stageOf(mark: ExcessMark): MarkStage {
  return mark.state ?? 'pending';
}

function delayElapsed(mark: ExcessMark, inputs: ReleaseInputs): boolean {
  return inputs.nowEpochMs - mark.sinceEpochMs > inputs.releaseDelayMs;
}

/** Per non-excluded ENI (by id): its ready secondary IPs, and its prefixes whose 16 addresses are all ready. */
function groupUnassignments(
  enis: readonly EniState[],
  knobs: Pick<NodeKnobs, 'firstInterfaceIndex' | 'excludeInterfaceTags'>,
  ready: ReadonlySet<string>,
): Unassignment[] {
  if (ready.size === 0) return [];
  const unassignments: Unassignment[] = [];
  const candidates = enis
    .filter((eni) => !isExcluded(eni, knobs))
    .sort((left, right) => (left.id < right.id ? -1 : left.id > right.id ? 1 : 0));
  for (const eni of candidates) {
    const ips = sortIpv4(eni.secondaryIps.filter((ip) => ip !== eni.primaryIp && ready.has(ip)));
    const prefixes = eni.prefixes
      .filter((prefix) => expandCidr(prefix).every((address) => ready.has(address)))
      .sort((left, right) => compareIpv4(networkOf(left), networkOf(right)));
    if (ips.length === 0 && prefixes.length === 0) continue;
    unassignments.push({
      eniId: eni.id,
      ips,
      prefixes,
      addresses: sortIpv4([...ips, ...prefixes.flatMap((prefix) => expandCidr(prefix))]),
    });
  }
  return unassignments;
}

function networkOf(prefix: string): string {
  return prefix.split('/')[0] ?? '';
}

function sortMarks(marks: Readonly<Record<string, ExcessMark>>): Record<string, ExcessMark> {
  return Object.fromEntries(sortIpv4(Object.keys(marks)).map((ip) => [ip, marks[ip] as ExcessMark]));
}
