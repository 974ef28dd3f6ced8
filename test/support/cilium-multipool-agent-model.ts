import type { CiliumEni, CiliumNode, JsonPatchOperation } from '../../functions/core/ciliumnode.ts';
import { cidrContains, expandCidr, isIpv4Address, parseCidr } from '../../functions/core/ip-math.ts';
import {
  ipv6AddressAt,
  ipv6CidrContains,
  isIpv6Address,
  parseIpv6Cidr,
} from '../../functions/core/ipv6-math.ts';

/**
 * A model of the cilium 1.20 agent in ENI mode: the multi-pool allocator over the ENI pool
 * accessor (https://github.com/cilium/cilium/blob/711821bf3b/pkg/ipam/eni.go, https://github.com/cilium/cilium/blob/711821bf3b/pkg/ipam/multipool_manager.go,
 * https://github.com/cilium/cilium/blob/711821bf3b/pkg/ipam/pool.go), to prove that what we publish is what a real 1.20
 * agent can start from and allocate from, and to drive demand the way it does. Pure state machine;
 * `MultiPoolAgentDriver` (below) connects it to a CiliumNode store.
 *
 * Modelled, each after the cilium function named:
 * - CIDR derivation from `status.eni.enis` (eni.go `FromResource`): excluded ENIs skipped (`first-interface-index`,
 *   `exclude-interface-tags`), `prefixes` and `ipv6-prefixes` as they are, every address outside
 *   the ENI's prefixes as a /32; an empty ENI map falls back to the agent's own `allocated`;
 * - pool updates (pool.go `updatePool`): unlisted CIDRs without used IPs dropped, unlisted CIDRs
 *   with used IPs kept and marked `removed` for the life of the process (a problem: I3 broken),
 *   `released` CIDRs remembered while listed, reclaimed when the free count falls short;
 * - allocation in list order, failing exactly where the agent fails: "pool not (yet) available"
 *   without any CIDR, "all CIDR ranges are exhausted", "unable to find ENI for IP" when the ENI of
 *   the chosen IP is missing from the last status; failed owners stay pending for 5 minutes;
 * - demand `requested = inUse + pending + P` (P = last positive `spec.ipam.pre-allocate`, else 8),
 *   linear release of free CIDRs from the last one while `totalFree - free(c) >= pending + P`,
 *   `allocated` sorted (shorter prefixes first), `status.ipam.used` cleared on every pass;
 * - the startup waits (multipool_manager.go `newMultiPoolManager`, `waitForAllPools`): an allocatable IPv4 (and IPv6 when enabled), the first successful
 *   write, then a fatal after 5 minutes without a valid `vpc.primary-cidr` on any ENI;
 * - IPv6 (`options.ipv6`, cilium 1.20's "ENI IPAM mode with IPv6", https://github.com/cilium/cilium/blob/711821bf3b/Documentation/network/concepts/ipam/eni.rst): a pod (owner) holds one
 *   address per family; `requested` carries `ipv6-addrs = inUse6 + pending6 + P`; the /80s of
 *   `ipv6-prefixes` are the IPv6 pool, of which the agent uses the first 65 536 addresses, and are
 *   never released.
 */

export type Family = 'ipv4' | 'ipv6';

const DEFAULT_PRE_ALLOCATE = 8;
const PENDING_TTL_MS = 5 * 60_000;
const NATIVE_ROUTING_FATAL_AFTER_MS = 5 * 60_000;

interface CidrPool {
  readonly cidr: string;
  readonly used: Set<string>;
  removed: boolean;
}

export type AgentStartup = 'waiting-for-pool' | 'waiting-for-first-write' | 'waiting-for-vpc-cidr' | 'ready';

export class MultiPoolAgentModel {
  /** Allocators in the order of the last status-derived list. */
  private pools: CidrPool[] = [];
  private readonly released = new Set<string>();
  /** `ownerKey(owner, family)` to the IP the owner holds in that family. */
  private readonly owners = new Map<string, string>();
  /** `ownerKey(owner, family)` to when the failed allocation stops counting as pending. */
  private readonly pending = new Map<string, number>();
  private preAllocate = DEFAULT_PRE_ALLOCATE;
  private lastStatusEnis: Record<string, CiliumEni> = {};
  private wroteOnce = false;
  private firstWriteAtMs: number | undefined;
  private fatal: string | undefined;
  /** Everything a real agent would log as broken (in-use CIDR removed, undecodable object, ...). */
  readonly problems: string[] = [];

