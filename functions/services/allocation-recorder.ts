import { allocationContent } from '../core/allocation-content.ts';
import type {
  AllocationObservation,
  AllocationState,
  MutatingStep,
  StepResult,
} from '../core/allocation-round.ts';
import type { CiliumNode } from '../core/ciliumnode.ts';
import { errorMessage } from '../core/errors.ts';
import type { NodeRecord } from '../core/model.ts';
import { recordWouldChange } from '../core/node-record.ts';
import type { Ec2NetworkPort, Log } from '../core/ports.ts';
import { fencedNetwork, type LeaseHolderDependencies, NodeLease, writeNextVersion } from './node-lease.ts';

/**
 * What an allocation writes and publishes across its rounds, in order:
 * - before the first mutation, the claim: a write conditional on the version observed;
 * - before each later mutation, a checkpoint of what EC2 confirmed since the last write, except
 *   when that is only delete-on-termination flags (a crash loses nothing a Describe does not show);
 * - before a `repair` that follows newly recorded addresses (the flag of an ENI just attached),
 *   the publication of that record version, started and not awaited: the addresses become usable
 *   while the flag is set, so ModifyNetworkInterfaceAttribute is off the path to a usable pool.
 *   Publications run one after another; each is a sync from a record version this invocation
 *   wrote, which never overwrites a newer one (`syncNode`);
 * - the release, with the final content (`release`, whether or not a step failed);
 * - once the rounds succeeded, the final word (`finish`): the version the release wrote, or, when
 *   nothing was mutated, the observation written if it differs from the record; published unless
 *   an earlier publication already holds all its addresses.
 * Between them the lease's heartbeat renews the claim while the steps run, and every EC2 mutation
 * of a step goes through `network`, which waits for the lease to be good for it (`NodeLease`).
 */

export interface RecorderDependencies extends LeaseHolderDependencies {
  readonly log: Log;
  /** Publishes a record version to the CiliumNode, from the CiliumNode the observation read. */
  readonly publish: (record: NodeRecord, ciliumNode: CiliumNode | undefined) => Promise<unknown>;
}

export class AllocationRecorder {
  private lease: NodeLease | undefined;
  /** `state.results.length` at the last write, and at the last publication. */
  private recordedResults = 0;
  private publishedResults: number | undefined;
  private publications: Promise<void> = Promise.resolve();

  constructor(
    private readonly observation: AllocationObservation,
    private readonly deps: RecorderDependencies,
  ) {}

  /**
   * `ec2` fenced by this allocation's lease: each mutation starts only once `beforeStep` claimed
   * the node and the lease is good for it (`NodeLease.beforeMutation`); reads pass through.
   */
  network(ec2: Ec2NetworkPort): Ec2NetworkPort {
    return fencedNetwork(ec2, async () => {
      if (this.lease === undefined) throw new Error('an EC2 mutation before the node was claimed');
      await this.lease.beforeMutation();
    });
  }

  /**
   * Makes `state` durable as the next step requires (claim or checkpoint) and starts the early
   * publication before a repair; the version the step runs under (part of a create's ClientToken).
   */
  async beforeStep(step: MutatingStep, state: AllocationState): Promise<number> {
    if (this.lease === undefined) {
      this.lease = await NodeLease.claim(
        this.observation.record,
        allocationContent(this.observation, state),
        this.deps,
      );
      this.recordedResults = state.results.length;
    } else if (!onlyFlags(state.results.slice(this.recordedResults))) {
      await this.lease.checkpoint(allocationContent(this.observation, state));
      this.recordedResults = state.results.length;
    }
    if (step.kind === 'repair' && this.recordedResults === state.results.length) {
      const unpublished = state.results.slice(this.publishedResults ?? 0);
      if (unpublished.some(addsAddresses)) this.startPublication(this.lease.record, state.results.length);
    }
    return this.lease.record.version;
  }

  /**
   * Gives the claim back with the final content and stops its heartbeat (a failure is logged: the
   * lease then expires within one lease duration), then waits for the publications started, so none
   * outlives the invocation.
   */
  async release(state: AllocationState): Promise<void> {
    if (this.lease !== undefined) {
      const content = allocationContent(this.observation, state);
      await this.lease.release(content).catch((error: unknown) =>
        this.deps.log.error('could not release the node lease; it will expire', {
          instanceId: content.instance.id,
          error: errorMessage(error),
        }),
      );
    }
    await this.publications;
  }

  /**
   * The allocation's last word on the record, after `release` once the rounds succeeded: the
   * version the lease last wrote, or, when nothing was mutated (no claim taken), the observation
   * written only when it differs from the record (a new node, drift, changed knobs, a new or cleared
   * error), so a no-op invocation wakes no sync. That version is published unless the early
   * publications already hold all its addresses (the stream's sync still confirms it). Answers the
   * version written, if any.
   */
  async finish(state: AllocationState): Promise<NodeRecord | undefined> {
    const written = this.lease?.record ?? (await this.writeIfChanged(state));
    if (written !== undefined && !this.publishedAll(state)) {
      await publishRecord(written, this.observation.ciliumNode, this.deps);
    }
    return written;
  }

  private async writeIfChanged(state: AllocationState): Promise<NodeRecord | undefined> {
    const content = allocationContent(this.observation, state);
    if (!recordWouldChange(this.observation.record, content)) return undefined;
    return writeNextVersion(this.observation.record, content, this.deps);
  }

  /** Whether the early publications hold every address of `state`. */
  private publishedAll(state: AllocationState): boolean {
    if (this.publishedResults === undefined) return false;
    return !state.results.slice(this.publishedResults).some(addsAddresses);
  }

  private startPublication(record: NodeRecord, results: number): void {
    this.publishedResults = results;
    this.publications = this.publications.then(() =>
      publishRecord(record, this.observation.ciliumNode, this.deps),
    );
  }
}

/** Publishes `record`; a failure is logged, never thrown (the stream's sync publishes it). */
async function publishRecord(
  record: NodeRecord,
  ciliumNode: CiliumNode | undefined,
  deps: Pick<RecorderDependencies, 'publish' | 'log'>,
): Promise<void> {
  await deps.publish(record, ciliumNode).catch((error: unknown) =>
    deps.log.warn('could not publish the record version; the stream sync will', {
      instanceId: record.instanceId,
      recordVersion: record.version,
      error: errorMessage(error),
    }),
  );
}

/** Results that only set delete-on-termination (or failed to). */
function onlyFlags(results: readonly StepResult[]): boolean {
  return (
    results.length > 0 &&
    results.every((result) => result.kind === 'repaired' || result.kind === 'unrepaired')
  );
}

/** Results that give the node addresses a publication makes usable. */
function addsAddresses(result: StepResult): boolean {
  return (
    result.kind === 'assigned' ||
    result.kind === 'adopted' ||
    result.kind === 'created' ||
    result.kind === 'ipv6-assigned'
  );
}
