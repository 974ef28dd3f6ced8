import { VersionConflictError } from '../core/errors.ts';
import type { NodeRecord } from '../core/model.ts';
import { isLeasedByOther, leaseFor, type NodeRecordContent, nextNodeRecord } from '../core/node-record.ts';
import type { Log, NodeRecordStore } from '../core/ports.ts';

/**
 * How every service writes a node's record, in one place:
 * - `writeNextVersion`: one conditional write of the next version (`nextNodeRecord`);
 * - `NodeLease`: the claim a service holds on the node across its EC2 mutations (claim, then
 *   checkpoints of what EC2 confirmed, then release), so AssignPrivateIpAddresses and the other
 *   calls that are not idempotent run once per need however many invocations see the same event;
 * - `retryLostRaces`: the bounded re-run of a whole observe-plan-act attempt when a conditional
 *   write lost to another writer, backing off when the winner is another holder's live claim.
 */

export interface RecordWriter {
  readonly store: NodeRecordStore;
  readonly clock: () => number;
}

export interface LeaseHolderDependencies extends RecordWriter {
  /** Identifies this invocation as a lease holder (e.g. the Lambda request id). */
  readonly invocationId: string;
  readonly settings: { readonly leaseDurationMs: number };
}

/** How many times an attempt runs before a lost conditional write is thrown to the caller. */
export const MAX_RECORD_ATTEMPTS = 3;

/**
 * Writes the next version of `base` (absent: the node's first record) with `content`, conditional
 * on `base`'s version; throws `VersionConflictError` when another write came first.
 */
export async function writeNextVersion(
  base: NodeRecord | undefined,
  content: NodeRecordContent,
  deps: RecordWriter,
): Promise<NodeRecord> {
  const next = nextNodeRecord(base, content, deps.clock());
  await deps.store.put(next, base?.version);
  return next;
}

/**
 * This invocation's claim on a node. Claimed by a write conditional on the version the
 * invocation observed, so of two invocations that observed the same version only one holds it.
 * Each checkpoint makes what EC2 confirmed so far durable, lease kept; the release writes the
 * final content without the lease. Any write that loses throws `VersionConflictError`.
 */
export class NodeLease {
  private constructor(
    private current: NodeRecord,
    private readonly deps: LeaseHolderDependencies,
  ) {}

  static async claim(
    base: NodeRecord | undefined,
    content: NodeRecordContent,
    deps: LeaseHolderDependencies,
  ): Promise<NodeLease> {
    return new NodeLease(await writeNextVersion(base, leased(content, deps), deps), deps);
  }

  /** The last version this lease wrote. */
  get record(): NodeRecord {
    return this.current;
  }

  /** The version the next write of this lease will have. */
  get nextVersion(): number {
    return this.current.version + 1;
  }

  async checkpoint(content: NodeRecordContent): Promise<void> {
    this.current = await writeNextVersion(this.current, leased(content, this.deps), this.deps);
  }

  async release(content: NodeRecordContent): Promise<NodeRecord> {
    const { lease: _released, ...unleased } = content;
    this.current = await writeNextVersion(this.current, unleased, this.deps);
    return this.current;
  }
}

/** `content` with this invocation's claim, running for the lease duration from now. */
function leased(content: NodeRecordContent, deps: LeaseHolderDependencies): NodeRecordContent {
  return { ...content, lease: leaseFor(deps.invocationId, deps.clock(), deps.settings.leaseDurationMs) };
}

/** The answer of an attempt that found the node claimed by another invocation. */
export interface BackOff<T> {
  readonly holder: { readonly invocationId: string; readonly clock: () => number; readonly log: Log };
  readonly busy: (leaseHolder: string) => T;
}

/**
 * Runs `attempt` (1, 2, …) until it answers, re-running it when a conditional write of its lost
 * (`VersionConflictError`): the record moved between its read and its write, so it observes and
 * plans again. At most `MAX_RECORD_ATTEMPTS` runs, then the conflict is thrown. With `backOff`,
 * a conflict whose winner is another invocation's live claim answers `busy` instead: that
 * invocation owns the node until it is done.
 */
export async function retryLostRaces<T>(
  instanceId: string,
  attempt: (attemptNumber: number) => Promise<T>,
  backOff?: BackOff<T>,
): Promise<T> {
  for (let attemptNumber = 1; ; attemptNumber++) {
    try {
      return await attempt(attemptNumber);
    } catch (error) {
      if (!(error instanceof VersionConflictError) || attemptNumber >= MAX_RECORD_ATTEMPTS) throw error;
      if (backOff === undefined) continue;
      const { holder } = backOff;
      if (isLeasedByOther(error.current, holder.invocationId, holder.clock())) {
        return backOff.busy(error.current?.lease?.holder ?? '');
      }
      holder.log.info('node record changed under us; re-planning', { instanceId, attempt: attemptNumber });
    }
  }
}
