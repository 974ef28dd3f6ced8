import { agentDemandOf, agentProtocolOf, allocatedCidrs } from './agent-protocol.ts';
import type { CiliumNode } from './ciliumnode.ts';
import { isExcluded } from './eni-selection.ts';
import { cidrContains, compareIpv4, expandCidr } from './ip-math.ts';
import type { CidrRelease, EniState, NodeKnobs, NodeRecord } from './model.ts';
import { countAvailableIps } from './pool-math.ts';
import { appliedRecordVersion } from './table-generation.ts';

/**
 * Release for multi-pool (1.20) nodes, which take no part in the `release-ips` handshake: the
 * agent's release request is dropping a CIDR from `spec.ipam.pools.allocated`
 * (`trackMultiPoolAllocatedLocked` in https://github.com/cilium/cilium/blob/711821bf3b/operator/pkg/ipam/nodemanager/node.go;
 * functions/README.md, *Agent protocols*). Pure. Made durable (cilium keeps its marks in operator
 * memory) and stricter than cilium in one way: a CIDR is withdrawn from `status.eni.enis` BEFORE
 * it is unassigned in EC2, closing the race C6 where the agent reclaims a still-listed CIDR while
 * the operator unassigns it (so the release takes two steps):
 *
 *   record entry   sync publishes                                 next step
 *   pending        the CIDR (the delay runs)                      delay elapsed → withdrawing
 *   withdrawing    spec.ipam.pool, then status, without it —      status without it, still absent
 *                  but only from a CiliumNode version whose       from allocated, and the CiliumNode
 *                  `allocated` lacks it (the patch tests that     carries W, the record version that
 *                  version), so the agent cannot reclaim it       made it withdrawing, or a newer one
 *                                                                 of the same table → unassigned in
 *                                                                 EC2 (re-checked on a fresh read
 *                                                                 right before the call) → released
 *   released       nothing (a tombstone: a lagging Describe       dropped after `tombstoneMs`, or when
 *                  that still lists it is not believed)           we assign it again
 *
 * Why W: a sync that read a record older than W (one that still publishes the CIDR) may write
 * status after the withdrawal, even after the status of W; a CIDR assigned but not yet published
 * is absent from status and `allocated` all along, so "not in status" alone proves nothing. The
 * sync reads the CiliumNode before the record and every patch tests the resourceVersion it read,
 * so once the CiliumNode carries W no sync write can carry an older record version (invariant 2),
 * and every version from W on withholds the CIDR while its entry is withdrawing. Until then the
 * entry stays withdrawing (no EC2 call, no write) and a later pass tries again.
 *
 * Any entry whose CIDR is back in `allocated` is dropped (the agent took it again; the sync
 * re-publishes a withdrawn one). Only IPv4 CIDRs of non-excluded ENIs, whole /28 prefixes (never
 * their 16 addresses one by one, cilium #48125), never an ENI's primary IP. A CIDR is released
 * only while the pool stays at or above what the allocator would immediately re-allocate
 * (`max(requested, min-allocate)`), so release and allocation never churn against each other.
 */

export interface CidrReleaseInputs {
  readonly record: Pick<NodeRecord, 'version' | 'enis' | 'cidrReleases'>;
  /** The node's CiliumNode, already checked to belong to this instance. */
  readonly ciliumNode: CiliumNode | undefined;
  /**
   * The node table's generation (`table-generation.ts`): the CiliumNode's record version counts
   * only in it. Absent: versions are compared as they are.
   */
  readonly table?: string;
  readonly knobs: NodeKnobs;
  readonly releaseEnabled: boolean;
  readonly releaseDelayMs: number;
  /** How long a released CIDR is not believed when a Describe lists it (EC2 eventual consistency). */
  readonly tombstoneMs: number;
  readonly nowEpochMs: number;
}

type CidrReleaseChangeReason =
  | 'not-allocated'
  | 'delay-elapsed'
  | 'reallocated'
  | 'gone-from-ec2'
  | 'unassigned'
  | 'tombstone-expired'
  | 'not-multi-pool'
  | 'release-disabled';

interface CidrReleaseChange {
  readonly cidr: string;
  readonly to: CidrRelease['state'] | 'dropped';
  readonly reason: CidrReleaseChangeReason;
}

/** One UnassignPrivateIpAddresses target of one ENI. */
export interface CidrUnassignment {
  readonly eniId: string;
  readonly ips: readonly string[];
  readonly prefixes: readonly string[];
  /**
   * The record version the CiliumNode must carry (or a newer one of the same table) for the call:
   * the newest that made one of these CIDRs withdrawing (`withdrawnVersionOf`).
   */
  readonly withdrawnInVersion: number;
}

