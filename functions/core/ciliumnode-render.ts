import { withheldCidrs } from './cidr-release-plan.ts';
import type { AllocationMap, CiliumEni, ReleaseStatus } from './ciliumnode.ts';
import { isExcluded } from './eni-selection.ts';
import { compareIpv4, expandCidr, isIpv4Address, sortIpv4 } from './ip-math.ts';
import type { EniState, NodeRecord, VpcView } from './model.ts';

/**
 * What ONE node-record version says the CiliumNode should publish. Pure: the same record always
 * renders the same JSON (addresses and prefixes sorted), so "nothing changed" is a plain equality.
 *
 * The ENI JSON mirrors cilium-operator's (`parseENI` in https://github.com/cilium/cilium/blob/507103c61f/pkg/aws/ec2/ec2.go, `PopulateStatusFields`),
 * including its `omitempty` tags: `number` is absent for device index 0 and empty strings, lists
 * and maps are absent. Two deliberate differences from cilium-operator, both demanded by 1.19
 * agents' `validateENIConfig` (which otherwise ignores the whole update): `vpc.primary-cidr` is
 * always present (cilium publishes fresh ENIs without it) and `vpc.cidrs` never holds an empty item.
 */

/** The record's problems that make it unpublishable (an agent would reject the whole status). */
export function unpublishableRecordProblems(record: NodeRecord): string[] {
  const problems: string[] = [];
  if (record.nodeName.trim() === '') problems.push('the record names no CiliumNode (empty nodeName)');
  if (record.vpc.primaryCidr.trim() === '') {
    problems.push(`VPC ${record.vpc.id || '(unknown)'} has no primary CIDR; agents reject ENIs without one`);
  }
  return problems;
}

/**
 * Every address the ENI publishes in `addresses`: its secondary IPs, every IP of every delegated
 * prefix (cilium expands /28s into their 16 addresses), and its primary IP when the node uses
 * primary addresses. Sorted numerically, without duplicates.
 */
export function eniAddresses(eni: EniState, usePrimaryAddress: boolean): string[] {
  const addresses = new Set<string>(eni.secondaryIps);
  for (const prefix of eni.prefixes) {
    for (const address of expandCidr(prefix)) addresses.add(address);
  }
  if (usePrimaryAddress) addresses.add(eni.primaryIp);
  return sortIpv4(addresses);
}

/** The `status.eni.enis` entry for one ENI. */
function renderEni(eni: EniState, vpc: VpcView, usePrimaryAddress: boolean): CiliumEni {
  const rendered: CiliumEni = { id: eni.id, ip: eni.primaryIp, mac: eni.mac };
  if (eni.description !== '') rendered.description = eni.description;
  if (eni.deviceIndex !== 0) rendered.number = eni.deviceIndex;
  rendered.subnet = { id: eni.subnetId, cidr: eni.subnetCidr };
  const secondaryCidrs = vpc.secondaryCidrs.filter((cidr) => cidr.trim() !== '' && cidr !== vpc.primaryCidr);
  rendered.vpc = {
    id: vpc.id,
    'primary-cidr': vpc.primaryCidr,
    ...(secondaryCidrs.length > 0 ? { cidrs: [...secondaryCidrs] } : {}),
  };
  const addresses = eniAddresses(eni, usePrimaryAddress);
  if (addresses.length > 0) rendered.addresses = addresses;
  if (eni.prefixes.length > 0) rendered.prefixes = sortPrefixes(eni.prefixes);
  // Only on an ENI that holds a /80, as cilium's omitempty: an IPv4-only node renders exactly as
  // before IPv6 and validates unchanged against every CRD generation. A /80 exists only because a
  // 1.20+ agent asked for it, and such a cluster runs the CRD of cilium 1.20.0 or later, which
  // declares the field (older CRDs would prune it from the status the API server stores).
  const ipv6Prefixes = eni.ipv6Prefixes ?? [];
  if (ipv6Prefixes.length > 0) rendered['ipv6-prefixes'] = sortPrefixes(ipv6Prefixes);
  if (eni.securityGroupIds.length > 0) rendered['security-groups'] = [...eni.securityGroupIds];
  if (Object.keys(eni.tags).length > 0) rendered.tags = { ...eni.tags };
  return rendered;
}

/**
 * ENI id to cilium ENI JSON for EVERY ENI attached to the instance: eth0 and ENIs excluded by
 * `first-interface-index` or `exclude-interface-tags` included, as cilium-operator publishes them
 * (agents need eth0's and the excluded ENIs' entries for routing and exclusion decisions).
 */
export function desiredStatusEnis(
  record: NodeRecord,
  withheld: ReadonlySet<string> = withheldCidrs(record),
): Record<string, CiliumEni> {
  const enis: Record<string, CiliumEni> = {};
  for (const eni of record.enis) {
    enis[eni.id] = renderEni(eniWithout(eni, withheld), record.vpc, record.knobs.usePrimaryAddress);
  }
  return enis;
}

