import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import { usedIps } from '../../functions/core/knobs.ts';
import { calculateNeededIps } from '../../functions/core/pool-math.ts';
import { ApiError, type K8sEmulator } from '../emulators/k8s/index.ts';
import type { LocalCloud } from '../local-cloud/local-cloud.ts';
import { nowMs } from './tap.ts';

/**
 * Demand-to-pool latency: pods start on `nodes` at once (the agent writes `status.ipam.used`, which
 * raises the node's demand past its watermark), and each node's latency runs from that write to the
 * first CiliumNode version whose pool meets the demand again (status written before it, so its IPs
 * are usable). Measured from the Kubernetes emulator's commit hook, in simulated seconds.
 * `watcher`: a Watch invocation holds the watch (no sweep runs); `sweep`: only the scheduled sweep,
 * every simulated minute, the pod starts falling at a seeded point of its period.
 */

export interface LatencyFigures {
  readonly nodes: number;
  readonly served: number;
  readonly p50Seconds: number | undefined;
  readonly p99Seconds: number | undefined;
  readonly maxSeconds: number | undefined;
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
  const unsubscribe = cloud.k8s.store.onWrite((entry) => {
    const start = startedAt.get(entry.name);
    if (start === undefined || servedAt.has(entry.name)) return;
    if (demandOf(entry.object as unknown as CiliumNode, options.preAllocate) === 0)
      servedAt.set(entry.name, nowMs());
  });
  const stop = await startServing(cloud, options);
  try {
    for (const name of nodeNames) {
      startPods(cloud.k8s, name, options.newPods);
      startedAt.set(name, nowMs());
    }
    const deadline = Date.now() + options.timeoutMs;
    while (servedAt.size < nodeNames.length && Date.now() < deadline) await sleep(100);
  } finally {
    unsubscribe();
    await stop();
  }
  const seconds = nodeNames
    .filter((name) => servedAt.has(name))
    .map(
      (name) => (((servedAt.get(name) as number) - (startedAt.get(name) as number)) / 1000) * options.scale,
    )
    .sort((a, b) => a - b);
  return {
    nodes: nodeNames.length,
    served: seconds.length,
    p50Seconds: percentile(seconds, 0.5),
    p99Seconds: percentile(seconds, 0.99),
    maxSeconds: seconds.at(-1),
  };
}

/** Starts what serves demand; resolves with how to stop it (the watcher runs out on its own). */
async function startServing(cloud: LocalCloud, options: DemandOptions): Promise<() => Promise<void>> {
  if (options.mode === 'watcher') {
    const watching = cloud.invoke('Watch', { task: 'watch' });
    await cloud.waitUntil(() => cloud.k8s.openWatches() > 0, { description: 'the watcher opened its watch' });
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

function demandOf(cn: CiliumNode, preAllocate: number): number {
  return calculateNeededIps({
    availableIpCount: Object.keys(cn.spec?.ipam?.pool ?? {}).length,
    usedIpCount: usedIps(cn).length,
    preAllocate,
    minAllocate: 0,
    maxAllocate: 0,
  });
}

/** The agent giving `count` more pods an IP each: pool IPs not yet used go into status.ipam.used. */
function startPods(k8s: K8sEmulator, nodeName: string, count: number): void {
  for (let attempt = 1; ; attempt++) {
    const current = k8s.store.get(nodeName) as unknown as CiliumNode & { status?: Record<string, unknown> };
    const used = { ...(current.status?.ipam?.used ?? {}) } as Record<string, unknown>;
    const free = Object.keys(current.spec?.ipam?.pool ?? {}).filter((ip) => !(ip in used));
    for (const [index, ip] of free.slice(0, count).entries()) {
      used[ip] = { owner: `bench/pod-${Object.keys(used).length}-${index}`, resource: '' };
    }
    try {
      k8s.store.update(
        nodeName,
        { ...current, status: { ...current.status, ipam: { ...current.status?.ipam, used } } } as never,
        'status',
        'update',
      );
      return;
    } catch (error) {
      if (!(error instanceof ApiError && error.code === 409) || attempt >= 20) throw error;
    }
  }
}

function percentile(sorted: readonly number[], fraction: number): number | undefined {
  if (sorted.length === 0) return undefined;
  return sorted[Math.min(sorted.length - 1, Math.ceil(fraction * sorted.length) - 1)];
}

function sleep(milliseconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, milliseconds));
}
