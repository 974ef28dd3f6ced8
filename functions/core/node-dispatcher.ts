import type { WatchTrigger } from './watch-plan.ts';

/**
 * Deduplicated, bounded serving of watch triggers. At most `concurrency` nodes are served at once;
 * a node is never served twice at the same time: triggers for a queued node merge into its entry,
 * and triggers for a node being served merge into ONE follow-up run after it. Each trigger comes
 * with a `finished` callback (its watch event's progress), called once the run covering it ended,
 * whether it succeeded or not (a failure is the sweep's to retry). Pure scheduling, no I/O.
 */
interface Job {
  trigger: WatchTrigger;
  readonly finishers: (() => void)[];
}

export class NodeDispatcher {
  private readonly queued = new Map<string, Job>();
  private readonly running = new Map<string, { followUp?: Job }>();
  private readonly idleWaiters: (() => void)[] = [];

  constructor(
    private readonly concurrency: number,
    private readonly serve: (trigger: WatchTrigger) => Promise<void>,
  ) {}

  dispatch(trigger: WatchTrigger, finished: () => void): void {
    const active = this.running.get(trigger.instanceId);
    if (active) {
      active.followUp = merge(active.followUp, trigger, finished);
    } else {
      this.queued.set(trigger.instanceId, merge(this.queued.get(trigger.instanceId), trigger, finished));
      this.pump();
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

  private pump(): void {
    for (const [instanceId, job] of this.queued) {
      if (this.running.size >= this.concurrency) return;
      this.queued.delete(instanceId);
      this.run(job);
    }
  }

  private run(job: Job): void {
    const { instanceId } = job.trigger;
    const entry: { followUp?: Job } = {};
    this.running.set(instanceId, entry);
    void this.serve(job.trigger)
      .catch(() => {})
      .finally(() => {
        this.running.delete(instanceId);
        for (const finished of job.finishers) finished();
        if (entry.followUp) this.queued.set(instanceId, entry.followUp);
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
