import { forEachWithConcurrency } from '../core/concurrency.ts';
import type { NodeRecord } from '../core/model.ts';
import { planSyncStep } from '../core/sync-plan.ts';
import { readRecordPage } from '../core/unreadable-records.ts';
import {
  finish,
  type SyncDependencies,
  type SyncNodeSummary,
  type SyncOutcome,
  syncNode,
} from './sync-node.ts';

/**
 * The fleet side of the sync: many nodes at once, each by the one-node protocol of sync-node.ts.
 * `syncEach` for the instances a stream batch names, `syncAll` for every node of the table (the
 * resync). A node that fails never stops the others.
 */

export interface SyncAllOptions {
  /** Nodes synced at the same time. */
  readonly concurrency: number;
}

/** A node's sync result: its summary, or the error it threw (already logged). */
export type SyncResult =
  | { readonly instanceId: string; readonly ok: true; readonly summary: SyncNodeSummary }
  | { readonly instanceId: string; readonly ok: false; readonly error: string };

/**
 * Syncs each instance once (duplicates are synced once), `concurrency` at a time. A node that
 * throws does not stop the others: its error is logged and returned in its result, in input order.
 */
export async function syncEach(
  instanceIds: Iterable<string>,
  deps: SyncDependencies,
  options: SyncAllOptions,
): Promise<SyncResult[]> {
  const unique = [...new Set(instanceIds)];
  const results = new Map<string, SyncResult>();
  await forEachWithConcurrency(unique, options.concurrency, async (instanceId) => {
    results.set(instanceId, await syncResult(instanceId, deps, () => syncNode(instanceId, deps)));
  });
  return unique.map((instanceId) => results.get(instanceId) as SyncResult);
}

export interface SyncAllSummary {
  readonly nodes: number;
  readonly writes: number;
  readonly outcomes: Readonly<Partial<Record<SyncOutcome, number>>>;
  /** Nodes whose sync threw (after every other node was attempted). */
  readonly failed: readonly { readonly instanceId: string; readonly error: string }[];
}

/**
 * Syncs every node of the table, page by page, `concurrency` at a time. Retired records are
 * counted without a sync. A node whose CiliumNode is already in sync with its listed record, or
 * shows a newer version of it, is counted without reading the record again (`syncListed`). A node
 * that fails does not stop the others; failures are logged and listed in the summary for the
 * caller to surface; so is an item the table holds that is no readable record (`readRecordPage`:
 * a newer release's layout, wrong types), which is never published.
 */
export async function syncAll(deps: SyncDependencies, options: SyncAllOptions): Promise<SyncAllSummary> {
  const outcomes: Partial<Record<SyncOutcome, number>> = {};
  const failed: { instanceId: string; error: string }[] = [];
  let nodes = 0;
  let writes = 0;
  let pageToken: string | undefined;
  do {
    const page = await readRecordPage(deps.store, pageToken);
    pageToken = page.nextPageToken;
    nodes += page.records.length + page.unreadable.length;
    for (const item of page.unreadable) {
      deps.log.error('sync cannot read a node record; nothing written for it', { ...item });
      failed.push(item);
    }
    const active = page.records.filter((record) => record.lifecycle !== 'retired');
    outcomes.retired = (outcomes.retired ?? 0) + (page.records.length - active.length);
    const results: SyncResult[] = [];
    await forEachWithConcurrency(active, options.concurrency, async (record) => {
      results.push(await syncListed(record, deps));
    });
    for (const result of results) {
      if (result.ok) {
        outcomes[result.summary.outcome] = (outcomes[result.summary.outcome] ?? 0) + 1;
        writes += result.summary.writes;
      } else {
        failed.push({ instanceId: result.instanceId, error: result.error });
      }
    }
  } while (pageToken !== undefined);
  if (outcomes.retired === 0) delete outcomes.retired;
  const summary = { nodes, writes, outcomes, failed };
  deps.log.info('sync of all nodes finished', { ...summary, failed: failed.length });
  return summary;
}

/**
 * One node of a sync-all, from the record the table listed (an eventually consistent Scan). When
 * the CiliumNode is in sync with that record, or carries a newer version of it, nothing is read or
 * written further: the sync writes nothing from it either, and a newer record than the listed one
 * is the stream's to publish (every record write reaches the sync through the stream). Otherwise
 * the node gets the full `syncNode`, whose consistent read, taken after the CiliumNode's, is what
 * any write is planned from. In the steady state this spares two strongly consistent reads per
 * node, most of a resync's read units.
 */
async function syncListed(listed: NodeRecord, deps: SyncDependencies): Promise<SyncResult> {
  const { instanceId } = listed;
  return syncResult(instanceId, deps, async () => {
    if (!deps.paused) {
      const table = await deps.tableGeneration?.();
      const step = planSyncStep(listed, await deps.ciliumNodes.get(listed.nodeName), table);
      if (step.kind === 'none' && (step.reason === 'in-sync' || step.reason === 'stale')) {
        const summary = {
          instanceId,
          outcome: step.reason,
          writes: 0,
          conflicts: 0,
          recordVersion: listed.version,
        } as const;
        return finish({ ...summary, nodeName: listed.nodeName }, deps);
      }
    }
    return syncNode(instanceId, deps);
  });
}

/** `sync`'s summary as a result, or the error it threw (logged) as a failed one. */
async function syncResult(
  instanceId: string,
  deps: SyncDependencies,
  sync: () => Promise<SyncNodeSummary>,
): Promise<SyncResult> {
  try {
    return { instanceId, ok: true, summary: await sync() };
  } catch (error) {
    const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    deps.log.error('sync failed', { instanceId, error: message });
    return { instanceId, ok: false, error: message };
  }
}

/** Some nodes of a sync-all failed; the others were synced. */
export class SyncAllFailedError extends Error {
  override readonly name = 'SyncAllFailedError';
  constructor(readonly summary: SyncAllSummary) {
    super(
      `${summary.failed.length} of ${summary.nodes} nodes failed to sync: ${summary.failed
        .slice(0, 5)
        .map((failure) => `${failure.instanceId} (${failure.error})`)
        .join('; ')}${summary.failed.length > 5 ? '; …' : ''}`,
    );
  }
}
