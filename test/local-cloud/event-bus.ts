import { randomUUID } from 'node:crypto';
import { compileEventPattern } from './event-pattern.ts';
import type { InvocationResult, LambdaErrorPayload } from './lambda-runner.ts';
import type { RuleDefinition, RuleTarget } from './template.ts';

/**
 * The default event bus and Lambda's asynchronous invocation, as the stack's rules use them.
 *
 * EventBridge delivers a matched event to each target of each matching, enabled rule, replacing
 * the event with the target's constant `Input` when one is set. It invokes Lambda asynchronously:
 * Lambda queues the event and, on a function error, retries it twice (after about 1 and 2 minutes,
 * scaled here by `retryDelaysMs`), then drops it (kept here in `failures`, where an on-failure
 * destination would have received it). EventBridge's own RetryPolicy and DLQ only cover failures to
 * hand the event to Lambda, which cannot happen locally.
 */

export interface AsyncInvocationFailure {
  readonly functionLogicalId: string;
  /** What sent the event: `rule:<logicalId>` or `manual`. */
  readonly source: string;
  readonly event: unknown;
  readonly attempts: number;
  readonly error: LambdaErrorPayload;
  readonly atEpochMs: number;
}

export type SyncInvoke = (functionLogicalId: string, event: unknown) => Promise<InvocationResult>;

export interface AsyncInvokerOptions {
  /** Delays before each retry of a failed invocation; its length is the retry count (Lambda: 2). */
  readonly retryDelaysMs: readonly number[];
}

export class AsyncInvoker {
  readonly failures: AsyncInvocationFailure[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  /** Retry waits in progress: their timer, and how to end the wait early on stop. */
  private readonly waits = new Map<NodeJS.Timeout, () => void>();
  private stopped = false;

  constructor(
    private readonly invoke: SyncInvoke,
    private readonly options: AsyncInvokerOptions,
  ) {}

  /** Queues the event (Lambda's `Event` invocation type); the promise settles once it ran or was given up. */
  send(functionLogicalId: string, event: unknown, source: string): Promise<void> {
    const delivery = this.deliver(functionLogicalId, event, source);
    this.inFlight.add(delivery);
    void delivery.finally(() => this.inFlight.delete(delivery));
    return delivery;
  }

  /** Resolves when no asynchronous invocation is queued or running (including ones queued meanwhile). */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  pending(): number {
    return this.inFlight.size;
  }

  stop(): void {
    this.stopped = true;
    for (const [timer, endWait] of this.waits) {
      clearTimeout(timer);
      endWait();
    }
    this.waits.clear();
  }

  private async deliver(functionLogicalId: string, event: unknown, source: string): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      if (this.stopped) return;
      const result = await this.invoke(functionLogicalId, event).catch(
        (error: unknown): { status: 'failed'; error: LambdaErrorPayload } => ({
          status: 'failed',
          error: { errorType: 'InvokeFailed', errorMessage: String((error as Error)?.message ?? error) },
        }),
      );
      if (result.status === 'succeeded') return;
      const delayMs = this.options.retryDelaysMs[attempt];
      if (delayMs === undefined || this.stopped) {
        this.failures.push({
          functionLogicalId,
          source,
          event,
          attempts: attempt + 1,
          error: result.error,
          atEpochMs: Date.now(),
        });
        return;
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.waits.delete(timer);
          resolve();
        }, delayMs);
        this.waits.set(timer, resolve);
      });
    }
  }
}

export interface BusEvent {
  readonly source: string;
  readonly 'detail-type': string;
  readonly detail: unknown;
  readonly [field: string]: unknown;
}

/** Routes events to the targets of the rules whose `EventPattern` matches (schedule-only rules never match). */
export class EventBus {
  private readonly routes: { rule: RuleDefinition; matches: (event: unknown) => boolean }[];
  readonly delivered: {
    readonly eventId: string;
    readonly ruleLogicalId: string;
    readonly targetId: string;
  }[] = [];

  constructor(
    rules: readonly RuleDefinition[],
    private readonly asyncInvoker: AsyncInvoker,
    private readonly envelope: { readonly account: string; readonly region: string },
  ) {
    this.routes = rules
      .filter((rule) => rule.enabled && rule.eventPattern !== undefined)
      .map((rule) => ({ rule, matches: compileEventPattern(rule.eventPattern) }));
  }

  /**
   * PutEvents for one event: fills in the envelope EventBridge adds (`version`, `id`, `time`,
   * `account`, `region`, `resources`) where missing, and delivers it. Resolves once every
   * resulting invocation ran (retries included); returns the logical ids of the matched rules.
   */
  async put(event: BusEvent): Promise<string[]> {
    const full = {
      version: '0',
      id: randomUUID(),
      time: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
      account: this.envelope.account,
      region: this.envelope.region,
      resources: [],
      ...event,
    };
    const matched = this.routes.filter((route) => route.matches(full)).map((route) => route.rule);
    await Promise.all(
      matched.flatMap((rule) =>
        rule.targets.map((target) => {
          this.delivered.push({ eventId: full.id, ruleLogicalId: rule.logicalId, targetId: target.id });
          return this.asyncInvoker.send(
            target.functionLogicalId,
            targetPayload(target, full),
            `rule:${rule.logicalId}`,
          );
        }),
      ),
    );
    return matched.map((rule) => rule.logicalId);
  }
}

/** What a target receives: its constant `Input` when set, else the matched event itself. */
export function targetPayload(target: RuleTarget, event: unknown): unknown {
  return target.input === undefined ? event : structuredClone(target.input);
}
