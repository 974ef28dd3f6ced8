import type { CiliumEni, CiliumNode } from './ciliumnode.ts';
import { cidrContains } from './ip-math.ts';
import { instanceIdOfCiliumNode } from './knobs.ts';

/**
 * The DESIGN.md invariants that can be judged from one CiliumNode version, as pure checks shared by
 * the sync's tests and the chaos runs (which apply them to every version a watcher could see).
 * An empty result means the version is fine.
 */

export type InvariantName = 'status-covers-spec' | 'eni-status-complete' | 'right-node';

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
  const violations: Violation[] = [];
  const enis: Record<string, CiliumEni> = cn.status?.eni?.enis ?? {};
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
