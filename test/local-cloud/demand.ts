import { agentDemandOf } from '../../functions/core/agent-protocol.ts';
import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import { UNCONFIGURED_KNOBS } from '../../functions/core/knobs.ts';
import { ciliumNodeDemand } from '../../functions/core/watch-plan.ts';
import type { ObservedVersion } from '../support/kubernetes.ts';

/**
 * Demand-to-pool time, from the CiliumNode versions the Kubernetes API server stored, each
 * timestamped when the cloud's watch delivered it. A demand opens at the version where the agent's
 * pods push the node across the watermark (cilium's `needed` goes from 0 to positive, the
 * watcher's own test, `ciliumNodeDemand`, with cilium's default knobs unless the node sets its
 * own) on a node whose pool was already filled once (a pod start, not a node's first
 * registration); it is served at the first later version whose pool grew and whose need is back
 * to 0. A demand whose need fell back to 0 without the pool growing (the pods ended) is dropped,
 * never counted as served.
 */

export interface ServedDemand {
  readonly nodeName: string;
  /** IPs in use at the demand (the pods' addresses). */
  readonly usedIps: number;
  readonly poolBefore: number;
  readonly poolAfter: number;
  readonly demandAtMs: number;
  readonly servedAtMs: number;
  /** The resourceVersions of the demand's version and of the serving one. */
  readonly demandResourceVersion: string;
  readonly servedResourceVersion: string;
}

interface OpenDemand {
  readonly usedIps: number;
  readonly poolBefore: number;
  readonly atMs: number;
  readonly resourceVersion: string;
}

const poolSizeOf = (node: CiliumNode) => Object.keys(node.spec?.ipam?.pool ?? {}).length;
const hasNeed = (node: CiliumNode) => ciliumNodeDemand(node, UNCONFIGURED_KNOBS) > 0;

export class DemandTracker {
  private readonly previous = new Map<string, CiliumNode>();
  private readonly open = new Map<string, OpenDemand>();
  private readonly served: ServedDemand[] = [];

  /** Takes one stored version, delivered at `atMs`. */
  observe(version: ObservedVersion, atMs: number): void {
    if (version.type === 'DELETED') {
      this.previous.delete(version.name);
      this.open.delete(version.name);
      return;
    }
    const node = version.object as unknown as CiliumNode;
    const before = this.previous.get(version.name);
    this.previous.set(version.name, node);
    const opened = this.open.get(version.name);
    if (opened !== undefined) {
      if (hasNeed(node)) return;
      this.open.delete(version.name);
      if (poolSizeOf(node) > opened.poolBefore) this.served.push(servedOf(version, opened, node, atMs));
      return;
    }
    if (before !== undefined && poolSizeOf(before) > 0 && !hasNeed(before) && hasNeed(node)) {
      this.open.set(version.name, {
        usedIps: agentDemandOf(node).usedIpCount,
        poolBefore: poolSizeOf(node),
        atMs,
        resourceVersion: version.resourceVersion,
      });
    }
  }

  /** The demand served last, if any. */
  lastServed(): ServedDemand | undefined {
    return this.served.at(-1);
  }

  servedCount(): number {
    return this.served.length;
  }

  /** Demands not served yet, with when the oldest opened. */
  waiting(): { readonly count: number; readonly oldestAtMs?: number } {
    const times = [...this.open.values()].map((demand) => demand.atMs);
    return times.length === 0 ? { count: 0 } : { count: times.length, oldestAtMs: Math.min(...times) };
  }
}

function servedOf(
  version: ObservedVersion,
  opened: OpenDemand,
  node: CiliumNode,
  atMs: number,
): ServedDemand {
  return {
    nodeName: version.name,
    usedIps: opened.usedIps,
    poolBefore: opened.poolBefore,
    poolAfter: poolSizeOf(node),
    demandAtMs: opened.atMs,
    servedAtMs: atMs,
    demandResourceVersion: opened.resourceVersion,
    servedResourceVersion: version.resourceVersion,
  };
}

/** The live table's line: the last pod start and how long its pool took, and what waits. */
export function renderDemand(tracker: DemandTracker, nowMs: number): string {
  const last = tracker.lastServed();
  const waiting = tracker.waiting();
  const waitingText =
    waiting.count === 0
      ? 'none waiting'
      : `${waiting.count} waiting (oldest ${((nowMs - (waiting.oldestAtMs ?? nowMs)) / 1000).toFixed(1)} s)`;
  if (last === undefined) return `demand: no pod start served yet, ${waitingText}`;
  const at = new Date(last.demandAtMs).toISOString().slice(11, 23);
  return (
    `demand: last pod start ${last.usedIps} IPs in use on ${last.nodeName} at ${at} (rv ${last.demandResourceVersion}), ` +
    `pool ${last.poolBefore} -> ${last.poolAfter} in ${((last.servedAtMs - last.demandAtMs) / 1000).toFixed(2)} s ` +
    `(rv ${last.servedResourceVersion}); ${tracker.servedCount()} served, ${waitingText}`
  );
}
