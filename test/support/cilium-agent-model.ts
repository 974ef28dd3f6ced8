import type { CiliumNode, JsonPatchOperation } from '../../functions/core/ciliumnode.ts';

/**
 * A model of the cilium agent's CRD-backed ENI allocator (agents 1.12 to 1.19, cilium
 * https://github.com/cilium/cilium/blob/507103c61f/pkg/ipam/crd.go), to prove the CiliumNodes we write are ones a real agent
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

interface AgentAllocation {
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

/** The CiliumNode calls a `CrdAgentDriver` makes (the harness's client-node adapter fits). */
export interface CrdAgentApi {
  get(name: string): Promise<CiliumNode | undefined>;
  patchStatus(name: string, operations: readonly JsonPatchOperation[]): Promise<CiliumNode>;
}

/**
 * The 1.19 agent's side of the CRD protocol (cilium `pkg/ipam/crd.go`; the handshake in
 * functions/README.md, *Agent protocols*): it hands out pool IPs not in the handshake (lowest first),
 * reports them in `status.ipam.used`, and on each refresh answers every `marked-for-release` entry
 * (`ready-for-release` when in the pool and unused, else `do-not-release`) and deletes a
 * `released` entry once the IP is out of the pool. Status writes are guarded by resourceVersion.
 */
export class CrdAgentDriver {
  private readonly inUse = new Map<string, string>();
  /** resourceVersions this agent wrote. */
  readonly writtenVersions = new Set<string>();

  constructor(
    private readonly api: CrdAgentApi,
    private readonly nodeName: string,
  ) {}

  /** Adopts IPs a previous agent on the node handed out (endpoint restore after a downgrade). */
  restore(owners: ReadonlyMap<string, string>): void {
    for (const [owner, ip] of owners) this.inUse.set(ip, owner);
  }

  usedIps(): string[] {
    return [...this.inUse.keys()];
  }

  /** Hands `owner` a free pool IP, or `undefined` when the pool has none (the agent would wait). */
  async allocate(owner: string): Promise<string | undefined> {
    const node = await this.read();
    const handshake = node.status?.ipam?.['release-ips'] ?? {};
    const free = Object.keys(node.spec?.ipam?.pool ?? {})
      .filter((ip) => !this.inUse.has(ip) && !IN_HANDSHAKE.has(handshake[ip] ?? ''))
      .sort(compareDotted);
    const ip = free[0];
    if (ip !== undefined) this.inUse.set(ip, owner);
    return ip;
  }

  free(owner: string): void {
    for (const [ip, holder] of this.inUse) if (holder === owner) this.inUse.delete(ip);
  }

  /** One status refresh: `used` and the handshake answers, in one /status write. */
  async refresh(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const node = await this.read();
      const pool = node.spec?.ipam?.pool ?? {};
      const answers: Record<string, string> = { ...(node.status?.ipam?.['release-ips'] ?? {}) };
      for (const [ip, state] of Object.entries(answers)) {
        const inPool = Object.hasOwn(pool, ip);
        if (state === 'released' && !inPool) delete answers[ip];
        if (state !== 'marked-for-release') continue;
        answers[ip] = inPool && !this.inUse.has(ip) ? 'ready-for-release' : 'do-not-release';
      }
      const used = Object.fromEntries(
        [...this.inUse].map(([ip, owner]) => [ip, { owner, resource: pool[ip]?.resource }]),
      );
      const ipam = { ...(node.status?.ipam ?? {}), used, 'release-ips': answers };
      try {
        const written = await this.api.patchStatus(this.nodeName, [
          { op: 'test', path: '/metadata/resourceVersion', value: node.metadata.resourceVersion },
          node.status === undefined
            ? { op: 'add', path: '/status', value: { ipam } }
            : { op: 'add', path: '/status/ipam', value: ipam },
        ]);
        if (written.metadata.resourceVersion) this.writtenVersions.add(written.metadata.resourceVersion);
        return;
      } catch (error) {
        if (!(error instanceof Error && error.name === 'ResourceVersionConflictError') || attempt >= 5)
          throw error;
      }
    }
  }

  private async read(): Promise<CiliumNode> {
    const node = await this.api.get(this.nodeName);
    if (!node) throw new Error(`CiliumNode ${this.nodeName} does not exist`);
    return node;
  }
}

function compareDotted(left: string, right: string): number {
  const value = (ip: string) => ip.split('.').reduce((total, octet) => total * 256 + Number(octet), 0);
  return value(left) - value(right);
}
