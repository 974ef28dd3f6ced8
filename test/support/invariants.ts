import { agentProtocolOf, allocatedCidrs } from '../../functions/core/agent-protocol.ts';
import type { CiliumEni, CiliumNode } from '../../functions/core/ciliumnode.ts';
import { cidrContains, isIpv4Address, parseCidr } from '../../functions/core/ip-math.ts';
import { isCanonicalIpv6Cidr } from '../../functions/core/ipv6-math.ts';
import { instanceIdOfCiliumNode } from '../../functions/core/knobs.ts';

/**
 * The invariants (functions/README.md, *Guarantees*) that can be judged from one CiliumNode version, as pure checks shared by
 * the sync's tests and the chaos runs (which apply them to every version a watcher could see).
 * An empty result means the version is fine.
 */

type InvariantName =
  | 'status-covers-spec'
  | 'eni-status-complete'
  | 'right-node'
  | 'allocated-cidr-withdrawn'
  | 'multi-pool-release-ips'
  | 'pool-removal-without-handshake';

export interface Violation {
  readonly invariant: InvariantName;
  readonly message: string;
  readonly ip?: string;
  readonly eniId?: string;
}

/**
 * Invariant 1, plus what 1.19 agents' `validateENIConfig` demands before accepting any update:
 * - every `spec.ipam.pool` IP whose `resource` is an ENI id has that ENI in `status.eni.enis`, and
 *   the ENI's `addresses` (or one of its `prefixes`) contain the IP;
 * - every ENI in `status.eni.enis` has a non-empty `vpc.primary-cidr` and no empty `vpc.cidrs` item.
 */
export function checkStatusCoversSpec(cn: CiliumNode): Violation[] {
  const enis: Record<string, CiliumEni> = cn.status?.eni?.enis ?? {};
  return [...poolIpsTheStatusLacks(cn, enis), ...enisWithIncompleteVpc(enis)];
}

/** Invariant 1's first half: pool IPs assigned to an ENI that `enis` lacks or whose ranges miss them. */
function poolIpsTheStatusLacks(cn: CiliumNode, enis: Record<string, CiliumEni>): Violation[] {
  const violations: Violation[] = [];
  for (const [ip, allocation] of Object.entries(cn.spec?.ipam?.pool ?? {})) {
    const eniId = allocation?.resource;
    if (eniId === undefined || !eniId.startsWith('eni-')) continue;
    const eni = enis[eniId];
    if (eni === undefined) {
      violations.push({
        invariant: 'status-covers-spec',
        ip,
        eniId,
        message: `pool IP ${ip} names ${eniId}, which status.eni.enis lacks (agent: "unable to find ENI ${eniId}")`,
      });
    } else if (!eniHoldsIp(eni, ip)) {
      violations.push({
        invariant: 'status-covers-spec',
        ip,
        eniId,
        message: `pool IP ${ip} names ${eniId}, whose addresses and prefixes do not contain it`,
      });
    }
  }
  return violations;
}

/** What 1.19 agents' `validateENIConfig` rejects: an ENI without `vpc.primary-cidr` or with an empty `vpc.cidrs` item. */
function enisWithIncompleteVpc(enis: Record<string, CiliumEni>): Violation[] {
  const violations: Violation[] = [];
  for (const [eniId, eni] of Object.entries(enis)) {
    if (!eni?.vpc?.['primary-cidr']) {
      violations.push({
        invariant: 'eni-status-complete',
        eniId,
        message: `ENI ${eniId} has no vpc.primary-cidr (1.19 agents ignore the whole update)`,
      });
    }
    if ((eni?.vpc?.cidrs ?? []).some((cidr) => cidr === '')) {
      violations.push({
        invariant: 'eni-status-complete',
        eniId,
        message: `ENI ${eniId} has an empty vpc.cidrs item (1.19 agents ignore the whole update)`,
      });
    }
  }
  return violations;
}

/** Invariant 6: the CiliumNode names no instance, or exactly `instanceId`. */
export function checkRightNode(cn: CiliumNode, instanceId: string): Violation[] {
  const owner = instanceIdOfCiliumNode(cn);
  if (owner === undefined || owner === instanceId) return [];
  return [
    {
      invariant: 'right-node',
      message: `CiliumNode ${cn.metadata.name} belongs to ${owner}, not ${instanceId}`,
    },
  ];
}

function eniHoldsIp(eni: CiliumEni, ip: string): boolean {
  if ((eni.addresses ?? []).includes(ip)) return true;
  return (eni.prefixes ?? []).some((prefix) => {
    try {
      return cidrContains(prefix, ip);
    } catch {
      return false;
    }
  });
}

const MAC_ADDRESS = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;

/**
 * Invariant 7's "complete at every version" (the agent's `FromResource` in https://github.com/cilium/cilium/blob/711821bf3b/pkg/ipam/eni.go),
 * what 1.20 agents
 * need of EVERY ENI entry, eth0 and excluded ones included: the key as `id`, a canonical primary
 * `ip`, a valid `mac`, a valid `subnet.cidr` and `vpc.primary-cidr`, every `vpc.cidrs` item valid,
 * every address and /80 canonical (a malformed one breaks Go decoding of the whole object).
 */
export function checkEniEntriesComplete(cn: CiliumNode): Violation[] {
  const violations: Violation[] = [];
  for (const [eniId, eni] of Object.entries(cn.status?.eni?.enis ?? {})) {
    const problems = [...identityProblems(eniId, eni), ...addressingProblems(eni)];
    if (problems.length > 0) {
      violations.push({
        invariant: 'eni-status-complete',
        eniId,
        message: `ENI ${eniId} is incomplete or malformed: ${problems.join(', ')}`,
      });
    }
  }
  return violations;
}

