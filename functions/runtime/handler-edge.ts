import { InvalidInputError } from '../core/errors.ts';
import type { Decoded } from '../core/input-schema.ts';
import type { Log } from '../core/ports.ts';
import type { MetricPoint, MetricsSink } from './metrics.ts';

/**
 * The one edge every Lambda handler goes through, so no handler can differ on these rules:
 * 1. the payload is decoded by the function's schema before anything else runs;
 * 2. a malformed payload is logged with the reason (which names the field) and refused having
 *    written nothing: thrown as `InvalidInputError` to a direct invoke's caller, or answered with
 *    `answerInvalid`'s result where the platform would only retry a throw (EventBridge events);
 * 3. a failure while handling is rethrown as it is, so the platform retries what is transient;
 * 4. the invocation's own point (`invocationMetrics`: what became of it, `failed` when it threw)
 *    and whatever `handle` added are flushed as one EMF document, whatever happened. Powertools
 *    publishes on its own only at 100 stored values, so without the flush a quiet function's
 *    points are lost.
 */
export interface HandlerEdge<Input, Result, Context> {
  readonly log: Log;
  readonly metrics: MetricsSink;
  readonly decode: (event: unknown) => Decoded<Input>;
  /** The answer to a malformed `event`, or undefined to throw (the default: a direct invoke). */
  readonly answerInvalid?: (reason: string, event: unknown) => Result | undefined;
  /** Work to start as soon as the input is known, before `handle` (e.g. loading a lazy client). */
  readonly warmUp?: (input: Input) => void;
  readonly handle: (input: Input, context: Context) => Promise<Result>;
  readonly invocationMetrics: (outcome: InvocationOutcome<Result>) => readonly MetricPoint[];
}

/** What became of an invocation: its result, `rejected` (malformed input) or `failed` (it threw). */
export type InvocationOutcome<Result> =
  | { readonly kind: 'handled'; readonly result: Result }
  | { readonly kind: 'rejected' }
  | { readonly kind: 'failed' };

export function handlerEdge<Input, Result, Context>(
  edge: HandlerEdge<Input, Result, Context>,
): (event: unknown, context: Context) => Promise<Result> {
  return async (event, context) => {
    let outcome: InvocationOutcome<Result> = { kind: 'failed' };
    try {
      const decoded = edge.decode(event);
      if (!decoded.ok) {
        outcome = { kind: 'rejected' };
        return refuse(edge.log, edge.answerInvalid, decoded.reason, event);
      }
      edge.warmUp?.(decoded.value);
      const result = await edge.handle(decoded.value, context);
      outcome = { kind: 'handled', result };
      return result;
    } finally {
      edge.metrics.add(edge.invocationMetrics(outcome));
      edge.metrics.flush();
    }
  };
}

function refuse<Result>(
  log: Log,
  answerInvalid: HandlerEdge<unknown, Result, unknown>['answerInvalid'],
  reason: string,
  event: unknown,
): Result {
  log.error('rejected a malformed payload; nothing was written', { reason });
  const answer = answerInvalid?.(reason, event);
  if (answer === undefined) throw new InvalidInputError(reason);
  return answer;
}

/** One point per invocation of a function whose results need no finer name. */
export function invocationMetrics(outcome: InvocationOutcome<unknown>): MetricPoint[] {
  const status = outcome.kind === 'handled' ? 'completed' : outcome.kind;
  return [{ name: `ipam_invocations_${status}`, value: 1, unit: 'Count' }];
}
