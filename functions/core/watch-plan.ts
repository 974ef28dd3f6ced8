import { agentDemandOf } from './agent-protocol.ts';
import type { CiliumNode, ReleaseStatus } from './ciliumnode.ts';
import { instanceIdOfCiliumNode, knobsFromCiliumNode } from './knobs.ts';
import type { NodeKnobs } from './model.ts';
import { calculateNeededIps, resolvePreAllocate } from './pool-math.ts';

/**
 * What the CiliumNode watcher starts for one watch event. Pure. A node is served when its demand
 * CROSSES the watermark (cilium `needed` goes from 0 to positive between two versions the watcher
 * saw, or is positive on the first version it sees), when its agent starts asking for IPv6 it has
 * no /80 for (the same crossing, for `ciliumNodeWantsIpv6Prefix`), or when the agent answered the excess-IP
 * release handshake (a `release-ips` entry moved to `ready-for-release` or `do-not-release`). Our
 * own writes and the agent's other updates start nothing: a node whose demand stays positive
 * (being served, or blocked) is not served again for each agent write; the sweep stays the
 * safety net for anything a crossing did not settle.
 */

export interface WatchTrigger {
  readonly instanceId: string;
  readonly allocate: boolean;
  readonly release: boolean;
}

/**
 * IPs the node asks for beyond its pool, from the CiliumNode alone (no instance limits: the cap
 * they put on the pool is the allocator's business, and an uncapped estimate only errs towards
 * looking). The demand is the allocator's own (`agentDemandOf`), per protocol: a 1.19 agent's
 * `status.ipam.used`, a 1.20 agent's `spec.ipam.pools.requested` less the agent's pre-allocation.
 * The pool is `spec.ipam.pool`, which is written for both protocols.
 */
export function ciliumNodeDemand(cn: CiliumNode, defaultKnobs: NodeKnobs): number {
  const knobs = knobsFromCiliumNode(cn, defaultKnobs);
  return calculateNeededIps({
    availableIpCount: Object.keys(cn.spec?.ipam?.pool ?? {}).length,
    usedIpCount: agentDemandOf(cn).usedIpCount,
    preAllocate: resolvePreAllocate(knobs, undefined),
    minAllocate: knobs.minAllocate,
    maxAllocate: knobs.maxAllocate,
  });
}

/**
 * Whether the agent asks for IPv6 and no ENI in the status holds a /80: the allocator's
 * `neededIpv6Prefixes` as far as the CiliumNode alone shows it.
 */
function ciliumNodeWantsIpv6Prefix(cn: CiliumNode): boolean {
  if (!agentDemandOf(cn).wantsIpv6) return false;
  return !Object.values(cn.status?.eni?.enis ?? {}).some((eni) => (eni['ipv6-prefixes'] ?? []).length > 0);
}

/** The agent's answers in `status.ipam.release-ips`, as `ip=answer` strings. */
function agentAnswers(cn: CiliumNode | undefined): Set<string> {
  const answers: readonly ReleaseStatus[] = ['ready-for-release', 'do-not-release'];
  const marks = cn?.status?.ipam?.['release-ips'] ?? {};
  return new Set(
    Object.entries(marks)
      .filter(([, status]) => answers.includes(status))
      .map(([ip, status]) => `${ip}=${status}`),
  );
}

/**
 * `previous`: the last version of this CiliumNode the watcher saw (undefined after a start or a
 * relist). `undefined` when nothing is to be started, or the CiliumNode names no instance yet.
 */
export function watchTrigger(
  previous: CiliumNode | undefined,
  current: CiliumNode,
  defaultKnobs: NodeKnobs,
): WatchTrigger | undefined {
  const instanceId = instanceIdOfCiliumNode(current);
  if (instanceId === undefined) return undefined;
  const allocate =
    crossed(previous, current, (cn) => ciliumNodeDemand(cn, defaultKnobs) > 0) ||
    crossed(previous, current, ciliumNodeWantsIpv6Prefix);
  const before = agentAnswers(previous);
  const release = [...agentAnswers(current)].some((answer) => !before.has(answer));
  return allocate || release ? { instanceId, allocate, release } : undefined;
}

/** `wants` holds for `current` and did not for `previous` (or there is no previous version). */
function crossed(
  previous: CiliumNode | undefined,
  current: CiliumNode,
  wants: (cn: CiliumNode) => boolean,
): boolean {
  return wants(current) && (previous === undefined || !wants(previous));
}