/** The fields that name an ENI entry (`id` equal to its key, primary `ip`, `mac`), each one a problem when wrong. */
function identityProblems(eniId: string, eni: CiliumEni | undefined): string[] {
  const problems: string[] = [];
  if (eni?.id !== eniId) problems.push(`id ${JSON.stringify(eni?.id)}`);
  if (!isIpv4Address(eni?.ip ?? '')) problems.push(`ip ${JSON.stringify(eni?.ip)}`);
  if (!MAC_ADDRESS.test(eni?.mac ?? '')) problems.push(`mac ${JSON.stringify(eni?.mac)}`);
  return problems;
}

/** The ranges and addresses of an ENI entry (subnet, VPC, addresses, /80s), each one a problem when malformed. */
function addressingProblems(eni: CiliumEni | undefined): string[] {
  const problems: string[] = [];
  if (!isIpv4Cidr(eni?.subnet?.cidr)) problems.push(`subnet.cidr ${JSON.stringify(eni?.subnet?.cidr)}`);
  if (!isIpv4Cidr(eni?.vpc?.['primary-cidr'])) problems.push('vpc.primary-cidr');
  if ((eni?.vpc?.cidrs ?? []).some((cidr) => !isIpv4Cidr(cidr))) problems.push('a vpc.cidrs item');
  const bad = (eni?.addresses ?? []).filter((address) => !isIpv4Address(address));
  if (bad.length > 0) problems.push(`addresses ${JSON.stringify(bad)}`);
  const badIpv6 = (eni?.['ipv6-prefixes'] ?? []).filter((prefix) => !isCanonicalIpv6Cidr(prefix));
  if (badIpv6.length > 0) problems.push(`ipv6-prefixes ${JSON.stringify(badIpv6)}`);
  return problems;
}

/**
 * Invariant 7 between two successive versions of one CiliumNode: every CIDR the agent listed in
 * `spec.ipam.pools.allocated` of `previous` that `previous` published in `status.eni.enis` is still
 * published in `next` (a 1.20 agent marks a withdrawn in-use CIDR "removed" for its whole life).
 * Only an authoritative loss in EC2 may withdraw one; callers exempt those with `goneFromEc2`.
 */
export function checkAllocatedNotWithdrawn(
  previous: CiliumNode,
  next: CiliumNode,
  goneFromEc2: (cidr: string) => boolean = () => false,
): Violation[] {
  const before = publishedCidrs(previous);
  const after = publishedCidrs(next);
  return [...allocatedCidrs(previous)]
    .filter((cidr) => before.has(cidr) && !after.has(cidr) && !goneFromEc2(cidr))
    .map((cidr) => ({
      invariant: 'allocated-cidr-withdrawn' as const,
      message: `CIDR ${cidr} is in spec.ipam.pools.allocated but was withdrawn from status.eni.enis`,
    }));
}

/** Multi-pool nodes take no part in the handshake: `status.ipam.release-ips` stays empty for them. */
export function checkMultiPoolReleaseIps(cn: CiliumNode): Violation[] {
  if (agentProtocolOf(cn) !== 'multi-pool') return [];
  const entries = Object.keys(cn.status?.ipam?.['release-ips'] ?? {});
  return entries.length === 0
    ? []
    : [
        {
          invariant: 'multi-pool-release-ips',
          message: `release-ips holds ${entries.join(', ')} on a multi-pool node`,
        },
      ];
}

/** Every CIDR a 1.20 agent derives from the status (any ENI): /28 prefixes, /80s, other addresses as /32. */
function publishedCidrs(cn: CiliumNode): Set<string> {
  const cidrs = new Set<string>();
  for (const eni of Object.values(cn.status?.eni?.enis ?? {})) {
    const prefixes = eni?.prefixes ?? [];
    for (const prefix of prefixes) cidrs.add(prefix);
    for (const prefix of eni?.['ipv6-prefixes'] ?? []) cidrs.add(prefix);
    for (const address of eni?.addresses ?? []) {
      if (!prefixes.some((prefix) => isIpv4Cidr(prefix) && cidrContains(prefix, address)))
        cidrs.add(`${address}/32`);
    }
  }
  return cidrs;
}

function isIpv4Cidr(text: string | undefined): boolean {
  if (text === undefined) return false;
  try {
    parseCidr(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * Invariant 5 on the way out, for CRD-protocol (1.19) nodes: an IP leaves `spec.ipam.pool` only
 * after the agent answered `ready-for-release` for it (or it reached `released`), so an agent
 * allocating at that moment never hands out an IP that is leaving. Exempt: multi-pool nodes (no
 * handshake), an IP that moved to another ENI, and IPs `goneFromEc2` says EC2 lost out of band.
 */
export function checkPoolRemovalsHandshaken(
  previous: CiliumNode,
  next: CiliumNode,
  goneFromEc2: (ip: string) => boolean = () => false,
): Violation[] {
  if (agentProtocolOf(previous) === 'multi-pool') return [];
  const nextPool = next.spec?.ipam?.pool ?? {};
  const answers = previous.status?.ipam?.['release-ips'] ?? {};
  return Object.keys(previous.spec?.ipam?.pool ?? {})
    .filter((ip) => nextPool[ip] === undefined && !goneFromEc2(ip))
    .filter((ip) => answers[ip] !== 'ready-for-release' && answers[ip] !== 'released')
    .map((ip) => ({
      invariant: 'pool-removal-without-handshake' as const,
      ip,
      message: `pool IP ${ip} left spec.ipam.pool without the release handshake (release-ips: ${answers[ip] ?? 'none'})`,
    }));
}
