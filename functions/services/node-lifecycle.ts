import { isEc2Failure } from '../core/ec2-failure.ts';
import { ENI_TAG_KEYS, isOurs } from '../core/eni-ownership.ts';
import type { NodeRecord } from '../core/model.ts';
import { type NodeRecordContent, recordedContent } from '../core/node-record.ts';
import type { Ec2NetworkPort, Log, NodeRecordStore } from '../core/ports.ts';
import { retryLostRaces, writeNextVersion } from './node-lease.ts';

/**
 * The end of a node's life: retiring its record when the instance terminates (deleting the ENIs
 * EC2 does not delete itself), draining it on a spot interruption warning, and collecting ENIs of
 * ours that nothing references any more.
 */

export interface LifecycleDependencies {
  readonly store: NodeRecordStore;
  readonly ec2: Ec2NetworkPort;
  readonly clock: () => number;
  readonly log: Log;
  readonly clusterName: string;
  /** How long a retired record stays for audit before DynamoDB's TTL removes it. */
  readonly retiredRecordRetentionDays: number;
}

export type RetireOutcome =
  | {
      readonly kind: 'retired';
      readonly deletedEniIds: readonly string[];
      readonly leftForGarbageCollection: number;
    }
  | { readonly kind: 'skipped'; readonly reason: 'no-record' | 'already-retired' | 'instance-alive' };

const TERMINAL_STATES = new Set(['shutting-down', 'terminated']);

/**
 * Retires a terminated instance's node: deletes the ENIs of ours that were not delete-on-termination
 * (once EC2 has detached them; an ENI still attached is left to garbage collection, which deletes it
 * once detached), then marks the record retired with a TTL. An instance that is not shutting down or
 * terminated (events are unordered: a stale `terminated` may never describe a live instance) is left
 * alone; a stopped instance keeps its ENIs and record. Idempotent.
 */
export async function retireNode(instanceId: string, deps: LifecycleDependencies): Promise<RetireOutcome> {
  return retryLostRaces(instanceId, async (): Promise<RetireOutcome> => {
    const record = await deps.store.get(instanceId);
    if (!record) return { kind: 'skipped', reason: 'no-record' };
    if (record.lifecycle === 'retired') return { kind: 'skipped', reason: 'already-retired' };
    const instance = await deps.ec2.describeInstance(instanceId);
    if (instance && !TERMINAL_STATES.has(instance.state))
      return { kind: 'skipped', reason: 'instance-alive' };
    const { deletedEniIds, leftForGarbageCollection } = await deleteDetachedEnis(record, deps);
    const now = deps.clock();
    // The lease goes with the node: nothing allocates to a retired record.
    await writeNextVersion(
      record,
      {
        ...recordedContent(record),
        lifecycle: 'retired',
        expiresAtEpochSeconds: Math.floor(now / 1000) + deps.retiredRecordRetentionDays * 86_400,
      },
      deps,
    );
    deps.log.info('node retired', { instanceId, deletedEniIds, leftForGarbageCollection });
    return { kind: 'retired', deletedEniIds, leftForGarbageCollection };
  });
}

/**
 * Deletes the node's ENIs of ours that EC2 does not delete itself (not delete-on-termination),
 * once EC2 has detached them; one still attached is left to garbage collection.
 */
async function deleteDetachedEnis(
  record: NodeRecord,
  deps: LifecycleDependencies,
): Promise<{ readonly deletedEniIds: string[]; readonly leftForGarbageCollection: number }> {
  const deletedEniIds: string[] = [];
  let leftForGarbageCollection = 0;
  for (const eni of record.enis) {
    if (eni.deleteOnTermination || !isOurs(eni.tags, deps.clusterName)) continue;
    try {
      await deps.ec2.deleteEni(eni.id);
      deletedEniIds.push(eni.id);
    } catch (error) {
      if (!isEc2Failure(error, 'in-use')) throw error;
      leftForGarbageCollection++;
    }
  }
  return { deletedEniIds, leftForGarbageCollection };
}

/**
 * A draining node whose instance is `running` again (a `running` state change after the warning:
 * the instance was not terminated after all, e.g. stopped and started) is served again: its
 * record becomes `active`. Anything else is left as it is. Idempotent.
 */