  constructor(readonly options: { readonly ipv6?: boolean } = {}) {}

  /** One CiliumNode event: re-derive the CIDRs (cilium `FromResource` then `updatePool`). */
  observe(cn: CiliumNode): void {
    const ipam = cn.spec?.ipam ?? {};
    const pre = ipam['pre-allocate'];
    if (typeof pre === 'number' && pre > 0) this.preAllocate = pre;
    const enis = cn.status?.eni?.enis ?? {};
    this.checkDecodable(enis);
    this.lastStatusEnis = enis;
    const listed = Object.keys(enis).length === 0 ? this.ownAllocated(cn) : derivedCidrs(cn);
    this.updatePools(listed);
  }

  /** Allocates an IP of `family` for `owner` (a pod), or returns the agent's error text. */
  allocate(owner: string, family: Family, nowMs: number): { ip: string } | { error: string } {
    const key = ownerKey(owner, family);
    const candidates = this.pools.filter((pool) => isFamily(pool.cidr, family));
    if (candidates.length === 0)
      return this.fail(
        key,
        nowMs,
        `unable to allocate from pool "default" (family ${family}): pool not (yet) available`,
      );
    for (const pool of candidates) {
      if (pool.removed) continue;
      const ip = firstFree(pool);
      if (ip === undefined) continue;
      if (!Object.values(this.lastStatusEnis).some((eni) => eniContains(eni, ip))) {
        return this.fail(key, nowMs, `unable to find ENI for IP ${ip}`);
      }
      pool.used.add(ip);
      this.owners.set(key, ip);
      this.pending.delete(key);
      return { ip };
    }
    return this.fail(key, nowMs, 'all CIDR ranges are exhausted');
  }

  /**
   * Endpoint restore after the agent (re)starts (cilium `AllocateIPWithoutSyncUpstream`): the IP
   * must lie in a current CIDR, else the restore of that endpoint fails, which is a problem.
   */
  restore(owner: string, ip: string): void {
    const family: Family = isIpv4Address(ip) ? 'ipv4' : 'ipv6';
    const pool = this.pools.find(
      (candidate) => isFamily(candidate.cidr, family) && cidrHolds(candidate.cidr, ip),
    );
    if (pool === undefined) {
      this.problems.push(`Failed to re-allocate IP of endpoint ${owner}: IP ${ip} not in range of any CIDR`);
      return;
    }
    pool.used.add(ip);
    this.owners.set(ownerKey(owner, family), ip);
  }

  /** Owner to IPv4 address, for a downgraded (IPv4-only, 1.19) agent to restore. */
  endpoints(): Map<string, string> {
    const endpoints = new Map<string, string>();
    for (const [key, ip] of this.owners) {
      if (isIpv4Address(ip)) endpoints.set(key.slice(key.indexOf('/') + 1), ip);
    }
    return endpoints;
  }

  /** The pod is gone: its addresses of both families go back to their pools. */
  release(owner: string): void {
    for (const family of ['ipv4', 'ipv6'] as const) {
      const key = ownerKey(owner, family);
      const ip = this.owners.get(key);
      if (ip === undefined) continue;
      this.owners.delete(key);
      for (const pool of this.pools) pool.used.delete(ip);
    }
  }

  /** The IP of `family` that `owner` holds, if any. */
  ipOf(owner: string, family: Family = 'ipv4'): string | undefined {
    return this.owners.get(ownerKey(owner, family));
  }

  inUseIps(): string[] {
    return [...this.owners.values()];
  }

