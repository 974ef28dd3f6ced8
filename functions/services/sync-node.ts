import {
  type CiliumNode,
  CiliumNodeNotFoundError,
  type CiliumNodePort,
  ResourceVersionConflictError,
} from '../core/ciliumnode.ts';
import { CrdFieldDroppedError } from '../core/errors.ts';
import type { NodeRecord } from '../core/model.ts';
import type { Log, NodeRecordStore } from '../core/ports.ts';
import {
  enisWithDroppedIpv6Prefixes,
  planSyncStep,
  type SyncEnd,
  type SyncRefusal,
  type SyncStep,
  type SyncWriteStep,
} from '../core/sync-plan.ts';

/**
 * The sync: makes a node's CiliumNode show one consistent version of its node record, one planned
 * write at a time (`planSyncStep`), re-reading and re-planning whenever a write loses a race.
 *
 * Read order, every round: the CiliumNode FIRST, then the record (strongly consistent). Any sync
 * write visible in the CiliumNode we read was planned from a record version that was committed
 * before we read the CiliumNode, so our record read returns that version or a newer one; and our
 * write only lands if the CiliumNode is still at the resourceVersion we read. So no write of ours
 * can carry an older record version than one already applied (invariant 2), even when an agent
 * restart has replaced the CiliumNode's annotations (cilium agents set `ObjectMeta.Annotations` to
 * the Node's annotations on every start, wiping our record-version annotation) or when a newer
 * sync applied its status but died before its spec write. The response of each write serves as
 * the next CiliumNode read.
 */

export type SyncOutcome =
  | 'written'
  /** The sync wrote the record version (or part of it) to the CiliumNode. */
  | 'written'
  /** The planner's reasons for writing nothing (more), and for refusing to write at all. */
  | SyncEnd
  | SyncRefusal
  | 'no-record'
  | 'paused';

export interface SyncNodeSummary {
  readonly instanceId: string;
  readonly outcome: SyncOutcome;
  /** CiliumNode writes that succeeded (create and patches). */
  readonly writes: number;
  /** Writes that lost a race (resourceVersion changed, object created or deleted meanwhile). */
  readonly conflicts: number;
  readonly nodeName?: string;
  /** The record version the last plan was made from. */
  readonly recordVersion?: number;
}

export interface SyncDependencies {
  readonly store: Pick<NodeRecordStore, 'get' | 'listPage'>;
  readonly ciliumNodes: CiliumNodePort;
  readonly log: Log;
  /**
   * The node table's generation (`<table>@<creation time>`, read once per container with
   * DescribeTable): what the record-version annotation counts in, and the stamp a record must
   * carry to be published. Absent: versions are compared as they are (no table check).
   */
  readonly tableGeneration?: () => Promise<string>;
  /**
   * The stack is paused (the hand-over from cilium-operator, or the rollback to it): no CiliumNode
   * is written, so the allocator that serves the nodes meanwhile is never contradicted.
   */
  readonly paused?: boolean;
  /**
   * Plan/write rounds per node before giving up with `SyncDidNotConvergeError`. Without contention a
   * sync needs at most 5 (create, claim, status, spec, confirm); the rest absorb lost races.
   * Default 12.
   */
  readonly maxRounds?: number;
}

/** A node's sync kept losing races (or the plan did not settle) within its round budget. */
class SyncDidNotConvergeError extends Error {
  override readonly name = 'SyncDidNotConvergeError';
  constructor(
    readonly instanceId: string,
    readonly rounds: number,
    readonly writes: number,
    readonly conflicts: number,
  ) {
    super(
      `sync of ${instanceId} did not settle within ${rounds} rounds (${writes} writes, ${conflicts} conflicts); retry later`,
    );
  }
}

const DEFAULT_MAX_ROUNDS = 12;

/** "Read the CiliumNode before planning", as opposed to a CiliumNode a write just returned. */
const UNREAD = Symbol('unread');

/**
 * Where a sync may start without reading anything: a record version the caller itself just wrote
 * with a conditional put, and the CiliumNode as the caller read it BEFORE that write (the
 * allocator's observation). Safe for the same reason as the read order above: every sync write
 * visible in that CiliumNode was planned from a version committed before the caller's conditional
 * write succeeded, hence older than `record`; and every write is still tested against the
 * resourceVersion read, so anything that changed the CiliumNode since makes it re-read.
 */
