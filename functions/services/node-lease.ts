import { LeaseLostError, VersionConflictError } from '../core/errors.ts';
import type { MutationLease, NodeRecord } from '../core/model.ts';
import {
  isLeasedByOther,
  leaseFor,
  leaseTiming,
  type NodeRecordContent,
  nextNodeRecord,
  recordedContent,
} from '../core/node-record.ts';
import type { Ec2NetworkPort, Log, NodeRecordStore } from '../core/ports.ts';

/**
 * How every service writes a node's record, in one place:
 * - `writeNextVersion`: one conditional write of the next version (`nextNodeRecord`);
 * - `NodeLease`: the claim a service holds on the node across its EC2 mutations (claim, then
 *   checkpoints of what EC2 confirmed, renewals while it works, then release), so
 *   AssignPrivateIpAddresses and the other calls that are not idempotent run once per need however
 *   many invocations see the same event; `fencedNetwork` puts the lease in front of each mutation;
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
  readonly log: Log;
  /**
   * Calls `wake` once `delayMs` of real time has passed; returns what cancels it. Default: an
   * unref'd `setTimeout`. The heartbeat only wakes on it and asks `clock` whether a renewal is due,
   * so under a test's manual clock that does not move it renews nothing.
   */
  readonly wakeAfter?: (delayMs: number, wake: () => void) => () => void;
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

/** An unref'd timer: a heartbeat never keeps a process alive on its own. */
function wakeWithTimer(delayMs: number, wake: () => void): () => void {
  const timer = setTimeout(wake, delayMs);
  timer.unref?.();
  return () => clearTimeout(timer);
}

/**
 * This invocation's claim on a node, short and renewed while its holder works.
 *
 * The contract:
 * 1. The claim is a write conditional on the version the invocation observed, so of two
 *    invocations that observed the same version only one holds the node. The lease runs for
 *    `leaseDurationMs` (15 s by default) from each write of it.
 * 2. While the holder works, a heartbeat renews it: once `renewalIntervalMs` (a third of the lease)
 *    passed without a write, the record is written again as it stands, with a later expiry, as the
 *    next version and conditional on the last one this lease wrote. Nothing is renewed before the
 *    first interval, so an invocation that is done sooner pays nothing for it; each checkpoint
 *    renews the lease too. The heartbeat stops at the release, at `stop`, when a renewal finds the
 *    lease taken, and `maxHoldMs` after the claim at the latest.
 * 3. Before each EC2 mutation (`beforeMutation`, which `fencedNetwork` calls): a lease a renewal
 *    found taken stops the work (`LeaseLostError`); a lease with less than `mutationMarginMs` left
 *    (the heartbeat came late, a pause, a slow write) is renewed first, and the mutation waits for
 *    that write. So no mutation starts on a lease that lapsed or lapses within the margin.
 * 4. Every write of the lease (claim, renewal, checkpoint, release) is conditional on the version
 *    it last wrote, one at a time, so a holder whose lease lapsed and was taken can never write
 *    over the new holder: its next write fails its condition. If nobody took the node meanwhile,
 *    the write succeeds and the lease is the holder's again, as if it had never lapsed.
 *
 * Why a lapse in the middle of AssignPrivateIpAddresses (not idempotent) cannot assign twice for
 * one need: the holder started the call with at least the margin (5 s) of its lease left (3). The
 * next holder takes the node only after reading a lease that had expired when its observation
 * began (`observeNode` checks the lease at the time the reads started), and it plans from its own
 * DescribeNetworkInterfaces of the instance, issued after that expiry, not from the record. So the
 * old holder's call was sent at least the margin before the next holder's Describe: whatever EC2
 * assigned for it is in that Describe, and the next holder counts those addresses instead of asking
 * again. The old holder's own record of them is fenced (4); the next holder records them from EC2.
 * What this assumes: the invocations' clocks agree to well within the margin, and an EC2 call
 * reaches EC2 within the margin of being sent (the SDK's retries of a call keep the lease renewed
 * while they wait, since the heartbeat runs beside them; only a holder whose renewals fail for two
 * intervals while its retries go on could send one later).
 */
