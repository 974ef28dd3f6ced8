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

/** Invokes the Sync function with `{"all":true}` and counts the writes to nodes it found in sync. */
export async function resyncEveryNode(bench: BenchCloud, settings: BenchSettings): Promise<NoOpResync> {
  const { cloud, functionLog } = bench;
  settings.onProgress('a resync of every node (expected to change nothing)...');
  const requestsBefore = cloud.k8s.requests.all().length;
  const syncsBefore = functionLog.syncs.length;
  const result = await cloud.invoke('Sync', { all: true });
  const requests = cloud.k8s.requests.all().slice(requestsBefore);
  const inSync = functionLog.syncs.slice(syncsBefore).filter((entry) => entry.outcome === 'in-sync');
  const inSyncNames = new Set(inSync.map((entry) => entry.nodeName));
  const writeRequests = requests.filter(
    (request) =>
      KUBERNETES_WRITE_VERBS.has(request.verb) && request.name !== undefined && inSyncNames.has(request.name),
  ).length;
  return {
    inSync: inSync.length,
    writeRequests,
    outcomes:
      result.status === 'succeeded' ? (result.payload as { outcomes?: unknown }).outcomes : result.error,
  };
}

export function noOpResyncFigure(resync: NoOpResync): Figure {
  return figure({
    id: 'k8s_writes_per_noop_sync',
    label: 'Kubernetes writes per no-op sync',
    value: resync.inSync === 0 ? undefined : resync.writeRequests / resync.inSync,
    reference: 0,
    unit: 'writes/sync',
    note: `a manual {"all":true} resync after the burst settled: write requests to the CiliumNodes of the ${resync.inSync} syncs that reported in-sync (${resync.writeRequests}).`,
  });
}