  /**
   * The agent's write (cilium `updateLocalNode`): `spec.ipam.pools` to write (or `undefined` when
   * unchanged from `cn`), after releasing free CIDRs beyond `pending + P` (IPv4 only, as modelled).
   */
  plannedPools(cn: CiliumNode, nowMs: number): Record<string, unknown> | undefined {
    for (const [key, expiresAt] of this.pending) if (expiresAt <= nowMs) this.pending.delete(key);
    const inUse4 = this.inUseIps().filter(isIpv4Address).length;
    const inUse6 = this.inUseIps().length - inUse4;
    const pending6 = [...this.pending.keys()].filter((key) => key.startsWith('ipv6/')).length;
    const pending4 = this.pending.size - pending6;
    const requested4 = inUse4 + pending4 + this.preAllocate;
    this.releaseExcess(pending4 + this.preAllocate);
    const needed: Record<string, number> = { 'ipv4-addrs': requested4 };
    if (this.options.ipv6) needed['ipv6-addrs'] = inUse6 + pending6 + this.preAllocate;
    const cidrs = [...this.pools.map((pool) => pool.cidr)].sort(comparePrefixOrder);
    const pools = {
      requested: [{ pool: 'default', needed }],
      ...(cidrs.length > 0
        ? { allocated: [{ pool: 'default', allowFirstIP: true, allowLastIP: true, cidrs }] }
        : {}),
    };
    return JSON.stringify(cn.spec?.ipam?.pools ?? null) === JSON.stringify(pools) ? undefined : pools;
  }

  /** The write went through (spec, and `status.ipam.used` cleared). */
  wrote(nowMs: number): void {
    if (!this.wroteOnce) this.firstWriteAtMs = nowMs;
    this.wroteOnce = true;
  }

  /** Where the agent's startup stands (`waitForAllPools`); throws once the 5-minute fatal has fired. */
  startup(nowMs: number): AgentStartup {
    if (this.fatal) throw new Error(this.fatal);
    const allocatable = (family: Family) =>
      this.pools.some(
        (pool) => isFamily(pool.cidr, family) && !pool.removed && firstFree(pool) !== undefined,
      );
    if (!allocatable('ipv4') || (this.options.ipv6 && !allocatable('ipv6'))) return 'waiting-for-pool';
    if (!this.wroteOnce || this.firstWriteAtMs === undefined) return 'waiting-for-first-write';
    const vpcKnown = Object.values(this.lastStatusEnis).some((eni) => isCidr(eni.vpc?.['primary-cidr']));
    if (vpcKnown) return 'ready';
    if (nowMs - this.firstWriteAtMs >= NATIVE_ROUTING_FATAL_AFTER_MS) {
      this.fatal = 'Timed out waiting for ENI VPC CIDR to be reported in CiliumNode status';
      throw new Error(this.fatal);
    }
    return 'waiting-for-vpc-cidr';
  }

  private fail(key: string, nowMs: number, error: string): { error: string } {
    this.pending.set(key, nowMs + PENDING_TTL_MS);
    return { error };
  }

  private ownAllocated(cn: CiliumNode): string[] {
    const allocated = (cn.spec?.ipam?.pools as { allocated?: { cidrs?: string[] }[] } | undefined)?.allocated;
    return (allocated ?? []).flatMap((entry) => entry.cidrs ?? []);
  }

  private updatePools(listed: readonly string[]): void {
    const listedSet = new Set(listed);
    for (const cidr of [...this.released]) if (!listedSet.has(cidr)) this.released.delete(cidr);
    const kept: CidrPool[] = [];
    for (const pool of this.pools) {
      if (listedSet.has(pool.cidr)) kept.push(pool);
      else if (pool.used.size > 0) {
        if (!pool.removed) this.problems.push(`in-use CIDR ${pool.cidr} was removed from status`);
        pool.removed = true;
        kept.push(pool);
      }
    }
    for (const cidr of listed) {
      if (this.released.has(cidr) || kept.some((pool) => pool.cidr === cidr)) continue;
      kept.push({ cidr, used: new Set(), removed: false });
    }
    this.pools = kept;
  }

  /** cilium `releaseExcessCIDRsMultiPool` for IPv4 (IPv6 /80s are never released). */
  private releaseExcess(freeNeeded: number): void {
    const v4 = () => this.pools.filter((pool) => isIpv4Cidr(pool.cidr) && !pool.removed);
    let totalFree = v4().reduce((sum, pool) => sum + capacity(pool.cidr) - pool.used.size, 0);
    for (const cidr of [...this.released].sort(comparePrefixOrder)) {
      if (totalFree >= freeNeeded) break;
      this.released.delete(cidr);
      this.pools.push({ cidr, used: new Set(), removed: false });
      totalFree += capacity(cidr);
    }
    for (const pool of [...v4()].reverse()) {
      const free = capacity(pool.cidr) - pool.used.size;
      if (pool.used.size === 0 && totalFree - free >= freeNeeded) {
        this.pools = this.pools.filter((candidate) => candidate !== pool);
        this.released.add(pool.cidr);
        totalFree -= free;
      }
    }
  }

