import { ConfiguredRetryStrategy } from '@smithy/util-retry';
import { isEc2Failure } from '../core/ec2-failure.ts';

/**
 * Who retries what against EC2:
 *
 * - The SDK retries throttling (`RequestLimitExceeded`) and transient faults (5xx, timeouts,
 *   connection resets) with `createEc2RetryStrategy`: bounded attempts, exponential backoff with
 *   full jitter, as EC2's throttling guide asks (retries draw from the same token bucket, so
 *   unjittered retries from many Lambdas would collide again). 4xx client errors are never retried
 *   by the SDK: the same request would fail the same way.
 * - A `*.NotFound` right after our own create is EC2's eventual consistency; only the caller knows
 *   the resource should exist, so it says so through the port (`justCreated`, `justAttached`) and
 *   the adapter wraps that one call in `retryWhileNotFound`. One layer of retries each: never
 *   nested ones that multiply the wait.
 */
export interface Ec2RetryOptions {
  /** Total attempts per SDK call, the first included. */
  readonly maxAttempts: number;
  /** Backoff before retry n (1-based) is drawn uniformly from [0, min(maxDelayMs, baseDelayMs * 2^n)). */
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

/**
 * Defaults for a Lambda: 16 attempts with a 200 ms base and a 3 s cap spread retries over up to
 * ~40 s (0.4 + 0.8 + 1.6 + 3 s x 12 at most; about half that on average with full jitter), enough
 * for a burst of a few hundred nodes to drain through EC2's mutating buckets (refill 5/s), and well
 * inside the functions' two-minute timeout. The cap is short on purpose: during a burst many
 * callers wait on the same bucket, and long sleeps leave the tokens it refills unused; the attempts
 * are many so a caller keeps its place instead of failing the invocation.
 */
export const DEFAULT_EC2_RETRY_OPTIONS: Ec2RetryOptions = {
  maxAttempts: 16,
  baseDelayMs: 200,
  maxDelayMs: 3_000,
};

/**
 * Full-jitter exponential backoff ("Exponential Backoff And Jitter", AWS Architecture Blog):
 * uniform in [0, min(maxDelayMs, baseDelayMs * 2^retryNumber)). `random` is injectable for tests.
 */
export function fullJitterBackoffMs(
  retryNumber: number,
  options: Pick<Ec2RetryOptions, 'baseDelayMs' | 'maxDelayMs'>,
  random: () => number = Math.random,
): number {
  const ceilingMs = Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** retryNumber);
  return Math.floor(random() * ceilingMs);
}

/**
 * The SDK retry strategy the EC2 client is built with. It is smithy's standard strategy (which
 * decides WHAT is retryable: throttling codes, 5xx, transient network errors; and keeps the SDK's
 * client-side retry quota so a failing region does not multiply load) with our bounded, fully
 * jittered delay in place of its fixed bases.
 */
export function createEc2RetryStrategy(
  options: Partial<Ec2RetryOptions> = {},
  random: () => number = Math.random,
): ConfiguredRetryStrategy {
  const resolved = resolveEc2RetryOptions(options);
  return new ConfiguredRetryStrategy(resolved.maxAttempts, (retryNumber) =>
    fullJitterBackoffMs(retryNumber, resolved, random),
  );
}

/** Fills unset options from the defaults and rejects values that would disable or unbound retries. */
export function resolveEc2RetryOptions(options: Partial<Ec2RetryOptions>): Ec2RetryOptions {
  const resolved = { ...DEFAULT_EC2_RETRY_OPTIONS, ...definedOnly(options) };
  if (!Number.isInteger(resolved.maxAttempts) || resolved.maxAttempts < 1) {
    throw new RangeError(`maxAttempts must be an integer >= 1, got ${resolved.maxAttempts}`);
  }
  if (!(resolved.baseDelayMs >= 0) || !(resolved.maxDelayMs >= resolved.baseDelayMs)) {
    throw new RangeError(
      `need 0 <= baseDelayMs <= maxDelayMs, got baseDelayMs=${resolved.baseDelayMs} maxDelayMs=${resolved.maxDelayMs}`,
    );
  }
  return resolved;
}

export type Sleep = (delayMs: number) => Promise<void>;

const sleepWithTimer: Sleep = (delayMs) => new Promise((resolve) => setTimeout(resolve, delayMs));

/** How the adapter retries a `*.NotFound` on a resource the caller just created. */
export interface RetryWhileNotFoundOptions {
  /** Total attempts, the first included. */
  readonly attempts?: number;
  /** Wait before the first retry; doubles on every further retry, up to `maxDelayMs`. */
  readonly delayMs?: number;
  readonly maxDelayMs?: number;
  readonly sleep?: Sleep;
}

/**
 * Defaults: waits of 0.25, 0.5, 1, 2 and 4 s (7.75 s in all). EC2 asks for "a couple of seconds up
 * to a few minutes"; a Lambda cannot wait minutes, and a resource still missing after that is left
 * to the next invocation, which re-reads EC2.
 */
const DEFAULT_NOT_FOUND_RETRY = { attempts: 6, delayMs: 250, maxDelayMs: 4_000 } as const;

/**
 * Calls `operation` until it does not fail with a `*.NotFound`, for at most `attempts` calls with
 * exponential waits in between. For calls on a resource WE just created (attach or modify a fresh
 * ENI, describe a fresh instance): EC2 is eventually consistent and may answer NotFound for a
 * while, which is not proof of absence (EC2 devguide "Eventual consistency"; amazon-vpc-cni does
 * the same). Any other error is rethrown at once; after the last attempt the NotFound is rethrown.
 * Never use it to probe for things that may really be gone: it would only add latency.
 */
export async function retryWhileNotFound<T>(
  operation: () => Promise<T>,
  options: RetryWhileNotFoundOptions = {},
): Promise<T> {
  const attempts = options.attempts ?? DEFAULT_NOT_FOUND_RETRY.attempts;
  const maxDelayMs = options.maxDelayMs ?? DEFAULT_NOT_FOUND_RETRY.maxDelayMs;
  const sleep = options.sleep ?? sleepWithTimer;
  let delayMs = options.delayMs ?? DEFAULT_NOT_FOUND_RETRY.delayMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await operation();
    } catch (error) {
      if (!isEc2Failure(error, 'not-found') || attempt >= attempts) throw error;
    }
    await sleep(delayMs);
    delayMs = Math.min(maxDelayMs, delayMs * 2);
  }
}

function definedOnly<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, entry]) => entry !== undefined)) as Partial<T>;
}