export interface SyncStart {
  readonly record: NodeRecord;
  readonly ciliumNode: CiliumNode | undefined;
}

/**
 * Syncs one node. Idempotent: a redelivered or repeated call finds everything matching and writes
 * nothing. Throws on transient failures (API server, DynamoDB) and `SyncDidNotConvergeError`, so the
 * caller's platform retries; a foreign or unpublishable CiliumNode is logged as an error and
 * reported in the outcome, never written and never retried (retrying cannot fix it).
 */
export async function syncNode(
  instanceId: string,
  deps: SyncDependencies,
  start?: SyncStart,
): Promise<SyncNodeSummary> {
  const initial = start?.record ?? (await deps.store.get(instanceId));
  if (initial === undefined) return finish(noRecord(instanceId), deps);
  const settled = settledBeforeReading(instanceId, initial, deps);
  if (settled !== undefined) return settled;
  const table = await deps.tableGeneration?.();
  const maxRounds = deps.maxRounds ?? DEFAULT_MAX_ROUNDS;
  return await syncInRounds({ instanceId, nodeName: initial.nodeName, table, maxRounds }, deps, start);
}

/**
 * The plan/write rounds of `syncNode`, at most `sync.maxRounds`: each round plans one step from the
 * record and the CiliumNode, and either ends the sync (a step that writes nothing) or writes it.
 * A write's response is the next round's CiliumNode; a write that lost a race makes the next round
 * read both again. Throws `SyncDidNotConvergeError` when the rounds run out.
 */
async function syncInRounds(
  sync: {
    readonly instanceId: string;
    /** The node name of the record the sync started from. */
    readonly nodeName: string;
    readonly table: string | undefined;
    readonly maxRounds: number;
  },
  deps: SyncDependencies,
  start: SyncStart | undefined,
): Promise<SyncNodeSummary> {
  const { instanceId, table, maxRounds } = sync;
  let nodeName = sync.nodeName;
  let ciliumNode: CiliumNode | undefined | typeof UNREAD = start ? start.ciliumNode : UNREAD;
  let writes = 0;
  let conflicts = 0;
  let record: NodeRecord | undefined = start?.record;
  for (let round = 0; round < maxRounds; round++) {
    // The record is read after every fresh read of the CiliumNode, never before it. After a
    // successful write the CiliumNode is that write's response, which holds nothing newer than
    // the record it was planned from, so that record is planned from again without a re-read.
    if (ciliumNode === UNREAD || record === undefined) {
      ({ ciliumNode, record } = await readCiliumNodeThenRecord(instanceId, nodeName, ciliumNode, deps));
    }
    const base = { instanceId, writes, conflicts, nodeName };
    if (record === undefined) return finish({ ...base, outcome: 'no-record' }, deps);
    if (record.nodeName !== nodeName) {
      nodeName = record.nodeName;
      ciliumNode = UNREAD;
      record = undefined;
      continue;
    }
    const step = planSyncStep(record, ciliumNode, table);
    const summary = { ...base, recordVersion: record.version };
    switch (step.kind) {
      case 'none':
      case 'refuse':
        return syncEnded(step, summary, { record, table, writes }, deps);
      default:
        ciliumNode = await writeUnlessRaceLost(nodeName, step, summary, deps);
        if (ciliumNode === UNREAD) conflicts += 1;
        else writes += 1;
    }
  }
  throw new SyncDidNotConvergeError(instanceId, maxRounds, writes, conflicts);
}

/**
 * One round's reads, in the order the module comment requires: the CiliumNode first (only when
 * `ciliumNode` is `UNREAD`; otherwise it is a write's response and kept), then the record.
 */
async function readCiliumNodeThenRecord(
  instanceId: string,
  nodeName: string,
  ciliumNode: CiliumNode | undefined | typeof UNREAD,
  deps: SyncDependencies,
): Promise<{ ciliumNode: CiliumNode | undefined; record: NodeRecord | undefined }> {
  const current = ciliumNode === UNREAD ? await deps.ciliumNodes.get(nodeName) : ciliumNode;
  return { ciliumNode: current, record: await deps.store.get(instanceId) };
}

