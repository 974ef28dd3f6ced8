import { setTimeout as sleep } from 'node:timers/promises';
import type { CiliumNode } from '../../../functions/core/ciliumnode.ts';
import { usedIps } from '../../../functions/core/knobs.ts';
import { calculateNeededIps } from '../../../functions/core/pool-math.ts';
import { writeUsedIps } from '../../local-cloud/cilium-agent.ts';
import type { LocalCloud } from '../../local-cloud/local-cloud.ts';
import { percentile } from '../demand.ts';
import type { VersionRecorder } from './side.ts';

/** cilium's default pre-allocate watermark (both sides run with it). */
const PRE_ALLOCATE = 8;
/** Pool IPs each demand node's new pods take: past the watermark, so every node needs more. */
const NEW_PODS = 5;

export interface DemandLatency {
  readonly nodes: number;
  readonly served: number;
  readonly p50Seconds: number | undefined;
  readonly p99Seconds: number | undefined;
}

/**
 * Demand to pool on either side, on the real kube-apiserver: pods start at once on `nodeNames`
 * (each 1.19 agent writes `status.ipam.used` with NEW_PODS more pool IPs); a node is served at the
 * first stored version whose pool meets the watermark again. Our side serves it with one Watch
 * invocation holding the watch (as the bench's demand phase does); the peer serves it from its
 * CiliumNode informer.
 */
export async function measurePeerDemand(
  cloud: LocalCloud,
  nodeNames: readonly string[],
  context: {
    readonly clock: () => number;
    readonly recorder: VersionRecorder;
    readonly ourWatcher: boolean;
    readonly settings: { readonly onProgress: (line: string) => void };
  },
): Promise<DemandLatency> {
  const { clock, recorder } = context;
  cloud.ec2.throttling.reset();
  context.settings.onProgress(`  demand: pods start on ${nodeNames.length} m5.large nodes at once...`);
  const watching = context.ourWatcher ? await startWatcher(cloud) : undefined;
  const startedAt = new Map<string, number>();
  const fromIndex = recorder.versions.length;
  await Promise.all(
    nodeNames.map(async (name) => {
      startedAt.set(name, clock());
      const outcome = await writeUsedIps(cloud.k8s, name, (current) => usedWithMorePods(current));
      if (outcome !== 'written')
        throw new Error(`the agent of ${name} could not report its pods (${outcome})`);
    }),
  );
  const servedAt = new Map<string, number>();
  const deadline = Date.now() + 60_000;
  while (servedAt.size < nodeNames.length && Date.now() < deadline) {
    for (const { atMs, version } of recorder.versions.slice(fromIndex)) {
      const start = startedAt.get(version.name);
      if (start === undefined || servedAt.has(version.name) || atMs < start) continue;
      const node = version.object as unknown as CiliumNode;
      if (usedIps(node).length >= NEW_PODS && demandOf(node) === 0) servedAt.set(version.name, atMs);
    }
    await sleep(100);
  }
  await watching;
  const seconds = [...servedAt]
    .map(([name, atMs]) => (atMs - (startedAt.get(name) as number)) / 1000)
    .sort((a, b) => a - b);
  return {
    nodes: nodeNames.length,
    served: seconds.length,
    p50Seconds: percentile(seconds, 0.5),
    p99Seconds: percentile(seconds, 0.99),
  };
}

/**
 * One Watch invocation; resolves once it listed the CiliumNodes (its watch opens from that list's
 * resourceVersion right after) and a second more. The audit log records a watch only when it ends,
 * so the list is the last request it shows before the watch is open.
 */
async function startWatcher(cloud: LocalCloud): Promise<Promise<unknown>> {
  const watcherUser = cloud.k8s.identities.find((identity) => identity.functionId === 'Watch')?.kubernetes
    .user;
  const watching = cloud.invoke('Watch', { task: 'watch' });
  await cloud.waitUntil(
    async () => (await cloud.k8s.requests({ verb: 'list' })).some((request) => request.user === watcherUser),
    { timeoutMs: 30_000, intervalMs: 100, description: 'the watcher listed the CiliumNodes' },
  );
  await sleep(1_000);
  return watching;
}

/** A 1.19 node's demand: what the pool lacks for the used IPs plus the watermark. */
function demandOf(node: CiliumNode): number {
  return calculateNeededIps({
    availableIpCount: Object.keys(node.spec?.ipam?.pool ?? {}).length,
    usedIpCount: usedIps(node).length,
    preAllocate: PRE_ALLOCATE,
    minAllocate: 0,
    maxAllocate: 0,
  });
}

/** The agent giving NEW_PODS pods an IP each: pool IPs not yet used go into status.ipam.used. */
function usedWithMorePods(current: CiliumNode): Record<string, unknown> {
  const used = { ...(current.status?.ipam?.used ?? {}) } as Record<string, unknown>;
  const free = Object.keys(current.spec?.ipam?.pool ?? {}).filter((ip) => !(ip in used));
  for (const [index, ip] of free.slice(0, NEW_PODS).entries()) {
    used[ip] = { owner: `bench/pod-${index}`, resource: '' };
  }
  return used;
}
