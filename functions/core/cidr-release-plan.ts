import { agentDemandOf, agentProtocolOf, allocatedCidrs } from './agent-protocol.ts';
import type { CiliumNode } from './ciliumnode.ts';
import { isExcluded } from './eni-selection.ts';
import { cidrContains, compareIpv4, expandCidr } from './ip-math.ts';
import type { CidrRelease, EniState, NodeKnobs, NodeRecord } from './model.ts';
import { countAvailableIps } from './pool-math.ts';

/**
 * Release for multi-pool (1.20) nodes, which take no part in the `release-ips` handshake: the
 * agent's release request is dropping a CIDR from `spec.ipam.pools.allocated` (reference
 * cilium-multipool.md §1.5, obligation 8). Pure. Made durable (cilium keeps its marks in operator
 * memory) and stricter than cilium in one way: a CIDR is withdrawn from `status.eni.enis` BEFORE
 * it is unassigned in EC2, closing the race C6 where the agent reclaims a still-listed CIDR while
 * the operator unassigns it (the reference's recommended two-step release):
 *
 *   record entry   sync publishes                                 next step
 *   pending        the CIDR (the delay runs)                      delay elapsed → withdrawing
 *   withdrawing    spec.ipam.pool, then status, without it —      status without it and still absent
 *                  but only from a CiliumNode version whose       from allocated → unassigned in EC2
 *                  `allocated` lacks it (the patch tests that     (re-checked on a fresh read right
 *                  version), so the agent cannot reclaim it       before the call) → released
 *   released       nothing (a tombstone: a lagging Describe       dropped after `tombstoneMs`, or when
 *                  that still lists it is not believed)           we assign it again
 *
 * Any entry whose CIDR is back in `allocated` is dropped (the agent took it again; the sync
 * re-publishes a withdrawn one). Only IPv4 CIDRs of non-excluded ENIs, whole /28 prefixes (never
 * their 16 addresses one by one, cilium #48125), never an ENI's primary IP. A CIDR is released
 * only while the pool stays at or above what the allocator would immediately re-allocate
 * (`max(requested, min-allocate)`), so release and allocation never churn against each other.
 */

export interface CidrReleaseInputs {
  readonly record: Pick<NodeRecord, 'enis' | 'cidrReleases'>;
  /** The node's CiliumNode, already checked to belong to this instance. */
  readonly ciliumNode: CiliumNode | undefined;
  readonly knobs: NodeKnobs;
  readonly releaseEnabled: boolean;
  readonly releaseDelayMs: number;
  /** How long a released CIDR is not believed when a Describe lists it (EC2 eventual consistency). */
  readonly tombstoneMs: number;
  readonly nowEpochMs: number;
}

export type CidrReleaseChangeReason =
  | 'not-allocated'
  | 'delay-elapsed'
  | 'reallocated'
  | 'gone-from-ec2'
  | 'unassigned'
  | 'tombstone-expired'
  | 'not-multi-pool'
  | 'release-disabled';

export interface CidrReleaseChange {
  readonly cidr: string;
  readonly to: CidrRelease['state'] | 'dropped';
  readonly reason: CidrReleaseChangeReason;
}

/** One UnassignPrivateIpAddresses target of one ENI. */
export interface CidrUnassignment {
  readonly eniId: string;
  readonly ips: readonly string[];
  readonly prefixes: readonly string[];
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
  const previous = record.cidrReleases ?? {};
  const multiPool = agentProtocolOf(ciliumNode) === 'multi-pool';
  const active = multiPool && inputs.releaseEnabled;
  const attached = releasableCidrs(record.enis, inputs.knobs);
  const allocated = allocatedCidrs(ciliumNode);
  const published = publishedCidrsOf(ciliumNode);
  const releases: Record<string, CidrRelease> = {};
  const changes: CidrReleaseChange[] = [];
  const unassign = new Map<string, EniState>();
  const drop = (cidr: string, reason: CidrReleaseChangeReason) =>
    changes.push({ cidr, to: 'dropped', reason });

