import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import { usedIps } from '../../functions/core/knobs.ts';
import { calculateNeededIps } from '../../functions/core/pool-math.ts';
import {
  type AgentKubernetesApi,
  type AgentVersion,
  type LocalMultiPoolAgent,
  writeUsedIps,
} from '../local-cloud/cilium-agent.ts';
import { k8sEmulatorOf, type LocalCloud } from '../local-cloud/local-cloud.ts';
import { nowMs } from './tap.ts';

/**
 * Demand-to-pool latency: pods start on `nodes` at once, and each node's latency runs from the
 * agent's write that raises its demand past the watermark to the first CiliumNode version that
 * meets the demand again. Per agent protocol:
 * - 1.19 (CRD): the agent writes `status.ipam.used`; served when `spec.ipam.pool` meets the
 *   watermark again (status is written before spec, so those IPs are usable);
 * - 1.20 (multi-pool): the node's running agent model hands the pods IPs and writes
 *   `spec.ipam.pools.requested`; served when the CIDRs a 1.20 agent derives from
 *   `status.eni.enis` (non-excluded ENIs) hold at least the requested IPv4 addresses.
 * Measured from the Kubernetes emulator's commit hook, in simulated seconds.
 * `watcher`: a Watch invocation holds the watch (no sweep runs); `sweep`: only the scheduled sweep,
 * every simulated minute, the pod starts falling at a seeded point of its period.
 */

export interface LatencyFigures {
  readonly nodes: number;
  readonly served: number;
  readonly p50Seconds: number | undefined;
  readonly p99Seconds: number | undefined;
  readonly maxSeconds: number | undefined;
  /** The same figures per agent version, for the versions that ran. */
  readonly byAgent: Readonly<Partial<Record<AgentVersion, Omit<LatencyFigures, 'byAgent'>>>>;
}

export interface DemandOptions {
  readonly mode: 'watcher' | 'sweep';
  /** Pool IPs each node's new pods take (beyond those already used). */
  readonly newPods: number;
  readonly preAllocate: number;
  readonly scale: number;
  /** Seeded draw in [0, 1): where in the sweep's period the pods start. */
  readonly random: () => number;
  readonly timeoutMs: number;
}

export async function measureDemandLatency(
  cloud: LocalCloud,
  nodeNames: readonly string[],
  options: DemandOptions,
): Promise<LatencyFigures> {
  const startedAt = new Map<string, number>();
  const servedAt = new Map<string, number>();
  const versionOf = (name: string): AgentVersion => (cloud.multiPoolAgent(name) ? '1.20' : '1.19');
  const unsubscribe = k8sEmulatorOf(cloud).store.onWrite((entry) => {
    const start = startedAt.get(entry.name);
    if (start === undefined || servedAt.has(entry.name)) return;
    const cn = entry.object as unknown as CiliumNode;
    const served =
      versionOf(entry.name) === '1.20' ? multiPoolDemandMet(cn) : crdDemandOf(cn, options.preAllocate) === 0;
    if (served) servedAt.set(entry.name, nowMs());
  });
  const stop = await startServing(cloud, options);
  try {
    for (const name of nodeNames) {
      const agent = cloud.multiPoolAgent(name);
      // Taken before the write: the write's own commit may already meet the demand (never here,
      // as the pods take IPs beyond the watermark).
      startedAt.set(name, nowMs());
      if (agent) startMultiPoolPods(agent, name, options.newPods);
      else await startPods(cloud.k8s, name, options.newPods);
    }
    const deadline = Date.now() + options.timeoutMs;
    while (servedAt.size < nodeNames.length && Date.now() < deadline) await sleep(100);
  } finally {
    unsubscribe();
    await stop();
  }
  const latencyOf = (names: readonly string[]): Omit<LatencyFigures, 'byAgent'> => {
    const seconds = names
      .filter((name) => servedAt.has(name))
      .map(
        (name) => (((servedAt.get(name) as number) - (startedAt.get(name) as number)) / 1000) * options.scale,
      )
      .sort((a, b) => a - b);
    return {
      nodes: names.length,
      served: seconds.length,
      p50Seconds: percentile(seconds, 0.5),
      p99Seconds: percentile(seconds, 0.99),
      maxSeconds: seconds.at(-1),
    };
  };
  const byAgent: Partial<Record<AgentVersion, Omit<LatencyFigures, 'byAgent'>>> = {};
  for (const version of ['1.19', '1.20'] as const) {
    const names = nodeNames.filter((name) => versionOf(name) === version);
    if (names.length > 0) byAgent[version] = latencyOf(names);
  }
  return { ...latencyOf(nodeNames), byAgent };
}