/**
 * The ENI without the withheld CIDRs (`/32`s and `/28`s on their way out of a multi-pool node,
 * `withheldCidrs`): they are still on EC2, but the agent must not derive them any more.
 */
function eniWithout(eni: EniState, withheld: ReadonlySet<string>): EniState {
  if (withheld.size === 0) return eni;
  return {
    ...eni,
    secondaryIps: eni.secondaryIps.filter((ip) => !withheld.has(`${ip}/32`)),
    prefixes: eni.prefixes.filter((prefix) => !withheld.has(prefix)),
  };
}

export interface PoolOptions {
  /** CIDRs on their way out of a multi-pool node (default: the record's `withheldCidrs`). */
  readonly withheld?: ReadonlySet<string>;
  /**
   * The IPs the CiliumNode's pool offers now. An excluded ENI's address the pool still offers stays
   * until the release handshake takes it out (`excluded-eni` marks), so a 1.19 agent allocating at
   * that moment never loses an IP it just handed out; nothing of an excluded ENI is ever added.
   */
  readonly currentPool?: Iterable<string>;
  /** A multi-pool (1.20) agent: no handshake, an excluded ENI's unused addresses leave at once. */
  readonly multiPool?: boolean;
}

/** Handshake states after which an IP must leave `spec.ipam.pool` before it leaves EC2. */
const LEAVING_POOL_STATES: ReadonlySet<ReleaseStatus> = new Set(['ready-for-release', 'released']);

/**
 * `spec.ipam.pool`: `{ip: {resource: eniId}}` for every published address of every NON-excluded
 * ENI, minus the IPs whose release handshake reached `ready-for-release` or `released` (those leave
 * the pool first, so the agent can finish the handshake and no pod gets an IP that is going away).
 * `marked-for-release` IPs stay: the agent answers only for IPs it still sees in the pool.
 *
 * `inUseIps` (the agent's `status.ipam.used`) keeps invariant 5 when an ENI becomes excluded while
 * its IPs are in use: the agent may register `first-interface-index` or `exclude-interface-tags`
 * after we published a pool planned with the stack defaults, and hand out pool IPs before the new
 * knobs reach us. An in-use address an excluded ENI still holds stays in the pool (with that ENI
 * in status, which lists every ENI) until the agent stops using it; no new address is added. An
 * unused one the pool still offers stays too, until the handshake has taken it out
 * (`PoolOptions.currentPool`): removing it directly would race an agent allocating right then.
 */
export function desiredPool(
  record: NodeRecord,
  inUseIps: Iterable<string> = [],
  options: PoolOptions = {},
): AllocationMap {
  const marks = record.excessMarks ?? {};
  const inUse = new Set(inUseIps);
  const offered = new Set(options.multiPool ? [] : (options.currentPool ?? []));
  const withheld = options.withheld ?? withheldCidrs(record);
  const pool: AllocationMap = {};
  for (const eni of record.enis) {
    const excluded = isExcluded(eni, record.knobs);
    for (const address of eniAddresses(eniWithout(eni, withheld), record.knobs.usePrimaryAddress)) {
      if (excluded && !inUse.has(address) && !offered.has(address)) continue;
      const state = marks[address]?.state;
      if (state !== undefined && LEAVING_POOL_STATES.has(state)) continue;
      pool[address] = { resource: eni.id };
    }
  }
  return pool;
}

/**
 * `status.ipam.operator-status.error`: the record's last error as `<code>: <message>`, or
 * `undefined` when the allocator's last attempt succeeded.
 */
export function desiredOperatorError(record: NodeRecord): string | undefined {
  if (record.lastError === undefined) return undefined;
  return `${record.lastError.code}: ${record.lastError.message}`;
}

/** CIDRs ordered by network address, then prefix length, without duplicates. */
export function sortPrefixes(prefixes: Iterable<string>): string[] {
  return [...new Set(prefixes)].sort(comparePrefixes);
}

/** Well-formed CIDRs numerically; anything else (never expected) after them, in text order. */
function comparePrefixes(left: string, right: string): number {
  const [leftAddress = '', leftLength = ''] = left.split('/');
  const [rightAddress = '', rightLength = ''] = right.split('/');
  const leftValid = isIpv4Address(leftAddress);
  const rightValid = isIpv4Address(rightAddress);
  if (leftValid && rightValid) {
    return compareIpv4(leftAddress, rightAddress) || Number(leftLength) - Number(rightLength);
  }
  if (leftValid !== rightValid) return leftValid ? -1 : 1;
  return left < right ? -1 : left > right ? 1 : 0;
}