  for (const [cidr, entry] of Object.entries(previous)) {
    if (entry.state === 'released') {
      if (nowEpochMs - (entry.releasedAtEpochMs ?? 0) >= inputs.tombstoneMs) drop(cidr, 'tombstone-expired');
      else releases[cidr] = entry;
      continue;
    }
    const eni = attached.get(cidr);
    if (eni === undefined) {
      // EC2 no longer holds it (a release that crashed before it was recorded, or out of band).
      releases[cidr] = { ...entry, state: 'released', releasedAtEpochMs: nowEpochMs };
      changes.push({ cidr, to: 'released', reason: 'gone-from-ec2' });
    } else if (!active) drop(cidr, multiPool ? 'release-disabled' : 'not-multi-pool');
    else if (allocated.has(cidr)) drop(cidr, 'reallocated');
    else if (entry.state === 'withdrawing' && !published.has(cidr)) {
      releases[cidr] = entry;
      unassign.set(cidr, eni);
    } else releases[cidr] = entry;
  }

  if (active) {
    let headroom = releaseHeadroom(inputs);
    for (const [cidr, eni] of sortedCidrs(attached)) {
      if (allocated.has(cidr) || releases[cidr]?.state === 'released') continue;
      const entry = releases[cidr];
      if (entry === undefined) {
        releases[cidr] = { eniId: eni.id, state: 'pending', sinceEpochMs: nowEpochMs };
        changes.push({ cidr, to: 'pending', reason: 'not-allocated' });
        continue;
      }
      if (entry.state !== 'pending' || nowEpochMs - entry.sinceEpochMs < inputs.releaseDelayMs) continue;
      const size = cidrSize(cidr);
      if (headroom < size) continue;
      headroom -= size;
      releases[cidr] = { ...entry, state: 'withdrawing' };
      changes.push({ cidr, to: 'withdrawing', reason: 'delay-elapsed' });
    }
  }

  const unassignments = groupByEni(unassign);
  for (const cidr of unassign.keys()) {
    const entry = releases[cidr] as CidrRelease;
    releases[cidr] = { ...entry, state: 'released', releasedAtEpochMs: nowEpochMs };
    changes.push({ cidr, to: 'released', reason: 'unassigned' });
  }
  if (changes.length === 0) return { kind: 'none' };
  return { kind: 'update', releases: sortEntries(releases), changes, unassignments };
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
 * (cilium re-checks its marks there): the node is still multi-pool, and none of its CIDRs is in
 * `allocated` or published in status.
 */
export function unassignmentStillWanted(unassignment: CidrUnassignment, cn: CiliumNode | undefined): boolean {
  if (agentProtocolOf(cn) !== 'multi-pool') return false;
  const allocated = allocatedCidrs(cn);
  const published = publishedCidrsOf(cn);
  return cidrsOf(unassignment).every((cidr) => !allocated.has(cidr) && !published.has(cidr));
}

export function cidrsOf(unassignment: CidrUnassignment): string[] {
  return [...unassignment.prefixes, ...unassignment.ips.map((ip) => `${ip}/32`)];
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

function groupByEni(cidrs: ReadonlyMap<string, EniState>): CidrUnassignment[] {
  const byEni = new Map<string, { ips: string[]; prefixes: string[] }>();
  for (const [cidr, eni] of cidrs) {
    const group = byEni.get(eni.id) ?? { ips: [], prefixes: [] };
    if (cidr.endsWith('/32')) group.ips.push(cidr.slice(0, -3));
    else group.prefixes.push(cidr);
    byEni.set(eni.id, group);
  }
  return [...byEni]
    .sort(([left], [right]) => (left < right ? -1 : 1))
    .map(([eniId, group]) => ({ eniId, ips: group.ips.sort(compareIpv4), prefixes: group.prefixes.sort() }));
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