export type CidrReleasePlan =
  | { readonly kind: 'none' }
  | {
      readonly kind: 'update';
      readonly releases: Readonly<Record<string, CidrRelease>>;
      readonly changes: readonly CidrReleaseChange[];
      /** Empty when only the entries change. */
      readonly unassignments: readonly CidrUnassignment[];
    };

/** The node's releasable CIDRs: per non-excluded ENI, its /28s and its secondary IPs outside them as /32. */
export function releasableCidrs(
  enis: readonly EniState[],
  knobs: Pick<NodeKnobs, 'firstInterfaceIndex' | 'excludeInterfaceTags'>,
): Map<string, EniState> {
  const cidrs = new Map<string, EniState>();
  for (const eni of enis.filter((candidate) => !isExcluded(candidate, knobs))) {
    for (const prefix of eni.prefixes) cidrs.set(prefix, eni);
    for (const ip of eni.secondaryIps) {
      if (ip === eni.primaryIp || eni.prefixes.some((prefix) => cidrContains(prefix, ip))) continue;
      cidrs.set(`${ip}/32`, eni);
    }
  }
  return cidrs;
}

/** The next entries and unassignments; `none` when nothing changes. */
export function planCidrRelease(inputs: CidrReleaseInputs): CidrReleasePlan {
  const { record, ciliumNode, nowEpochMs } = inputs;
  const multiPool = agentProtocolOf(ciliumNode) === 'multi-pool';
  const view: ReleaseView = {
    inputs,
    multiPool,
    active: multiPool && inputs.releaseEnabled,
    attached: releasableCidrs(record.enis, inputs.knobs),
    allocated: allocatedCidrs(ciliumNode),
    published: publishedCidrsOf(ciliumNode),
    carried: ciliumNode === undefined ? undefined : appliedRecordVersion(ciliumNode, inputs.table),
  };
  const releases: Record<string, CidrRelease> = {};
  const changes: CidrReleaseChange[] = [];
  const unassign = new Map<string, Withdrawn>();
  for (const [cidr, entry] of Object.entries(record.cidrReleases ?? {})) {
    const step = advanceEntry(cidr, entry, view);
    if (step.entry !== undefined) releases[cidr] = step.entry;
    if (step.change !== undefined) changes.push(step.change);
    if (step.unassign !== undefined) unassign.set(cidr, step.unassign);
  }
  if (view.active) startReleases(view, releases, changes);

  const unassignments = groupByEni(unassign);
  for (const cidr of unassign.keys()) {
    const entry = releases[cidr] as CidrRelease;
    releases[cidr] = { ...entry, state: 'released', releasedAtEpochMs: nowEpochMs };
    changes.push({ cidr, to: 'released', reason: 'unassigned' });
  }
  if (changes.length === 0) return { kind: 'none' };
  return { kind: 'update', releases: sortEntries(releases), changes, unassignments };
}

/** What one plan sees: the observation, read once. */
interface ReleaseView {
  readonly inputs: CidrReleaseInputs;
  readonly multiPool: boolean;
  /** Multi-pool and release switched on: entries advance and new ones start. */
  readonly active: boolean;
  readonly attached: ReadonlyMap<string, EniState>;
  readonly allocated: ReadonlySet<string>;
  readonly published: ReadonlySet<string>;
  /** The record version the CiliumNode carries in the table (`appliedRecordVersion`). */
  readonly carried: number | undefined;
}

/** An existing entry's next state: kept or replaced (`entry`), dropped (no `entry`), and whether to unassign. */
interface EntryStep {
  readonly entry?: CidrRelease;
  readonly change?: CidrReleaseChange;
  readonly unassign?: Withdrawn;
}

function advanceEntry(cidr: string, entry: CidrRelease, view: ReleaseView): EntryStep {
  const { nowEpochMs, tombstoneMs } = view.inputs;
  if (entry.state === 'released') {
    const expired = nowEpochMs - (entry.releasedAtEpochMs ?? 0) >= tombstoneMs;
    return expired ? { change: { cidr, to: 'dropped', reason: 'tombstone-expired' } } : { entry };
  }
  const eni = view.attached.get(cidr);
  if (eni === undefined) {
    // EC2 no longer holds it (a release that crashed before it was recorded, or out of band).
    return {
      entry: { ...entry, state: 'released', releasedAtEpochMs: nowEpochMs },
      change: { cidr, to: 'released', reason: 'gone-from-ec2' },
    };
  }
  if (!view.active) {
    return {
      change: { cidr, to: 'dropped', reason: view.multiPool ? 'release-disabled' : 'not-multi-pool' },
    };
  }
  if (view.allocated.has(cidr)) return { change: { cidr, to: 'dropped', reason: 'reallocated' } };
  if (entry.state !== 'withdrawing' || view.published.has(cidr)) return { entry };
  // Out of status; unassigned only once the CiliumNode carries the withdrawal (W) too.
  const withdrawnInVersion = withdrawnVersionOf(entry, view.inputs.record.version);
  if (view.carried === undefined || view.carried < withdrawnInVersion) return { entry };
  return { entry, unassign: { eni, withdrawnInVersion } };
}