export async function reactivateNode(
  instanceId: string,
  deps: LifecycleDependencies,
): Promise<'reactivated' | 'skipped'> {
  return retryLostRaces(instanceId, async () => {
    const record = await deps.store.get(instanceId);
    if (record?.lifecycle !== 'draining') return 'skipped';
    const instance = await deps.ec2.describeInstance(instanceId);
    if (instance?.state !== 'running') return 'skipped';
    await writeNextVersion(record, withLifecycle(record, 'active'), deps);
    deps.log.info('draining node running again; serving it', { instanceId });
    return 'reactivated';
  });
}

/**
 * A spot interruption warning whose `instance-action` is `terminate`: the instance goes away in two
 * minutes, so nothing new is allocated to it (allocation ignores nodes that are not `active`). Its
 * ENIs stay until termination. The handler does not drain on `stop` or `hibernate`: that instance
 * comes back with the same id and ENIs, and must be served then.
 */
export async function drainNode(
  instanceId: string,
  deps: LifecycleDependencies,
): Promise<'drained' | 'skipped'> {
  return retryLostRaces(instanceId, async () => {
    const record = await deps.store.get(instanceId);
    if (record?.lifecycle !== 'active') return 'skipped';
    await writeNextVersion(record, withLifecycle(record, 'draining'), deps);
    deps.log.info('node draining after a spot interruption warning', { instanceId });
    return 'drained';
  });
}

/**
 * The record's content in another stage of life. A lease stays: an invocation that claimed the
 * node before the change keeps it until it releases it or it expires, so no other one mutates the
 * node meanwhile.
 */
function withLifecycle(record: NodeRecord, lifecycle: NodeRecord['lifecycle']): NodeRecordContent {
  return { ...recordedContent(record), ...(record.lease ? { lease: record.lease } : {}), lifecycle };
}

export interface GarbageCollectionSettings {
  /** ENIs younger than this are left alone: an invocation may be about to attach or adopt them. */
  readonly graceMs: number;
  /** Deletions per run, bounding the draw on EC2's DeleteNetworkInterface bucket. */
  readonly maxDeletionsPerRun: number;
}

export interface GarbageCollectionSummary {
  readonly candidates: number;
  readonly deleted: readonly string[];
  readonly referenced: number;
  readonly tooYoung: number;
  readonly failed: number;
}

/**
 * Deletes detached ENIs carrying our ownership tags for this cluster that no live record references
 * and that are older than the grace period. Never an ENI without our tags: the EC2 query asks for
 * them, and each candidate is checked again here.
 */
export async function collectEniGarbage(
  deps: LifecycleDependencies,
  settings: GarbageCollectionSettings,
): Promise<GarbageCollectionSummary> {
  const [candidates, records] = await Promise.all([
    deps.ec2.findDetachedEnisOfCluster(),
    allRecords(deps.store),
  ]);
  const referenced = new Set(
    records
      .filter((record) => record.lifecycle !== 'retired')
      .flatMap((record) => record.enis.map((eni) => eni.id)),
  );
  const now = deps.clock();
  const deleted: string[] = [];
  let referencedCount = 0;
  let tooYoung = 0;
  let failed = 0;
  for (const eni of candidates) {
    if (!isOurs(eni.tags, deps.clusterName) || eni.status !== 'available') continue;
    if (referenced.has(eni.id)) {
      referencedCount++;
      continue;
    }
    const createdAt = Number(eni.tags[ENI_TAG_KEYS.createdAt]);
    if (!Number.isFinite(createdAt) || now - createdAt < settings.graceMs) {
      tooYoung++;
      continue;
    }
    if (deleted.length >= settings.maxDeletionsPerRun) break;
    try {
      await deps.ec2.deleteEni(eni.id);
      deleted.push(eni.id);
    } catch (error) {
      failed++;
      deps.log.warn('could not delete a leaked ENI; next run retries', {
        eniId: eni.id,
        error: String(error),
      });
    }
  }
  const summary = { candidates: candidates.length, deleted, referenced: referencedCount, tooYoung, failed };
  deps.log.info('ENI garbage collection', { ...summary, deleted: deleted.length, deletedEniIds: deleted });
  return summary;
}

async function allRecords(store: NodeRecordStore): Promise<NodeRecord[]> {
  const records: NodeRecord[] = [];
  let pageToken: string | undefined;
  do {
    const page = await store.listPage(pageToken);
    records.push(...page.records);
    pageToken = page.nextPageToken;
  } while (pageToken);
  return records;
}
