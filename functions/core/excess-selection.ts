import { compareStrings, isExcluded } from './eni-selection.ts';
import { ADDRESSES_PER_IPV4_PREFIX, compareIpv4, expandCidr, sortIpv4 } from './ip-math.ts';
import type { EniState, NodeKnobs } from './model.ts';

/**
 * The release side of the pool: which addresses are excess once the pool is above its watermarks
 * (cilium `PrepareIPRelease`), chosen ENI by ENI; the release handshake (release-plan.ts) marks
 * and releases them. Pure.
 */

/** Which addresses of one ENI leave the pool when `excessIps` are released. */
export interface ReleaseSelection {
  readonly eniId: string;
  readonly subnetId: string;
  /** Secondary IPs to unassign individually, numerically sorted. */
  readonly secondaryIps: readonly string[];
  /** Wholly unused /28 prefixes to unassign, numerically sorted. */
  readonly prefixes: readonly string[];
  /** Every address leaving the pool (secondary IPs and all addresses of the prefixes), sorted: what the handshake marks. */
  readonly ips: readonly string[];
}

export interface ExcessSelectionInputs {
  /** ENIs attached to the instance; excluded ones are skipped here. */
  readonly enis: readonly EniState[];
  readonly knobs: Pick<NodeKnobs, 'firstInterfaceIndex' | 'excludeInterfaceTags'>;
  /** `status.ipam.used`: addresses the agent has handed out. Never selected. */
  readonly usedIps: ReadonlySet<string>;
  /** How many addresses to release (`PoolDemand.excessIps`). */
  readonly excessIpCount: number;
}

/**
 * Which addresses are excess, on ONE ENI per round (cilium `PrepareIPRelease`):
 * - ENIs are visited sorted by id; excluded ENIs are skipped.
 * - An ENI with prefixes: while at least 16 addresses remain to release, each of its prefixes
 *   (numeric order) that contains no used address is taken whole; then free secondary IPs up to what
 *   remains. The first such ENI with anything to release is the selection.
 * - Otherwise, among ENIs without prefixes, the one with the most releasable secondary IPs
 *   (`min(free, excess)`, first by id on ties); its lowest free addresses are taken.
 * The ENI's primary address and every address in `usedIps` are never selected. Returns `undefined`
 * when `excessIpCount <= 0` or nothing is releasable.
 */
export function computeExcessIps(inputs: ExcessSelectionInputs): ReleaseSelection | undefined {
  if (inputs.excessIpCount <= 0) return undefined;
  const candidates = inputs.enis
    .filter((eni) => !isExcluded(eni, inputs.knobs))
    .sort((left, right) => compareStrings(left.id, right.id));

  for (const eni of candidates) {
    if (eni.prefixes.length === 0) continue;
    const selection = selectOnPrefixEni(eni, inputs.usedIps, inputs.excessIpCount);
    if (selection !== undefined) return selection;
  }

  let best: ReleaseSelection | undefined;
  for (const eni of candidates) {
    if (eni.prefixes.length > 0) continue;
    const secondaryIps = freeSecondaryIps(eni, inputs.usedIps).slice(0, inputs.excessIpCount);
    if (secondaryIps.length > (best?.secondaryIps.length ?? 0)) {
      best = releaseSelection(eni, secondaryIps, []);
    }
  }
  return best;
}

function selectOnPrefixEni(
  eni: EniState,
  usedIps: ReadonlySet<string>,
  excessIpCount: number,
): ReleaseSelection | undefined {
  let remaining = excessIpCount;
  const prefixes: string[] = [];
  for (const prefix of [...eni.prefixes].sort(comparePrefixes)) {
    if (remaining < ADDRESSES_PER_IPV4_PREFIX) break;
    if (expandCidr(prefix).some((address) => usedIps.has(address))) continue;
    prefixes.push(prefix);
    remaining -= ADDRESSES_PER_IPV4_PREFIX;
  }
  const secondaryIps = freeSecondaryIps(eni, usedIps).slice(0, remaining);
  if (prefixes.length === 0 && secondaryIps.length === 0) return undefined;
  return releaseSelection(eni, secondaryIps, prefixes);
}

/** Secondary IPs of the ENI that are neither used nor its primary, numerically sorted. */
function freeSecondaryIps(eni: EniState, usedIps: ReadonlySet<string>): string[] {
  return sortIpv4(eni.secondaryIps.filter((address) => address !== eni.primaryIp && !usedIps.has(address)));
}

function releaseSelection(eni: EniState, secondaryIps: string[], prefixes: string[]): ReleaseSelection {
  return {
    eniId: eni.id,
    subnetId: eni.subnetId,
    secondaryIps,
    prefixes,
    ips: sortIpv4([...secondaryIps, ...prefixes.flatMap((prefix) => expandCidr(prefix))]),
  };
}

function comparePrefixes(left: string, right: string): number {
  return compareIpv4(left.split('/')[0] ?? '', right.split('/')[0] ?? '');
}