  private checkDecodable(enis: Record<string, CiliumEni>): void {
    for (const [id, eni] of Object.entries(enis)) {
      for (const address of [eni.ip, ...(eni.addresses ?? [])]) {
        if (address !== undefined && !isIpv4Address(address))
          this.problems.push(`ENI ${id}: undecodable IP "${address}"`);
      }
      for (const cidr of [...(eni.prefixes ?? []), ...ipv6PrefixesOf(eni)]) {
        if (!isCidr(cidr)) this.problems.push(`ENI ${id}: undecodable CIDR "${cidr}"`);
      }
    }
  }
}

/** cilium `FromResource` over the ENI map (eni.go). */
export function derivedCidrs(cn: CiliumNode): string[] {
  const eniSpec = cn.spec?.eni ?? {};
  const firstIndex =
    typeof eniSpec['first-interface-index'] === 'number' ? eniSpec['first-interface-index'] : 0;
  const excludeTags = eniSpec['exclude-interface-tags'] ?? {};
  const cidrs: string[] = [];
  for (const eni of Object.values(cn.status?.eni?.enis ?? {})) {
    if ((eni.number ?? 0) < firstIndex) continue;
    const tags = eni.tags ?? {};
    const excludeEntries = Object.entries(excludeTags);
    if (excludeEntries.length > 0 && excludeEntries.every(([key, value]) => tags[key] === value)) continue;
    const prefixes = eni.prefixes ?? [];
    cidrs.push(...prefixes, ...ipv6PrefixesOf(eni));
    for (const address of eni.addresses ?? []) {
      if (isIpv4Address(address) && !prefixes.some((prefix) => cidrContains(prefix, address))) {
        cidrs.push(`${address}/32`);
      }
    }
  }
  return cidrs;
}

export function ipv6PrefixesOf(eni: CiliumEni): string[] {
  return eni['ipv6-prefixes'] ?? [];
}

/** cilium `eniContainsIP`: the primary, a listed address, or inside a /28 or a /80 of the ENI. */
function eniContains(eni: CiliumEni, ip: string): boolean {
  if (eni.ip === ip || (eni.addresses ?? []).includes(ip)) return true;
  if (isIpv4Address(ip)) return (eni.prefixes ?? []).some((prefix) => cidrContains(prefix, ip));
  return ipv6PrefixesOf(eni).some((prefix) => cidrHolds(prefix, ip));
}

function ownerKey(owner: string, family: Family): string {
  return `${family}/${owner}`;
}

function isFamily(cidr: string, family: Family): boolean {
  return (family === 'ipv4') === isIpv4Cidr(cidr);
}

/** Whether `ip` lies in `cidr`, either family (false across families). */
function cidrHolds(cidr: string, ip: string): boolean {
  if (isIpv4Cidr(cidr)) return isIpv4Address(ip) && cidrContains(cidr, ip);
  return ipv6CidrContains(cidr, ip);
}

function isIpv4Cidr(cidr: string): boolean {
  return isIpv4Address(cidr.split('/')[0] ?? '');
}

/** What Go's `netip.ParsePrefix` decodes: an address of either family and a length that fits it. */
function isCidr(text: string | undefined): boolean {
  if (text === undefined) return false;
  const [address = '', length = '', ...rest] = text.split('/');
  if (rest.length > 0 || !/^\d{1,3}$/.test(length)) return false;
  if (isIpv6Address(address)) return Number(length) <= 128;
  return isIpv4Address(address) && Number(length) <= 32;
}

/** The addresses the agent's range allocator uses of an IPv6 CIDR (#48652): the first 65 536. */
const IPV6_ADDRESSES_USED = 65_536;