/** New entries for CIDRs out of `allocated`, and pending ones past the delay made withdrawing, within the headroom. */
function startReleases(
  view: ReleaseView,
  releases: Record<string, CidrRelease>,
  changes: CidrReleaseChange[],
): void {
  const { nowEpochMs, releaseDelayMs } = view.inputs;
  let headroom = releaseHeadroom(view.inputs);
  for (const [cidr, eni] of sortedCidrs(view.attached)) {
    if (view.allocated.has(cidr) || releases[cidr]?.state === 'released') continue;
    const entry = releases[cidr];
    if (entry === undefined) {
      releases[cidr] = { eniId: eni.id, state: 'pending', sinceEpochMs: nowEpochMs };
      changes.push({ cidr, to: 'pending', reason: 'not-allocated' });
      continue;
    }
    if (entry.state !== 'pending' || nowEpochMs - entry.sinceEpochMs < releaseDelayMs) continue;
    const size = cidrSize(cidr);
    if (headroom < size) continue;
    headroom -= size;
    releases[cidr] = { ...entry, state: 'withdrawing' };
    changes.push({ cidr, to: 'withdrawing', reason: 'delay-elapsed' });
  }
}

/**
 * The entries once only some unassignments went through: an ENI whose call failed keeps its
 * CIDRs `withdrawing` (the next plan tries again).
 */
export function releasesAfterUnassign(
  plan: Extract<CidrReleasePlan, { kind: 'update' }>,
  previous: Readonly<Record<string, CidrRelease>>,
  confirmedEniIds: ReadonlySet<string>,
): Record<string, CidrRelease> {
  const releases: Record<string, CidrRelease> = { ...plan.releases };
  for (const unassignment of plan.unassignments) {
    if (confirmedEniIds.has(unassignment.eniId)) continue;
    for (const cidr of [...unassignment.prefixes, ...unassignment.ips.map((ip) => `${ip}/32`)]) {
      const entry = previous[cidr];
      if (entry !== undefined) releases[cidr] = entry;
    }
  }
  return releases;
}

/**
 * Whether `unassignment` may still go to EC2 according to a CiliumNode read just before the call
 * (cilium re-checks its marks there): the node is still multi-pool, it carries the record version
 * that withdrew the CIDRs (or a newer one of `table`; an agent restart may have wiped the
 * annotation since the plan), and none of its CIDRs is in `allocated` or published in status.
 */
export function unassignmentStillWanted(
  unassignment: CidrUnassignment,
  cn: CiliumNode | undefined,
  table?: string,
): boolean {
  if (cn === undefined || agentProtocolOf(cn) !== 'multi-pool') return false;
  const carried = appliedRecordVersion(cn, table);
  if (carried === undefined || carried < unassignment.withdrawnInVersion) return false;
  const allocated = allocatedCidrs(cn);
  const published = publishedCidrsOf(cn);
  return cidrsOf(unassignment).every((cidr) => !allocated.has(cidr) && !published.has(cidr));
}

export function cidrsOf(unassignment: CidrUnassignment): string[] {
  return [...unassignment.prefixes, ...unassignment.ips.map((ip) => `${ip}/32`)];
}

/**
 * The record version W a `withdrawing` entry waits for on the CiliumNode: the one whose write made
 * it withdrawing. An entry an earlier release wrote without it asks for `recordVersion`, the
 * version read: the entry is withdrawing there, and in every later version while it stays so.
 */
function withdrawnVersionOf(entry: CidrRelease, recordVersion: number): number {
  return entry.withdrawnInVersion ?? recordVersion;
}

/**
 * The entries as the record write of `version` stores them: a `withdrawing` entry without its
 * `withdrawnInVersion` (the planner just moved it there, or an earlier release wrote it) gets
 * `version`. That version withholds the CIDR from the CiliumNode, as does every later one while
 * the entry stays withdrawing; for an entry of an earlier release it is later than needed, which
 * only makes the release wait for a newer CiliumNode.
 */
export function withWithdrawalVersions(
  releases: Readonly<Record<string, CidrRelease>>,
  version: number,
): Record<string, CidrRelease> {
  return Object.fromEntries(
    Object.entries(releases).map(([cidr, entry]) => [
      cidr,
      entry.state === 'withdrawing' && entry.withdrawnInVersion === undefined
        ? { ...entry, withdrawnInVersion: version }
        : entry,
    ]),
  );
}