export class NodeLease {
  private writes: Promise<unknown> = Promise.resolve();
  private lost: LeaseLostError | undefined;
  private stopped = false;
  private cancelWake: (() => void) | undefined;
  private readonly claimedAtEpochMs: number;
  private readonly timing: ReturnType<typeof leaseTiming>;
  /** Renewal writes so far (claims and checkpoints not counted). */
  renewals = 0;

  private constructor(
    private current: NodeRecord,
    private readonly deps: LeaseHolderDependencies,
  ) {
    this.claimedAtEpochMs = deps.clock();
    this.timing = leaseTiming(deps.settings.leaseDurationMs);
    this.scheduleHeartbeat();
  }

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

  /** Contract point 3: resolves when an EC2 mutation may start now; throws when it may not. */
  async beforeMutation(): Promise<void> {
    await this.writes;
    if (this.lost) throw this.lost;
    const renewBy = this.expiresAtEpochMs() - this.timing.mutationMarginMs;
    if (this.deps.clock() >= renewBy) await this.renewIfDue(() => renewBy);
  }

  /** Makes what EC2 confirmed so far durable, lease kept (and renewed). */
  async checkpoint(content: NodeRecordContent): Promise<void> {
    await this.write(() => leased(content, this.deps));
  }

  /**
   * Writes the final content without the lease and stops the heartbeat. `content` may be computed
   * from the version the release will have (a withdrawal stamped with it), after any renewal in
   * flight has landed.
   */
  async release(content: NodeRecordContent | ((version: number) => NodeRecordContent)): Promise<NodeRecord> {
    this.stop();
    await this.write(() => {
      const { lease: _released, ...unleased } =
        typeof content === 'function' ? content(this.nextVersion) : content;
      return unleased;
    });
    if (this.renewals > 0) {
      this.deps.log.info('the node lease was renewed while its holder worked', {
        instanceId: this.current.instanceId,
        renewals: this.renewals,
        heldMs: this.deps.clock() - this.claimedAtEpochMs,
      });
    }
    return this.current;
  }

  /** Stops the heartbeat (idempotent); the lease then lapses unless a write renews it. */
  stop(): void {
    this.stopped = true;
    this.cancelWake?.();
    this.cancelWake = undefined;
  }

  private expiresAtEpochMs(): number {
    return this.current.lease?.expiresAtEpochMs ?? this.current.updatedAtEpochMs;
  }

  /** When the heartbeat renews: once `renewalIntervalMs` passed since the lease was last written. */
  private heartbeatDueAtEpochMs(): number {
    return this.expiresAtEpochMs() - this.deps.settings.leaseDurationMs + this.timing.renewalIntervalMs;
  }

  /**
   * One write at a time, each on the version the last one wrote (`contentOf` is asked once the
   * writes before it landed; `undefined`: nothing to write). A lost race marks the lease lost.
   */
  private write(contentOf: () => NodeRecordContent | undefined): Promise<boolean> {
    const run = this.writes.then(async () => {
      if (this.lost) throw this.lost;
      const content = contentOf();
      if (content === undefined) return false;
      try {
        this.current = await writeNextVersion(this.current, content, this.deps);
      } catch (error) {
        if (error instanceof VersionConflictError) this.lost = lostFrom(error);
        throw error;
      }
      this.scheduleHeartbeat();
      return true;
    });
    this.writes = run.catch(() => undefined);
    return run;
  }

  /** The renewal: the record as it stands with a later expiry, unless a write since made it not due. */
  private async renewIfDue(dueAtEpochMs: () => number): Promise<void> {
    const due = () =>
      this.deps.clock() >= dueAtEpochMs() ? leased(recordedContent(this.current), this.deps) : undefined;
    try {
      if (await this.write(due)) this.renewals++;
    } catch (error) {
      throw error instanceof VersionConflictError ? lostFrom(error) : error;
    }
  }

