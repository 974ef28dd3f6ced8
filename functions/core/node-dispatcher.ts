import type { WatchTrigger } from './watch-plan.ts';

/**
 * Deduplicated, bounded, batched serving of watch triggers. At most `concurrency` nodes are served
 * at once, in batches of at most `batchSize` nodes (one allocate invocation each); a node is never
 * served twice at the same time: triggers for a queued node merge into its entry, and triggers for
 * a node being served merge into ONE follow-up run after it. Triggers that arrive together (in one
 * turn of the event loop: one chunk of the watch stream, one relist) go out together: `schedule`
 * defers the batching to the end of that turn. Each trigger comes with a `finished` callback (its
 * watch event's progress), called once the batch covering it ended, whether it succeeded or not (a
 * failure is the sweep's to retry). Pure scheduling, no I/O.
 */
interface Job {
  trigger: WatchTrigger;
  readonly finishers: (() => void)[];
}

export interface DispatcherLimits {
  /** Nodes served at once, over every batch in flight. */
  readonly concurrency: number;
  /** Most nodes in one batch. */
  readonly batchSize: number;
  /** Runs `pump` once the triggers arriving now are in (default: at once, unbatched arrival). */
  readonly schedule?: (pump: () => void) => void;
}

export class NodeDispatcher {
  private readonly queued = new Map<string, Job>();
  private readonly running = new Map<string, { followUp?: Job }>();
  private readonly idleWaiters: (() => void)[] = [];
  private pumpScheduled = false;

  constructor(
    private readonly limits: DispatcherLimits,
    private readonly serve: (triggers: readonly WatchTrigger[]) => Promise<void>,
  ) {}

  dispatch(trigger: WatchTrigger, finished: () => void): void {
    const active = this.running.get(trigger.instanceId);
    if (active) {
      active.followUp = merge(active.followUp, trigger, finished);
    } else {
      this.queued.set(trigger.instanceId, merge(this.queued.get(trigger.instanceId), trigger, finished));
      this.schedulePump();
    }
  }

  /** Nodes queued or being served. */
  size(): number {
    return this.queued.size + this.running.size;
  }

  /** Resolves once nothing is queued or being served. */
  idle(): Promise<void> {
    if (this.size() === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    const schedule = this.limits.schedule ?? ((pump: () => void) => pump());
    schedule(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  /** Starts batches while node slots are free: each takes as many queued nodes as fit, up to `batchSize`. */
  private pump(): void {
    while (this.queued.size > 0) {
      const free = this.limits.concurrency - this.running.size;
      if (free <= 0) return;
      const batch: Job[] = [];
      for (const [instanceId, job] of this.queued) {
        if (batch.length >= Math.min(free, this.limits.batchSize)) break;
        this.queued.delete(instanceId);
        batch.push(job);
      }
      this.run(batch);
    }
  }

  private run(batch: readonly Job[]): void {
    const entries = batch.map((job) => {
      const entry: { followUp?: Job } = {};
      this.running.set(job.trigger.instanceId, entry);
      return entry;
    });
    void this.serve(batch.map((job) => job.trigger))
      .catch(() => {})
      .finally(() => {
        batch.forEach((job, index) => {
          this.running.delete(job.trigger.instanceId);
          for (const finished of job.finishers) finished();
          const followUp = entries[index]?.followUp;
          if (followUp) this.queued.set(job.trigger.instanceId, followUp);
        });
        this.pump();
        if (this.size() === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
      });
  }
}

function merge(job: Job | undefined, trigger: WatchTrigger, finished: () => void): Job {
  if (!job) return { trigger, finishers: [finished] };
  job.trigger = {
    instanceId: trigger.instanceId,
    allocate: job.trigger.allocate || trigger.allocate,
    release: job.trigger.release || trigger.release,
  };
  job.finishers.push(finished);
  return job;
}
