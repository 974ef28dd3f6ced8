import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import { DEFAULT_PRE_ALLOCATE_IPS } from '../../functions/core/pool-math.ts';
import { staticInstanceTypeLimits } from '../emulators/ec2/instance-types.ts';
import { type AgentKubernetesApi, writeUsedIps } from './cilium-agent.ts';
import type { CloudSummary } from './summary.ts';

/**
 * Pods coming and going on the live cloud's nodes, as a cluster's workloads would: every
 * `periodMs`, the next ready node (in turn) whose agent speaks the CRD protocol (1.19) either ends
 * its pods (`status.ipam.used` emptied) or, if it has none, starts enough of them to take it
 * `PODS_BEYOND_WATERMARK` IPs past its watermark, so that each start is a demand the watcher must
 * hand to the allocate function. A node whose pool would pass `POOL_CAP`, or what its instance
 * type can hold on the ENIs we create (eth0 stays the instance's), only ends its pods: the pools
 * stay bounded however long the cloud runs, and every demand started can be served. Nothing is
 * started on a node that is not ready.
 */

export const PODS_BEYOND_WATERMARK = 3;
export const POOL_CAP = 32;

export interface PodChurnSite {
  readonly k8s: AgentKubernetesApi;
  summary(): Promise<CloudSummary>;
  /** Whether the node runs a 1.20 agent (its demand is not `status.ipam.used`). */
  runsMultiPoolAgent(nodeName: string): boolean;
}

export interface PodChurn {
  /** The last failed step, if one failed (the churn goes on with the next node). */
  lastError(): string | undefined;
  stop(): void;
}

export function startPodChurn(site: PodChurnSite, periodMs: number): PodChurn {
  let turn = 0;
  let stepping = false;
  let lastError: string | undefined;
  const step = async () => {
    const nodes = (await site.summary()).nodes.filter(
      (node) => node.ready && !site.runsMultiPoolAgent(node.nodeName),
    );
    const node = nodes[turn++ % Math.max(nodes.length, 1)];
    if (node === undefined) return;
    const capacity = ipCapacityOf(node.instanceType);
    await writeUsedIps(site.k8s, node.nodeName, (current) => nextPods(current, capacity));
  };
  const timer = setInterval(() => {
    if (stepping) return;
    stepping = true;
    step()
      .catch((error: unknown) => {
        lastError = String((error as Error)?.message ?? error);
      })
      .finally(() => {
        stepping = false;
      });
  }, periodMs);
  return {
    lastError: () => lastError,
    stop: () => clearInterval(timer),
  };
}

/** The node's next `status.ipam.used`: its pods ended, or new ones past the watermark; undefined to leave it. */
export function nextPods(
  node: CiliumNode,
  capacity = Number.POSITIVE_INFINITY,
): Record<string, { owner: string; resource: string }> | undefined {
  if (Object.keys(node.status?.ipam?.used ?? {}).length > 0) return {};
  const pool = Object.keys(node.spec?.ipam?.pool ?? {});
  if (pool.length === 0 || pool.length + PODS_BEYOND_WATERMARK > Math.min(POOL_CAP, capacity))
    return undefined;
  const preAllocate = Number(node.spec?.ipam?.['pre-allocate'] ?? 0) || DEFAULT_PRE_ALLOCATE_IPS;
  const count = Math.min(pool.length, Math.max(1, pool.length - preAllocate + PODS_BEYOND_WATERMARK));
  const stamp = Date.now().toString(36);
  return Object.fromEntries(
    pool.slice(0, count).map((ip, index) => [ip, { owner: `default/load-${stamp}-${index}`, resource: '' }]),
  );
}

/** Secondary IPs the instance type holds on every ENI but eth0 (the limits EC2 reports); unknown: no limit. */
export function ipCapacityOf(instanceType: string): number {
  const limits = staticInstanceTypeLimits().get(instanceType);
  if (limits === undefined) return Number.POSITIVE_INFINITY;
  return (limits.maxInterfaces - 1) * (limits.ipv4PerInterface - 1);
}
