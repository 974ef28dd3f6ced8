import { describe, expect, it } from 'vitest';
import { ec2Failure } from '../../../functions/aws/ec2-errors.ts';
import {
  createEc2RetryStrategy,
  DEFAULT_EC2_RETRY_OPTIONS,
  fullJitterBackoffMs,
  resolveEc2RetryOptions,
  retryWhileNotFound,
} from '../../../functions/aws/ec2-retry.ts';

const notFound = () =>
  ec2Failure('InvalidNetworkInterfaceID.NotFound', "The networkInterface ID 'eni-1' does not exist");

/** An operation that fails with the given errors in turn, then returns `value`. */
function failingThen<T>(errors: unknown[], value: T): { operation: () => Promise<T>; calls: () => number } {
  let calls = 0;
  return {
    operation: async () => {
      const error = errors[calls];
      calls += 1;
      if (error !== undefined) throw error;
      return value;
    },
    calls: () => calls,
  };
}

describe('fullJitterBackoffMs', () => {
  const options = { baseDelayMs: 100, maxDelayMs: 1_000 };

  it.each([
    { case: 'first retry, top of range', retry: 1, random: 0.999, expected: 199 },
    { case: 'third retry, middle', retry: 3, random: 0.5, expected: 400 },
    { case: 'capped by maxDelayMs', retry: 10, random: 0.999, expected: 999 },
    { case: 'jitter may choose no wait', retry: 4, random: 0, expected: 0 },
  ])('$case', ({ retry, random, expected }) => {
    expect(fullJitterBackoffMs(retry, options, () => random)).toBe(expected);
  });
});

describe('resolveEc2RetryOptions', () => {
  it('fills unset options from the defaults', () => {
    expect(resolveEc2RetryOptions({ maxAttempts: 3, baseDelayMs: undefined })).toEqual({
      maxAttempts: 3,
      baseDelayMs: DEFAULT_EC2_RETRY_OPTIONS.baseDelayMs,
      maxDelayMs: DEFAULT_EC2_RETRY_OPTIONS.maxDelayMs,
    });
  });

  it.each([
    { case: 'zero attempts', options: { maxAttempts: 0 } },
    { case: 'fractional attempts', options: { maxAttempts: 1.5 } },
    { case: 'negative base', options: { baseDelayMs: -1 } },
    { case: 'cap below base', options: { baseDelayMs: 50, maxDelayMs: 10 } },
  ])('rejects $case', ({ options }) => {
    expect(() => resolveEc2RetryOptions(options)).toThrow(RangeError);
  });
});

describe('createEc2RetryStrategy', () => {
  it('retries throttling up to maxAttempts with the jittered delay, then refuses', async () => {
    const strategy = createEc2RetryStrategy({ maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 2 }, () => 0);
    const first = await strategy.acquireInitialRetryToken('ec2');
    const second = await strategy.refreshRetryTokenForRetry(first, { errorType: 'THROTTLING' });
    const third = await strategy.refreshRetryTokenForRetry(second, { errorType: 'TRANSIENT' });
    expect(third.getRetryCount()).toBe(2);
    await expect(strategy.refreshRetryTokenForRetry(third, { errorType: 'THROTTLING' })).rejects.toThrow();
  });

  it('does not retry client errors', async () => {
    const strategy = createEc2RetryStrategy({ maxAttempts: 5, baseDelayMs: 1, maxDelayMs: 2 });
    const token = await strategy.acquireInitialRetryToken('ec2');
    await expect(strategy.refreshRetryTokenForRetry(token, { errorType: 'CLIENT_ERROR' })).rejects.toThrow();
  });
});

describe('retryWhileNotFound', () => {
  it('retries a NotFound with doubling waits until the call succeeds', async () => {
    const sleeps: number[] = [];
    const { operation, calls } = failingThen([notFound(), notFound(), notFound()], 'attached');

    const result = await retryWhileNotFound(operation, {
      attempts: 5,
      delayMs: 10,
      sleep: async (delayMs) => {
        sleeps.push(delayMs);
      },
    });

    expect(result).toBe('attached');
    expect(calls()).toBe(4);
    expect(sleeps).toEqual([10, 20, 40]);
  });

  it('caps the wait at maxDelayMs', async () => {
    const sleeps: number[] = [];
    const { operation } = failingThen([notFound(), notFound(), notFound(), notFound()], 'ok');
    await retryWhileNotFound(operation, {
      attempts: 5,
      delayMs: 10,
      maxDelayMs: 25,
      sleep: async (delayMs) => {
        sleeps.push(delayMs);
      },
    });
    expect(sleeps).toEqual([10, 20, 25, 25]);
  });

  it('rethrows the NotFound after the last attempt', async () => {
    const last = notFound();
    const { operation, calls } = failingThen([notFound(), notFound(), last], 'never');
    await expect(
      retryWhileNotFound(operation, { attempts: 3, delayMs: 1, sleep: async () => {} }),
    ).rejects.toBe(last);
    expect(calls()).toBe(3);
  });

  it('rethrows any other error at once', async () => {
    const conflict = ec2Failure(
      'InvalidParameterValue',
      'already has an interface attached at device index 1',
    );
    const { operation, calls } = failingThen([conflict], 'never');
    await expect(
      retryWhileNotFound(operation, { attempts: 5, delayMs: 1, sleep: async () => {} }),
    ).rejects.toBe(conflict);
    expect(calls()).toBe(1);
  });
});