/**
 * CIDRs the sync must not publish for this record: `withdrawing` ones (still on EC2, on their way
 * out). The sync keeps any of them the current CiliumNode's `allocated` lists.
 */
export function withheldCidrs(record: Pick<NodeRecord, 'cidrReleases'>): Set<string> {
  return new Set(
    Object.entries(record.cidrReleases ?? {})
      .filter(([, entry]) => entry.state === 'withdrawing')
      .map(([cidr]) => cidr),
  );
}

/** CIDRs tombstoned now: a Describe that still lists them is not believed (see `withoutTombstoned`). */
export function tombstonedCidrs(record: Pick<NodeRecord, 'cidrReleases'> | undefined): Set<string> {
  return new Set(
    Object.entries(record?.cidrReleases ?? {})
      .filter(([, entry]) => entry.state === 'released')
      .map(([cidr]) => cidr),
  );
}

/** The ENIs without the tombstoned CIDRs (EC2's Describe is eventually consistent after an unassign). */
export function withoutTombstoned<Eni extends Pick<EniState, 'secondaryIps' | 'prefixes'>>(
  enis: readonly Eni[],
  tombstoned: ReadonlySet<string>,
): Eni[] {
  if (tombstoned.size === 0) return [...enis];
  return enis.map((eni) => ({
    ...eni,
    secondaryIps: eni.secondaryIps.filter((ip) => !tombstoned.has(`${ip}/32`)),
    prefixes: eni.prefixes.filter((prefix) => !tombstoned.has(prefix)),
  }));
}

/** Addresses the pool may lose before the allocator would put them back: available - max(requested, min-allocate). */
function releaseHeadroom(inputs: CidrReleaseInputs): number {
  const available = countAvailableIps(inputs.record.enis, inputs.knobs);
  const requested = agentDemandOf(inputs.ciliumNode).requestedIpv4;
  return available - Math.max(requested, inputs.knobs.minAllocate);
}

function publishedCidrsOf(cn: CiliumNode | undefined): Set<string> {
  const cidrs = new Set<string>();
  for (const eni of Object.values(cn?.status?.eni?.enis ?? {})) {
    for (const prefix of eni?.prefixes ?? []) cidrs.add(prefix);
    for (const address of eni?.addresses ?? []) cidrs.add(`${address}/32`);
  }
  return cidrs;
}

function cidrSize(cidr: string): number {
  return cidr.endsWith('/32') ? 1 : expandCidr(cidr).length;
}

function sortedCidrs(cidrs: ReadonlyMap<string, EniState>): [string, EniState][] {
  return [...cidrs].sort(([left], [right]) =>
    compareIpv4(left.split('/')[0] ?? '', right.split('/')[0] ?? ''),
  );
}

/** A CIDR to unassign: its ENI and the record version that withdrew it. */
interface Withdrawn {
  readonly eni: EniState;
  readonly withdrawnInVersion: number;
}

function groupByEni(cidrs: ReadonlyMap<string, Withdrawn>): CidrUnassignment[] {
  const byEni = new Map<string, { ips: string[]; prefixes: string[]; withdrawnInVersion: number }>();
  for (const [cidr, { eni, withdrawnInVersion }] of cidrs) {
    const group = byEni.get(eni.id) ?? { ips: [], prefixes: [], withdrawnInVersion };
    if (cidr.endsWith('/32')) group.ips.push(cidr.slice(0, -3));
    else group.prefixes.push(cidr);
    group.withdrawnInVersion = Math.max(group.withdrawnInVersion, withdrawnInVersion);
    byEni.set(eni.id, group);
  }
  return [...byEni]
    .sort(([left], [right]) => (left < right ? -1 : 1))
    .map(([eniId, group]) => ({
      eniId,
      ips: group.ips.sort(compareIpv4),
      prefixes: group.prefixes.sort(),
      withdrawnInVersion: group.withdrawnInVersion,
    }));
}

function sortEntries(releases: Record<string, CidrRelease>): Record<string, CidrRelease> {
  return Object.fromEntries(
    Object.keys(releases)
      .sort((left, right) => compareIpv4(left.split('/')[0] ?? '', right.split('/')[0] ?? ''))
      .map((cidr) => [cidr, releases[cidr] as CidrRelease]),
  );
}

/**
 * How long a released CIDR stays tombstoned by default: five consistency windows, well past the
 * time EC2's Describe needs to stop listing an unassigned address.
 */
export function tombstoneDurationMs(consistencyGraceMs: number): number {
  return 5 * consistencyGraceMs;
}