/** IPs of the CIDR (all of them: allowFirstIP and allowLastIP); a /80 counts its first 65 536. */
function capacity(cidr: string): number {
  return isIpv4Cidr(cidr) ? expandCidr(cidr).length : IPV6_ADDRESSES_USED;
}

/** The lowest free address of the pool (allowFirstIP: the network address included). */
function firstFree(pool: CidrPool): string | undefined {
  if (isIpv4Cidr(pool.cidr)) return expandCidr(pool.cidr).find((ip) => !pool.used.has(ip));
  for (let offset = 0; offset < IPV6_ADDRESSES_USED; offset++) {
    const ip = ipv6AddressAt(pool.cidr, BigInt(offset));
    if (!pool.used.has(ip)) return ip;
  }
  return undefined;
}

/** netip.Prefix order as the agent sorts `allocated`: IPv4 before IPv6, shorter prefixes first, then address. */
function comparePrefixOrder(left: string, right: string): number {
  const leftV4 = isIpv4Cidr(left);
  const rightV4 = isIpv4Cidr(right);
  if (leftV4 !== rightV4) return leftV4 ? -1 : 1;
  if (!leftV4) {
    const a = parseIpv6Cidr(left);
    const b = parseIpv6Cidr(right);
    const byAddress = a.networkAddress < b.networkAddress ? -1 : a.networkAddress > b.networkAddress ? 1 : 0;
    return a.prefixLength - b.prefixLength || byAddress;
  }
  const a = parseCidr(left);
  const b = parseCidr(right);
  return a.prefixLength - b.prefixLength || a.networkAddress - b.networkAddress;
}

/** The CiliumNode calls the driver makes; the scenario harness passes its real client-node adapter. */
export interface AgentCiliumNodeApi {
  get(name: string): Promise<CiliumNode | undefined>;
  patchMain(name: string, operations: readonly JsonPatchOperation[]): Promise<CiliumNode>;
  patchStatus(name: string, operations: readonly JsonPatchOperation[]): Promise<CiliumNode>;
}

/**
 * Runs a `MultiPoolAgentModel` against a CiliumNode: `tick` is one pass of the agent's
 * `updateLocalNode` (observe, then the spec write of `spec.ipam.pools` guarded by the
 * resourceVersion, then clearing `status.ipam.used`), as its 15 s debounce or 1-minute timer would
 * run it. A conflict leaves the write to the next tick, as the agent does.
 */
export class MultiPoolAgentDriver {
  constructor(
    readonly model: MultiPoolAgentModel,
    private readonly api: AgentCiliumNodeApi,
    private readonly nodeName: string,
  ) {}

  async tick(nowMs: number): Promise<'written' | 'unchanged' | 'conflict'> {
    const cn = await this.api.get(this.nodeName);
    if (!cn) throw new Error(`CiliumNode ${this.nodeName} does not exist`);
    this.model.observe(cn);
    const pools = this.model.plannedPools(cn, nowMs);
    const rv = cn.metadata.resourceVersion;
    try {
      let current = cn;
      if (pools !== undefined) {
        const ipamExists = typeof cn.spec?.ipam === 'object';
        current = await this.api.patchMain(this.nodeName, [
          { op: 'test', path: '/metadata/resourceVersion', value: rv },
          ipamExists
            ? { op: 'add', path: '/spec/ipam/pools', value: pools }
            : { op: 'add', path: '/spec/ipam', value: { pools } },
        ]);
      }
      if (Object.keys(current.status?.ipam?.used ?? {}).length > 0) {
        await this.api.patchStatus(this.nodeName, [
          { op: 'test', path: '/metadata/resourceVersion', value: current.metadata.resourceVersion },
          { op: 'remove', path: '/status/ipam/used' },
        ]);
      }
    } catch (error) {
      if (error instanceof Error && error.name === 'ResourceVersionConflictError') return 'conflict';
      throw error;
    }
    this.model.wrote(nowMs);
    return pools === undefined ? 'unchanged' : 'written';
  }

  /** Observes the latest CiliumNode without writing (a watch event between passes). */
  async observe(): Promise<CiliumNode> {
    const cn = await this.api.get(this.nodeName);
    if (!cn) throw new Error(`CiliumNode ${this.nodeName} does not exist`);
    this.model.observe(cn);
    return cn;
  }
}
