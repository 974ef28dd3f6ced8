import type { CiliumNode } from '../core/ciliumnode.ts';
import type { NodeKnobs } from '../core/model.ts';
import { NodeDispatcher } from '../core/node-dispatcher.ts';
import type {
  CiliumNodeWatchEvent,
  CiliumNodeWatchPort,
  Log,
  NodeServicePort,
  NodeServiceResult,
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

interface WatchSettings {
  /** How long the lease lasts without renewal: how soon a crashed watcher is replaced. */
  readonly leaseMs: number;
  /** Nodes served at a time. */
  readonly concurrency: number;
  /** Most nodes one allocate invocation serves (at once); triggers that arrive together share one. */
  readonly nodesPerInvocation: number;
  /** How long an invocation waits for a holder whose lease is about to end (a seamless handover). */
  readonly standbyMs: number;
  /**
   * The allocate function's node lease (`LEASE_DURATION_SECONDS`): a node whose serving failed
   * (the invocation died, or an error) is asked for again once a lease that invocation may have
   * left behind has run out, so a crash costs the node about one lease, not a sweep interval.
   */
  readonly nodeLeaseMs: number;
}

/** How many times one session asks again for one node (after failures or another's lease). */
const MAX_ASKS_AGAIN_PER_NODE = 3;
/** Past a lease's expiry before asking again: the allocator must see it expired when its reads start. */
const ASK_AGAIN_MARGIN_MS = 500;

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
  /**
   * Nodes handed to the allocate function, those whose invocation failed, (paused) those not
   * handed over, and those asked for again after a failure or another invocation's lease.
   */
  readonly served: { allocate: number; release: number; failed: number; paused: number; askedAgain: number };
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
  private served = { allocate: 0, release: 0, failed: 0, paused: 0, askedAgain: 0 };
  /** Each node's name (for its latest CiliumNode) and how often this session asked for it again. */
  private readonly nodeNames = new Map<string, string>();
  private readonly asksAgain = new Map<string, number>();
  private readonly askAgainTimers = new Set<NodeJS.Timeout>();

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
    if (trigger) this.nodeNames.set(trigger.instanceId, node.metadata.name);
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
    let result: NodeServiceResult;
    try {
      result = await this.deps.nodes.serve(triggers);
    } catch (error) {
      result = {
        failures: triggers.map(({ instanceId }) => ({ instanceId, error: String(error) })),
        held: [],
      };
    }
    this.served.failed += result.failures.length;
    const triggerOf = new Map(triggers.map((trigger) => [trigger.instanceId, trigger]));
    for (const failure of result.failures) {
      this.deps.log.error('the watcher could not serve a node; asking again after a node lease', {
        ...failure,
      });
      this.askAgain(triggerOf.get(failure.instanceId), this.deps.clock() + this.deps.watch.nodeLeaseMs);
    }
    for (const { instanceId, leaseExpiresAtEpochMs } of result.held) {
      this.askAgain(triggerOf.get(instanceId), leaseExpiresAtEpochMs);
    }
  }

  /**
   * Serves the node again just after `leaseExpiresAtEpochMs`, if by then its latest CiliumNode
   * still asks for it (a live holder that served it meanwhile costs nothing more) and the session
   * still runs; at most `MAX_ASKS_AGAIN_PER_NODE` times a session. The sweep covers the rest.
   */
  private askAgain(trigger: WatchTrigger | undefined, leaseExpiresAtEpochMs: number): void {
    if (trigger === undefined || this.stopped.signal.aborted) return;
    const asked = this.asksAgain.get(trigger.instanceId) ?? 0;
    if (asked >= MAX_ASKS_AGAIN_PER_NODE) return;
    this.asksAgain.set(trigger.instanceId, asked + 1);
    const timer = setTimeout(
      () => {
        this.askAgainTimers.delete(timer);
        const name = this.nodeNames.get(trigger.instanceId);
        const latest = name === undefined ? undefined : this.lastSeen.get(name);
        const still = latest && watchTrigger(undefined, latest, this.deps.defaultKnobs);
        if (!still || this.stopped.signal.aborted) return;
        this.served.askedAgain++;
        this.deps.log.info('asking again for a node whose serving failed or was held', { ...still });
        this.dispatcher.dispatch(still, () => {});
      },
      Math.max(leaseExpiresAtEpochMs + ASK_AGAIN_MARGIN_MS - this.deps.clock(), 0),
    );
    this.askAgainTimers.add(timer);
  }

  /** Waits for the nodes being served; a node not yet asked for again is left to the sweep. */
  drain(): Promise<void> {
    for (const timer of this.askAgainTimers) clearTimeout(timer);
    this.askAgainTimers.clear();
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
  return {
    events: 0,
    relists: 0,
    reconnects: 0,
    served: { allocate: 0, release: 0, failed: 0, paused: 0, askedAgain: 0 },
  };
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
