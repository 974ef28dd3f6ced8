import type { CiliumNode } from '../../functions/core/ciliumnode.ts';

/**
 * A model of the cilium agent's CRD-backed ENI allocator (agents 1.12 to 1.19, cilium
 * `pkg/ipam/crd.go`, reference §4.2), to prove the CiliumNodes we write are ones a real agent
 * accepts and allocates from:
 * - every update is first checked the way `validateENIConfig` does: each ENI in status needs a
 *   non-empty `vpc.primary-cidr` and no empty `vpc.cidrs` items, and each pool IP's `resource` must
 *   be an ENI in status whose `addresses` contain the IP; otherwise the agent ignores the update
 *   ("ENI state is not consistent yet");
 * - then every pool IP not owned, not in the release handshake, is allocated the way
 *   `buildAllocationResult` does: the ENI `status.eni.enis[resource]` must exist (else the fatal
 *   `unable to find ENI <resource>`), its `mac`, `number`, `subnet.cidr` (gateway) and VPC CIDRs
 *   give the interface, routes and masquerade ranges.
 * The model never hides a rejection: callers assert that none happened.
 */

export interface AgentAllocation {
  readonly ip: string;
  readonly eniId: string;
  readonly mac: string;
  readonly interfaceNumber: number;
  readonly gateway: string | undefined;
  readonly cidrs: readonly string[];
}

export type AgentObservation =
  | { readonly accepted: true; readonly allocations: readonly AgentAllocation[] }
  | { readonly accepted: false; readonly reason: string };

const IN_HANDSHAKE = new Set(['marked-for-release', 'ready-for-release', 'released']);

export function observeAsAgent(node: CiliumNode): AgentObservation {
  const enis = node.status?.eni?.enis ?? {};
  for (const [id, eni] of Object.entries(enis)) {
    if (!eni.vpc?.['primary-cidr']) {
      return {
        accepted: false,
        reason: `ENI ${id} has no VPC primary CIDR: ENI state is not consistent yet`,
      };
    }
    if ((eni.vpc.cidrs ?? []).some((cidr) => cidr === '')) {
      return { accepted: false, reason: `ENI ${id} has an empty VPC CIDR: ENI state is not consistent yet` };
    }
  }
  const pool = node.spec?.ipam?.pool ?? {};
  const releasing = node.status?.ipam?.['release-ips'] ?? {};
  const allocations: AgentAllocation[] = [];
  for (const [ip, entry] of Object.entries(pool)) {
    const resource = entry.resource ?? '';
    const eni = enis[resource];
    if (!eni || eni.id !== resource) {
      return {
        accepted: false,
        reason: `failed to associate IP ${ip} inside CiliumNode: unable to find ENI ${resource}`,
      };
    }
    if (!(eni.addresses ?? []).includes(ip)) {
      return {
        accepted: false,
        reason: `ENI ${resource} does not list pool IP ${ip}: ENI state is not consistent yet`,
      };
    }
    if (entry.owner || IN_HANDSHAKE.has(releasing[ip] ?? '')) continue;
    allocations.push({
      ip,
      eniId: resource,
      mac: eni.mac ?? '',
      interfaceNumber: eni.number ?? 0,
      gateway: eni.subnet?.cidr ? firstHostAfterNetwork(eni.subnet.cidr) : undefined,
      cidrs: [eni.vpc?.['primary-cidr'] ?? '', ...(eni.vpc?.cidrs ?? [])],
    });
  }
  return { accepted: true, allocations };
}

/** The subnet's gateway as cilium derives it: the network address plus one. */
function firstHostAfterNetwork(cidr: string): string {
  const [address] = cidr.split('/');
  const octets = (address ?? '').split('.').map(Number);
  const value =
    ((octets[0] ?? 0) << 24) + ((octets[1] ?? 0) << 16) + ((octets[2] ?? 0) << 8) + (octets[3] ?? 0) + 1;
  return [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255].join('.');
}
