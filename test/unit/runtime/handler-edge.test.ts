import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../../functions/core/errors.ts';
import type { Decoded } from '../../../functions/core/input-schema.ts';
import type { Log } from '../../../functions/core/ports.ts';
import { handlerEdge, invocationMetrics } from '../../../functions/runtime/handler-edge.ts';
import type { MetricPoint, MetricsSink } from '../../../functions/runtime/metrics.ts';

/** A sink that records what was added and each flush, in order. */
function recordingSink() {
  const events: string[] = [];
  const sink = {
    add: (points: readonly MetricPoint[]) => events.push(...points.map((point) => point.name)),
    flush: () => events.push('flush'),
  } as unknown as MetricsSink;
  return { sink, events };
}

const silentLog: Log = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {} } as unknown as Log;

const decodeNumber = (event: unknown): Decoded<number> =>
  typeof event === 'number' ? { ok: true, value: event } : { ok: false, reason: 'n: expected number' };

function edgeFor(handle: (input: number) => Promise<string>, answered = false) {
  const { sink, events } = recordingSink();
  const handler = handlerEdge<number, string, void>({
    log: silentLog,
    metrics: sink,
    decode: decodeNumber,
    ...(answered ? { answerInvalid: (reason: string) => `refused: ${reason}` } : {}),
    handle: async (input) => {
      sink.add([{ name: 'work', value: input, unit: 'Count' }]);
      return handle(input);
    },
    invocationMetrics,
  });
  return { handler, events };
}

describe('the handler edge', () => {
  it('flushes the work’s points and a completed point once', async () => {
    const { handler, events } = edgeFor(async (input) => `ok ${input}`);
    await expect(handler(3)).resolves.toBe('ok 3');
    expect(events).toEqual(['work', 'ipam_invocations_completed', 'flush']);
  });

  it('throws InvalidInputError naming the field for a direct invoke, runs nothing, and still flushes', async () => {
    const { handler, events } = edgeFor(async () => 'never');
    await expect(handler('three')).rejects.toThrow(new InvalidInputError('n: expected number'));
    expect(events).toEqual(['ipam_invocations_rejected', 'flush']);
  });

  it('answers malformed input where the function answers it, and flushes', async () => {
    const { handler, events } = edgeFor(async () => 'never', true);
    await expect(handler('three')).resolves.toBe('refused: n: expected number');
    expect(events).toEqual(['ipam_invocations_rejected', 'flush']);
  });

  it('rethrows a failure as it is, for the platform to retry, and flushes what was counted', async () => {
    const failure = new Error('ECONNRESET');
    const { handler, events } = edgeFor(async () => {
      throw failure;
    });
    await expect(handler(1)).rejects.toBe(failure);
    expect(events).toEqual(['work', 'ipam_invocations_failed', 'flush']);
  });
});
