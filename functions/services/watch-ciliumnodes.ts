import type { CiliumNode } from '../core/ciliumnode.ts';
import type { NodeKnobs } from '../core/model.ts';
import { NodeDispatcher } from '../core/node-dispatcher.ts';
import type {
  CiliumNodeWatchEvent,
  CiliumNodeWatchPort,
  Log,
  NodeServicePort,
  WatchLeaseStore,
} from '../core/ports.ts';
import { type WatchTrigger, watchTrigger } from '../core/watch-plan.ts';
import { WatchProgress } from '../core/watch-progress.ts';

/**
 * The CiliumNode watcher: one invocation holds a watch on every CiliumNode until its deadline and
 * serves exactly the nodes whose demand crossed the watermark or whose release handshake the agent
 * answered (`watchTrigger`), by handing them to the allocate function (`NodeServicePort`), which runs
 * the sweep's release and allocation paths for each; deduplicated, bounded and batched, so nodes
 * whose agents wrote together are served by one invocation at once (`NodeDispatcher`). The
 * watcher itself only lists and watches CiliumNodes: no EC2 call, no node-table access, no
 * Kubernetes write. Paused (`paused`), it watches and logs what it would start, and starts nothing. Single flight through a lease renewed
 * every third of its duration (a crashed holder is replaced once it expires); the lease item keeps
 * the resume point (`WatchProgress`), so the next invocation continues from the last resourceVersion
 * whose work finished: a dropped stream is re-opened from the last event seen, a 410 Gone re-lists.
 */

export interface WatchSettings {
  /** How long the lease lasts without renewal: how soon a crashed watcher is replaced. */
  readonly leaseMs: number;
  /** Nodes served at a time. */
  readonly concurrency: number;
  /** Most nodes one allocate invocation serves (at once); triggers that arrive together share one. */
  readonly nodesPerInvocation: number;
  /** How long an invocation waits for a holder whose lease is about to end (a seamless handover). */
  readonly standbyMs: number;
}

export interface WatchDependencies {
  readonly watcher: CiliumNodeWatchPort;
  readonly leases: WatchLeaseStore;
  /** Runs the work a trigger names, in the allocate function. */
  readonly nodes: NodeServicePort;
  /** The stack's defaults for knobs a CiliumNode does not set (the watermark's pre-allocate). */
  readonly defaultKnobs: NodeKnobs;
  /** The hand-over switch (`eni-ipam:paused`): observe and log, start nothing. */
  readonly paused: boolean;
  readonly watch: WatchSettings;
  readonly invocationId: string;
  readonly clock: () => number;
  readonly log: Log;
  readonly sleep?: (milliseconds: number) => Promise<void>;
}

export interface WatchSummary {
  readonly outcome: 'watched' | 'lease-held' | 'lease-lost';
  /** The resume point the session started its watch from, as it used it; absent when it started with a list. */
  readonly resumedFrom?: string;
  readonly checkpoint?: string;
  readonly events: number;
  readonly relists: number;
  /** Streams re-opened after a drop or failure. */
  readonly reconnects: number;
  /** Nodes handed to the allocate function, those whose invocation failed, and (paused) those not handed over. */
  readonly served: { allocate: number; release: number; failed: number; paused: number };
}

/** Watches until `deadlineEpochMs`, then waits for the nodes being served and hands the lease back. */
export async function watchCiliumNodes(
  deps: WatchDependencies,
  deadlineEpochMs: number,
): Promise<WatchSummary> {
  const lease = await takeLease(deps, deadlineEpochMs);
  if (lease === undefined) return { ...emptySummary(), outcome: 'lease-held' };
  const session = new WatchSession(deps, lease.resourceVersion);
  const renewal = keepLease(deps, session);
  try {
    await session.run(deadlineEpochMs);
  } finally {
    // Still renewing while the nodes being served finish: no successor starts before we end.
    await session.drain();
    renewal.stop();
  }
  const released = await deps.leases.release(deps.invocationId, session.progress.checkpoint());
  const summary = session.summary(released && !session.lost ? 'watched' : 'lease-lost');
  deps.log.info('watch finished', { ...summary });
  return summary;
}

/**
 * The lease. When another invocation holds it and has announced that it ends within `standbyMs`
 * (the schedule's next tick arrives before the holder's deadline), waits for it, so the watch
 * changes hands without a gap; otherwise answers undefined at once.
 */
async function takeLease(deps: WatchDependencies, deadlineEpochMs: number) {
  const sleep = deps.sleep ?? defaultSleep;
  const standbyUntil = Math.min(deps.clock() + deps.watch.standbyMs, deadlineEpochMs);
  for (let attempt = 0; ; attempt++) {
    const taken = await deps.leases.acquire(
      deps.invocationId,
      deps.clock(),
      deps.watch.leaseMs,
      deadlineEpochMs,
    );
    if (taken) return taken;
    const held = await deps.leases.read();
    const endsAt = Math.min(held.endsAtEpochMs ?? Number.POSITIVE_INFINITY, held.leaseExpiresAtEpochMs ?? 0);
    if (endsAt > standbyUntil || deps.clock() >= standbyUntil) {
      deps.log.info('another invocation holds the watch lease; nothing to do', { holder: held.holder });
      return undefined;
    }
    if (attempt === 0)
      deps.log.info('standing by for the watcher that ends soon', { holder: held.holder, endsAt });
    await sleep(Math.max(endsAt - deps.clock(), 250));
  }
}