  private scheduleHeartbeat(minimumDelayMs = 50): void {
    if (this.stopped) return;
    this.cancelWake?.();
    const delayMs = Math.max(this.heartbeatDueAtEpochMs() - this.deps.clock(), minimumDelayMs);
    this.cancelWake = (this.deps.wakeAfter ?? wakeWithTimer)(delayMs, () => void this.heartbeat());
  }

  /** Contract point 2: renews when due by the clock, else waits again; never throws. */
  private async heartbeat(): Promise<void> {
    this.cancelWake = undefined;
    if (this.stopped) return;
    const fields = { instanceId: this.current.instanceId };
    if (this.deps.clock() - this.claimedAtEpochMs >= this.timing.maxHoldMs) {
      this.deps.log.error('held the node lease for the longest an invocation runs; no more renewals', fields);
      this.stop();
      return;
    }
    try {
      await this.renewIfDue(() => this.heartbeatDueAtEpochMs());
      if (this.cancelWake === undefined) this.scheduleHeartbeat();
    } catch (error) {
      if (error instanceof LeaseLostError) {
        this.deps.log.warn('another invocation took the node lease; stopping before the next EC2 call', {
          ...fields,
          holder: error.current?.lease?.holder,
        });
        this.stop();
        return;
      }
      this.deps.log.warn('could not renew the node lease; trying again', { ...fields, error: String(error) });
      // A failing table is not asked again at once: a fifth of the interval later.
      if (this.cancelWake === undefined) this.scheduleHeartbeat(this.timing.renewalIntervalMs / 5);
    }
  }
}

/** `content` with this invocation's claim, running for the lease duration from now. */
function leased(content: NodeRecordContent, deps: LeaseHolderDependencies): NodeRecordContent {
  return { ...content, lease: leaseFor(deps.invocationId, deps.clock(), deps.settings.leaseDurationMs) };
}

/** The lost race of a lease write, as the holder's stop. */
function lostFrom(conflict: VersionConflictError): LeaseLostError {
  return conflict instanceof LeaseLostError
    ? conflict
    : new LeaseLostError(conflict.instanceId, conflict.expectedVersion, conflict.current, {
        cause: conflict,
      });
}

/**
 * Whether each method of the EC2 port mutates: a method added to the port does not compile here
 * until it is classified, so none escapes the fence.
 */
const EC2_MUTATIONS: Readonly<Record<keyof Ec2NetworkPort, boolean>> = {
  describeInstance: false,
  describeInstances: false,
  describeAttachedEnis: false,
  listClusterInstances: false,
  findDetachedEnisCreatedFor: false,
  findDetachedEnisOfCluster: false,
  describeVpc: false,
  describeSubnets: false,
  describeSecurityGroups: false,
  describeInstanceLimits: false,
  createEni: true,
  attachEni: true,
  setDeleteOnTermination: true,
  assignIps: true,
  assignIpv6Prefixes: true,
  unassignIps: true,
  detachEni: true,
  deleteEni: true,
};

/**
 * `ec2` with `fence` awaited before every mutating call (`NodeLease.beforeMutation`): a holder
 * whose lease was taken stops before its next EC2 mutation, one short of time renews first. Reads
 * pass straight through.
 */
export function fencedNetwork(ec2: Ec2NetworkPort, fence: () => Promise<void>): Ec2NetworkPort {
  return new Proxy(ec2, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function') return value;
      const call = value.bind(target) as (...args: unknown[]) => Promise<unknown>;
      if (EC2_MUTATIONS[property as keyof Ec2NetworkPort] !== true) return call;
      return async (...args: unknown[]) => {
        await fence();
        return call(...args);
      };
    },
  });
}

/** The answer of an attempt that found the node claimed by another invocation. */
export interface BackOff<T> {
  readonly holder: { readonly invocationId: string; readonly clock: () => number; readonly log: Log };
  /** The answer; `lease`: the winner's claim as the conflict returned it (its expiry). */
  readonly busy: (leaseHolder: string, lease?: MutationLease) => T;
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
        return backOff.busy(error.current?.lease?.holder ?? '', error.current?.lease);
      }
      holder.log.info('node record changed under us; re-planning', { instanceId, attempt: attemptNumber });
    }
  }
}
