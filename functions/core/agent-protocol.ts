import type { CiliumNode } from './ciliumnode.ts';
import { isIpv4Address } from './ip-math.ts';
import { usedIps } from './knobs.ts';

/**
 * Which IPAM protocol a node's cilium agent speaks, and what it demands. Pure; decided afresh on
 * every observation of the CiliumNode, exactly as cilium-operator 1.20 does (`isMultiPoolNodeLocked`
 * and `recalculate` in https://github.com/cilium/cilium/blob/711821bf3b/operator/pkg/ipam/nodemanager/node.go;
 * functions/README.md, *Agent protocols*), so it flips both ways on upgrade and downgrade:
 * - `crd`: agents 1.12 to 1.19 (and 1.20 agents before their first write). Demand is
 *   `|status.ipam.used|`; releases go through the `release-ips` handshake.
 * - `multi-pool`: agents 1.20 and 1.21. `spec.ipam.pools.requested` has an entry for pool
 *   `default` AND `status.ipam.used` is empty. Demand comes from `requested`; the agent derives its
 *   CIDRs from `status.eni.enis` and releases by dropping CIDRs from `spec.ipam.pools.allocated`.
 */
export type AgentProtocol = 'crd' | 'multi-pool';

/** cilium's pool name for ENI mode (`ipamOption.PoolDefault`). */
const DEFAULT_POOL_NAME = 'default';

/** cilium `defaults.IPAMPreAllocation`, the agent's pre-allocation when `spec.ipam.pre-allocate` is 0. */
const AGENT_DEFAULT_PRE_ALLOCATE = 8;

/** cilium `poolRequestedIPs`: the `default` entry of `spec.ipam.pools.requested`. */
export interface PoolRequest {
  /** Whether `requested` has an entry for pool `default` at all. */
  readonly found: boolean;
  /** `needed.ipv4-addrs`, 0 when absent or malformed. */
  readonly ipv4Addresses: number;
  /** `needed.ipv6-addrs`, 0 when absent or malformed. */
  readonly ipv6Addresses: number;
}

export function poolRequest(cn: CiliumNode | undefined): PoolRequest {
  const requested = asRecord(asRecord(cn?.spec?.ipam).pools).requested;
  const entries = Array.isArray(requested) ? requested : [];
  const entry = entries.map(asRecord).find((candidate) => candidate.pool === DEFAULT_POOL_NAME);
  if (entry === undefined) return { found: false, ipv4Addresses: 0, ipv6Addresses: 0 };
  const needed = asRecord(entry.needed);
  return {
    found: true,
    ipv4Addresses: nonNegativeInteger(needed['ipv4-addrs']),
    ipv6Addresses: nonNegativeInteger(needed['ipv6-addrs']),
  };
}

/** cilium `isMultiPoolNodeLocked`: a `default` request and an empty `status.ipam.used`. */
export function agentProtocolOf(cn: CiliumNode | undefined): AgentProtocol {
  return poolRequest(cn).found && usedIps(cn).length === 0 ? 'multi-pool' : 'crd';
}

/**
 * The pre-allocation the agent adds to its request (cilium `getPreAllocate`): the CiliumNode's
 * `spec.ipam.pre-allocate` when positive, else 8. Not the allocator's resolved watermark: the
 * agent never sees the stack default, so `used` must be computed with the agent's own value.
 */
function agentPreAllocate(cn: CiliumNode | undefined): number {
  const value = asRecord(cn?.spec?.ipam)['pre-allocate'];
  return typeof value === 'number' && Number.isInteger(value) && value > 0
    ? value
    : AGENT_DEFAULT_PRE_ALLOCATE;
}

/** What the agent demands, in the allocator's terms. */
export interface AgentDemand {
  readonly protocol: AgentProtocol;
  /**
   * The IPv4 addresses the agent uses, as the watermark formula wants them: `|status.ipam.used|`
   * for `crd`; `max(0, requested.ipv4-addrs - P)` for `multi-pool` (P = `agentPreAllocate`), since
   * the agent requests `inUse + pending + P`.
   */
  readonly usedIpCount: number;
  /** `requested.ipv4-addrs` (0 for `crd` nodes). */
  readonly requestedIpv4: number;
  /** Whether the agent asks for IPv6 (`requested.ipv6-addrs > 0` on a multi-pool node). */
  readonly wantsIpv6: boolean;
}

/** The node's demand, pure function of the CiliumNode (shared by allocation, the sweep and watchers). */
export function agentDemandOf(cn: CiliumNode | undefined): AgentDemand {
  const protocol = agentProtocolOf(cn);
  if (protocol === 'crd') {
    return { protocol, usedIpCount: usedIps(cn).length, requestedIpv4: 0, wantsIpv6: false };
  }
  const request = poolRequest(cn);
  return {
    protocol,
    usedIpCount: Math.max(0, request.ipv4Addresses - agentPreAllocate(cn)),
    requestedIpv4: request.ipv4Addresses,
    wantsIpv6: request.ipv6Addresses > 0,
  };
}

/**
 * The CIDRs the agent lists in `spec.ipam.pools.allocated` (every pool, every family), in
 * canonical text. A 1.20 agent lists every CIDR it holds an IP of; any CIDR listed here must stay
 * in `status.eni.enis` (a withdrawn in-use CIDR is "removed" for the life of the agent process).
 */
export function allocatedCidrs(cn: CiliumNode | undefined): Set<string> {
  const allocated = asRecord(asRecord(cn?.spec?.ipam).pools).allocated;
  const cidrs = new Set<string>();
  for (const entry of Array.isArray(allocated) ? allocated : []) {
    const list = asRecord(entry).cidrs;
    for (const cidr of Array.isArray(list) ? list : []) {
      if (typeof cidr === 'string') cidrs.add(canonicalCidr(cidr));
    }
  }
  return cidrs;
}

/** A CIDR's IPv4 text as we render it (`10.0.0.5` stays, `10.0.0.5/32` stays); others unchanged. */
function canonicalCidr(cidr: string): string {
  const [address = '', length] = cidr.split('/');
  return isIpv4Address(address) && length === undefined ? `${address}/32` : cidr;
}

function asRecord(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

function nonNegativeInteger(value: unknown): number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : 0;
}