/** Renews the lease (with the resume point) every third of its duration; losing it stops the watch. */
function keepLease(deps: WatchDependencies, session: WatchSession): { stop(): void } {
  const timer = setInterval(
    () => {
      deps.leases
        .renew(deps.invocationId, deps.clock(), deps.watch.leaseMs, session.progress.checkpoint())
        .then(
          (renewed) => {
            if (!renewed) session.loseLease('the lease was taken over');
          },
          (error: unknown) => deps.log.warn('could not renew the watch lease', { error: String(error) }),
        );
    },
    Math.max(deps.watch.leaseMs / 3, 50),
  );
  return { stop: () => clearInterval(timer) };
}

class WatchSession {
  readonly progress: WatchProgress;
  /** The resume point this session started its watch from (undefined: it started with a list). */
  readonly resumedFrom: string | undefined;
  lost = false;
  private resourceVersion: string | undefined;
  private readonly lastSeen = new Map<string, CiliumNode>();
  private readonly dispatcher: NodeDispatcher;
  private readonly stopped = new AbortController();
  private counts = { events: 0, relists: 0, reconnects: 0 };
  private served = { allocate: 0, release: 0, failed: 0, paused: 0 };

  constructor(
    private readonly deps: WatchDependencies,
    resumeFrom: string | undefined,
  ) {
    this.progress = new WatchProgress(resumeFrom);
    this.resumedFrom = resumeFrom;
    this.resourceVersion = resumeFrom;
    this.dispatcher = new NodeDispatcher(
      {
        concurrency: deps.watch.concurrency,
        batchSize: deps.watch.nodesPerInvocation,
        schedule: (pump) => setImmediate(pump),
      },
      (triggers) => this.serve(triggers),
    );
  }

  loseLease(reason: string): void {
    this.deps.log.warn('lost the watch lease; stopping', { reason });
    this.lost = true;
    this.stopped.abort();
  }

  async run(deadlineEpochMs: number): Promise<void> {
    const timer = setTimeout(() => this.stopped.abort(), Math.max(deadlineEpochMs - this.deps.clock(), 0));
    try {
      for (let failures = 0; !this.stopped.signal.aborted; ) {
        try {
          if (this.resourceVersion === undefined) await this.relist();
          await this.deps.watcher.watch(
            this.resourceVersion as string,
            (event) => this.onEvent(event),
            this.stopped.signal,
          );
          failures = 0;
        } catch (error) {
          failures++;
          this.deps.log.warn('the CiliumNode watch failed; re-opening it', {
            error: String(error),
            failures,
          });
          await abortableSleep(Math.min(100 * 2 ** failures, 5_000), this.stopped.signal);
        }
        if (!this.stopped.signal.aborted) this.counts.reconnects++;
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /** Lists every CiliumNode, serves those a first sight triggers, and watches on from the list. */
  private async relist(): Promise<void> {
    const list = await this.deps.watcher.listWithResourceVersion();
    this.counts.relists++;
    this.lastSeen.clear();
    for (const node of list.items) this.see(node, list.resourceVersion);
    this.progress.addFinished(list.resourceVersion);
    this.resourceVersion = list.resourceVersion;
  }

  private onEvent(event: CiliumNodeWatchEvent): void {
    this.counts.events++;
    switch (event.type) {
      case 'EXPIRED':
        this.deps.log.info('the watch history expired (410 Gone); listing again');
        this.resourceVersion = undefined;
        return;
      case 'BOOKMARK':
        this.progress.addFinished(event.resourceVersion);
        this.resourceVersion = event.resourceVersion;
        return;
      case 'DELETED':
        this.lastSeen.delete(event.object.metadata.name);
        this.progress.addFinished(event.object.metadata.resourceVersion ?? '');
        this.resourceVersion = event.object.metadata.resourceVersion;
        return;
      default:
        this.see(event.object, event.object.metadata.resourceVersion ?? '');
        this.resourceVersion = event.object.metadata.resourceVersion;
    }
  }

  private see(node: CiliumNode, resourceVersion: string): void {
    const trigger = watchTrigger(this.lastSeen.get(node.metadata.name), node, this.deps.defaultKnobs);
    this.lastSeen.set(node.metadata.name, node);
    if (trigger && this.deps.paused) {
      this.served.paused++;
      this.deps.log.info('paused: not serving a node the watcher would serve', { ...trigger });
      this.progress.addFinished(resourceVersion);
    } else if (trigger) this.dispatcher.dispatch(trigger, this.progress.add(resourceVersion));
    else this.progress.addFinished(resourceVersion);
  }

  /** One allocate-function invocation per batch: for each node, release first, then allocation, as the sweep does. */
  private async serve(triggers: readonly WatchTrigger[]): Promise<void> {
    for (const trigger of triggers) {
      if (trigger.release) this.served.release++;
      if (trigger.allocate) this.served.allocate++;
    }
    let failures: readonly { instanceId: string; error: string }[];
    try {
      failures = await this.deps.nodes.serve(triggers);
    } catch (error) {
      failures = triggers.map(({ instanceId }) => ({ instanceId, error: String(error) }));
    }
    this.served.failed += failures.length;
    for (const failure of failures) {
      this.deps.log.error('the watcher could not serve a node; the sweep will', { ...failure });
    }
  }

  drain(): Promise<void> {
    return this.dispatcher.idle();
  }

  summary(outcome: WatchSummary['outcome']): WatchSummary {
    const checkpoint = this.progress.checkpoint();
    const resumedFrom = this.resumedFrom;
    return {
      outcome,
      ...(resumedFrom === undefined ? {} : { resumedFrom }),
      ...(checkpoint === undefined ? {} : { checkpoint }),
      ...this.counts,
      served: { ...this.served },
    };
  }
}

function emptySummary(): Omit<WatchSummary, 'outcome'> {
  return { events: 0, relists: 0, reconnects: 0, served: { allocate: 0, release: 0, failed: 0, paused: 0 } };
}

function defaultSleep(milliseconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, milliseconds));
}

function abortableSleep(milliseconds: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, milliseconds);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
