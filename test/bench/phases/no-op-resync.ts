import { k8sEmulatorOf } from '../../local-cloud/local-cloud.ts';
import { type Figure, figure } from '../report.ts';
import { type BenchCloud, KUBERNETES_WRITE_VERBS } from './bench-cloud.ts';
import type { BenchSettings } from './settings.ts';

/** A resync of every node once the burst settled, which should write nothing. */
export interface NoOpResync {
  /** Syncs that reported `in-sync`. */
  readonly inSync: number;
  /** Write requests to the CiliumNodes of those syncs. */
  readonly writeRequests: number;
  /** The Sync function's answer: its outcomes, or its error. */
  readonly outcomes: unknown;
}

/**
 * Invokes the Sync function with `{"all":true}` and counts every write to a CiliumNode while it
 * runs, against the syncs its answer reports `in-sync` (the Sync function logs those at debug
 * only, so the answer is the record of them). Counting every write, not only those to the
 * in-sync nodes, is the stricter figure: after the burst settled, nothing should be written.
 */
export async function resyncEveryNode(bench: BenchCloud, settings: BenchSettings): Promise<NoOpResync> {
  const { cloud } = bench;
  settings.onProgress('a resync of every node (expected to change nothing)...');
  const requestsBefore = k8sEmulatorOf(cloud).requests.all().length;
  const result = await cloud.invoke('Sync', { all: true });
  const requests = k8sEmulatorOf(cloud).requests.all().slice(requestsBefore);
  const outcomes =
    result.status === 'succeeded'
      ? (result.payload as { outcomes?: Record<string, number> }).outcomes
      : undefined;
  const writeRequests = requests.filter(
    (request) => KUBERNETES_WRITE_VERBS.has(request.verb) && request.name !== undefined,
  ).length;
  return {
    inSync: outcomes?.['in-sync'] ?? 0,
    writeRequests,
    outcomes: result.status === 'succeeded' ? outcomes : result.error,
  };
}

export function noOpResyncFigure(resync: NoOpResync): Figure {
  return figure({
    id: 'k8s_writes_per_noop_sync',
    label: 'Kubernetes writes per no-op sync',
    value: resync.inSync === 0 ? undefined : resync.writeRequests / resync.inSync,
    reference: 0,
    unit: 'writes/sync',
    note: `a manual {"all":true} resync after the burst settled: every write request to a CiliumNode while it ran (${resync.writeRequests}), per sync it reported in-sync (${resync.inSync}).`,
  });
}
