import type { CiliumNode } from '../../../functions/core/ciliumnode.ts';
import { observeAsAgent } from '../../support/cilium-agent-model.ts';
import type { ObservedVersion } from '../../support/kubernetes.ts';

/**
 * One side of the peer comparison: our stack, or cilium-operator's ENI allocator with given
 * `--limit-ipam-api-qps` / `--limit-ipam-api-burst`, on the same stand-ins (the real
 * kube-apiserver, the EC2 emulator with AWS's token buckets, the simulated 1.19 agents).
 */
export interface ComparisonSide {
  readonly id: 'ours' | 'peer_defaults' | 'peer_raised';
  readonly label: string;
  /** The peer's IPAM API limits; undefined for our stack. */
  readonly peerLimits?: { readonly qps: number; readonly burst: number };
}

/** One stored CiliumNode version and when the bench's watch saw it (simulated epoch ms). */
export interface TimedVersion {
  readonly atMs: number;
  readonly version: ObservedVersion;
}

/**
 * A 1.19 agent starts allocating from its CiliumNode once the pool holds its minimum (2 with
 * health checking: it writes neither min- nor pre-allocate) and the version passes its
 * validation (`validateENIConfig`: every pool IP's ENI in status, listing the IP). Both sides
 * are judged by this, on the versions the server stored.
 */
export const AGENT_MINIMUM_POOL = 2;

export function agentCanStart(object: unknown): boolean {
  const node = object as CiliumNode;
  if (Object.keys(node.spec?.ipam?.pool ?? {}).length < AGENT_MINIMUM_POOL) return false;
  return observeAsAgent(node).accepted;
}

/** Records every CiliumNode version as it arrives, and when each watched node first became ready. */
export class VersionRecorder {
  readonly versions: TimedVersion[] = [];
  readonly readyAtMs = new Map<string, number>();
  private readonly watched = new Set<string>();

  constructor(private readonly clock: () => number) {}

  /** Nodes whose readiness counts (the burst's). */
  watch(nodeNames: Iterable<string>): void {
    for (const name of nodeNames) this.watched.add(name);
  }

  readonly record = (version: ObservedVersion): void => {
    const atMs = this.clock();
    this.versions.push({ atMs, version });
    if (version.type === 'DELETED' || this.readyAtMs.has(version.name) || !this.watched.has(version.name))
      return;
    if (agentCanStart(version.object)) this.readyAtMs.set(version.name, atMs);
  };

  /** The versions of each node, in order, from `fromIndex` on. */
  byNode(names: ReadonlySet<string>, fromIndex = 0): Map<string, CiliumNode[]> {
    const grouped = new Map<string, CiliumNode[]>();
    for (const { version } of this.versions.slice(fromIndex)) {
      if (version.type === 'DELETED' || !names.has(version.name)) continue;
      const list = grouped.get(version.name) ?? [];
      list.push(version.object as unknown as CiliumNode);
      grouped.set(version.name, list);
    }
    return grouped;
  }
}