/**
 * Writes `step` and returns the CiliumNode the API server stored, or `UNREAD` when the write lost
 * a race (the resourceVersion changed, or the object was created or deleted meanwhile), so the
 * next round reads again and re-plans. Every other error is rethrown for the platform to retry.
 */
async function writeUnlessRaceLost(
  nodeName: string,
  step: SyncWriteStep,
  summary: Omit<SyncNodeSummary, 'outcome'>,
  deps: SyncDependencies,
): Promise<CiliumNode | typeof UNREAD> {
  try {
    const stored = await write(nodeName, step, deps.ciliumNodes);
    deps.log.debug('CiliumNode written', { ...summary, step: step.kind });
    return stored;
  } catch (error) {
    if (!(error instanceof ResourceVersionConflictError || error instanceof CiliumNodeNotFoundError))
      throw error;
    deps.log.debug('CiliumNode write lost a race; re-reading', {
      ...summary,
      step: step.kind,
      error: error.message,
    });
    return UNREAD;
  }
}

/** A sync with nothing to read: a retired record, or a paused deployment; else undefined. */
function settledBeforeReading(
  instanceId: string,
  initial: NodeRecord,
  deps: SyncDependencies,
): SyncNodeSummary | undefined {
  const base = { instanceId, writes: 0, conflicts: 0, recordVersion: initial.version };
  if (initial.lifecycle === 'retired') return finish({ ...base, outcome: 'retired' }, deps);
  if (deps.paused) return finish({ ...base, outcome: 'paused' }, deps);
  return undefined;
}

function noRecord(instanceId: string): SyncNodeSummary {
  return { instanceId, outcome: 'no-record', writes: 0, conflicts: 0 };
}

/** How a sync ends on a step that writes nothing: its outcome, logged as the step's reason asks. */
function syncEnded(
  step: Extract<SyncStep, { kind: 'none' | 'refuse' }>,
  summary: Omit<SyncNodeSummary, 'outcome'>,
  context: { readonly record: NodeRecord; readonly table: string | undefined; readonly writes: number },
  deps: SyncDependencies,
): SyncNodeSummary {
  const { record, table, writes } = context;
  if (step.kind === 'refuse') {
    deps.log.error(
      step.reason === 'refused-foreign'
        ? 'CiliumNode belongs to another instance; nothing written'
        : 'node record cannot be published; nothing written',
      { ...summary, refusedSync: step.reason, detail: step.detail },
    );
    // Logged above, as an error naming the reason.
    return { ...summary, outcome: step.reason };
  }
  switch (step.reason) {
    case 'unreconciled':
      deps.log.info('record not yet reconciled with EC2 in this table; waiting for the allocator', {
        ...summary,
        table,
        reconciledInTable: record.reconciledInTable,
      });
      break;
    case 'superseded':
      deps.log.warn('CiliumNode claimed from a newer node table; this deployment writes nothing', {
        ...summary,
        table,
      });
      break;
    case 'in-sync':
      return finish({ ...summary, outcome: writes > 0 ? 'written' : 'in-sync' }, deps);
  }
  return finish({ ...summary, outcome: step.reason }, deps);
}

async function write(name: string, step: SyncWriteStep, api: CiliumNodePort): Promise<CiliumNode> {
  switch (step.kind) {
    case 'create':
      return await api.create(step.object);
    case 'spec-claim':
    case 'spec':
      return await api.patchMain(name, step.patch);
    case 'status': {
      const stored = await api.patchStatus(name, step.patch);
      // Writing again would never converge: say what the cluster lacks instead.
      const [pruned] = enisWithDroppedIpv6Prefixes(step.enis, stored);
      if (pruned !== undefined)
        throw new CrdFieldDroppedError(name, `status.eni.enis.${pruned}.ipv6-prefixes`);
      return stored;
    }
  }
}

/**
 * Logs the sync's outcome. A node found in sync is logged at debug: the resync finds every node of
 * the cluster in sync every minute, and one INFO line each would be the stack's largest cost that
 * grows with the cluster (infra/README.md, Cost). Its answer counts them instead.
 */
export function finish(summary: SyncNodeSummary, deps: SyncDependencies): SyncNodeSummary {
  if (summary.outcome === 'in-sync') deps.log.debug('sync finished', { ...summary });
  else deps.log.info('sync finished', { ...summary });
  return summary;
}