/** Starts what serves demand; resolves with how to stop it (the watcher runs out on its own). */
async function startServing(cloud: LocalCloud, options: DemandOptions): Promise<() => Promise<void>> {
  if (options.mode === 'watcher') {
    const watching = cloud.invoke('Watch', { task: 'watch' });
    await cloud.waitUntil(() => k8sEmulatorOf(cloud).openWatches() > 0, {
      description: 'the watcher opened its watch',
    });
    return async () => {
      await watching;
    };
  }
  const periodMs = 60_000 / options.scale;
  let interval: NodeJS.Timeout | undefined;
  const first = setTimeout(
    () => {
      void cloud.fireSchedules().catch(() => {});
      interval = setInterval(() => void cloud.fireSchedules().catch(() => {}), periodMs);
    },
    Math.floor(options.random() * periodMs),
  );
  return async () => {
    clearTimeout(first);
    clearInterval(interval);
    await cloud.settle();
  };
}

/** A 1.19 node's demand: what `spec.ipam.pool` lacks for `status.ipam.used` plus the watermark. */
function crdDemandOf(cn: CiliumNode, preAllocate: number): number {
  return calculateNeededIps({
    availableIpCount: Object.keys(cn.spec?.ipam?.pool ?? {}).length,
    usedIpCount: usedIps(cn).length,
    preAllocate,
    minAllocate: 0,
    maxAllocate: 0,
  });
}

/** The agent giving `count` more pods an IP each: pool IPs not yet used go into status.ipam.used. */
async function startPods(k8s: AgentKubernetesApi, nodeName: string, count: number): Promise<void> {
  const outcome = await writeUsedIps(k8s, nodeName, (current) => {
    const used = { ...(current.status?.ipam?.used ?? {}) } as Record<string, unknown>;
    const free = Object.keys(current.spec?.ipam?.pool ?? {}).filter((ip) => !(ip in used));
    for (const [index, ip] of free.slice(0, count).entries()) {
      used[ip] = { owner: `bench/pod-${Object.keys(used).length}-${index}`, resource: '' };
    }
    return used;
  });
  if (outcome !== 'written')
    throw new Error(`the agent of ${nodeName} could not report its pods (${outcome})`);
}

/**
 * Whether a 1.20 agent can serve what it requested: the IPv4 addresses it derives from
 * `status.eni.enis` (ENIs below `first-interface-index` excluded, as the agent does; every listed
 * address, /28 members included) are at least `spec.ipam.pools.requested`'s `ipv4-addrs`.
 */
function multiPoolDemandMet(cn: CiliumNode): boolean {
  const requested = (
    cn.spec?.ipam?.pools as
      | { requested?: { pool?: string; needed?: { 'ipv4-addrs'?: number } }[] }
      | undefined
  )?.requested?.find((entry) => entry.pool === 'default')?.needed?.['ipv4-addrs'];
  if (requested === undefined) return false;
  const firstInterfaceIndex = Number(cn.spec?.eni?.['first-interface-index'] ?? 0);
  const usable = Object.values(cn.status?.eni?.enis ?? {})
    .filter((eni) => (eni.number ?? 0) >= firstInterfaceIndex)
    .reduce((count, eni) => count + (eni.addresses ?? []).filter((ip) => !ip.includes(':')).length, 0);
  return usable >= requested;
}

/**
 * A 1.20 agent giving `count` more pods an IP each from the CIDRs it derived, then writing its
 * raised `spec.ipam.pools.requested` (one pass of the running agent; a conflict is retried by it).
 */
function startMultiPoolPods(agent: LocalMultiPoolAgent, nodeName: string, count: number): void {
  const existing = agent.model.inUseIps().length;
  for (let index = 0; index < count; index++) {
    const outcome = agent.model.allocate(`bench/${nodeName}/pod-${existing + index}`, 'ipv4', Date.now());
    if ('error' in outcome)
      throw new Error(`the 1.20 agent of ${nodeName} could not start a pod: ${outcome.error}`);
  }
  agent.pass();
}

/** The value at `fraction` (0..1] of an ascending list, nearest rank; undefined when it is empty. */
export function percentile(sorted: readonly number[], fraction: number): number | undefined {
  if (sorted.length === 0) return undefined;
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)];
}

function sleep(milliseconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, milliseconds));
}
