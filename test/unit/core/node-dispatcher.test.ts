import { describe, expect, it } from 'vitest';
import { NodeDispatcher } from '../../../functions/core/node-dispatcher.ts';
import type { WatchTrigger } from '../../../functions/core/watch-plan.ts';

const trigger = (n: number, overrides: Partial<WatchTrigger> = {}): WatchTrigger => ({
  instanceId: `i-${n.toString(16).padStart(17, '0')}`,
  allocate: true,
  release: false,
  ...overrides,
});

/** A dispatcher whose batches stay open until the test ends them, and whose pumps the test runs. */
function harness(concurrency: number, batchSize: number) {
  const batches: { triggers: readonly WatchTrigger[]; end: (failed?: boolean) => void }[] = [];
  const pumps: (() => void)[] = [];
  const dispatcher = new NodeDispatcher(
    { concurrency, batchSize, schedule: (pump) => pumps.push(pump) },
    (triggers) =>
      new Promise<void>((resolve, reject) =>
        batches.push({ triggers, end: (failed) => (failed ? reject(new Error('failed')) : resolve()) }),
      ),
  );
  const runPumps = () => {
    for (const pump of pumps.splice(0)) pump();
  };
  const settle = () => new Promise((resolve) => setTimeout(resolve, 0));
  return { dispatcher, batches, runPumps, settle };
}

describe('NodeDispatcher', () => {
  it('sends triggers that arrive together in batches of at most batchSize, never over concurrency', () => {
    const { dispatcher, batches, runPumps } = harness(5, 2);
    for (let n = 0; n < 7; n++) dispatcher.dispatch(trigger(n), () => {});
    expect(batches).toHaveLength(0); // nothing goes out before the arrivals of this turn are in
    runPumps();
    expect(batches.map((batch) => batch.triggers.length)).toEqual([2, 2, 1]);
    expect(dispatcher.size()).toBe(7);
  });

  it('fills freed slots with what queued meanwhile, and reports each trigger finished once its batch ended', async () => {
    const { dispatcher, batches, runPumps, settle } = harness(2, 2);
    const finished: string[] = [];
    for (let n = 0; n < 5; n++) dispatcher.dispatch(trigger(n), () => finished.push(trigger(n).instanceId));
    runPumps();
    expect(batches.map((batch) => batch.triggers.map((t) => t.instanceId))).toEqual([
      [trigger(0).instanceId, trigger(1).instanceId],
    ]);
    batches[0]?.end(true); // a failed batch is still finished: the sweep retries its nodes
    await settle();
    expect(finished).toEqual([trigger(0).instanceId, trigger(1).instanceId]);
    expect(batches[1]?.triggers.map((t) => t.instanceId)).toEqual([
      trigger(2).instanceId,
      trigger(3).instanceId,
    ]);
  });

  it('never serves a node twice at once: triggers for a node being served merge into one follow-up', async () => {
    const { dispatcher, batches, runPumps, settle } = harness(4, 4);
    dispatcher.dispatch(trigger(1), () => {});
    runPumps();
    dispatcher.dispatch(trigger(1, { allocate: false, release: true }), () => {});
    dispatcher.dispatch(trigger(1), () => {});
    runPumps();
    expect(batches).toHaveLength(1);
    batches[0]?.end();
    await settle();
    expect(batches).toHaveLength(2);
    expect(batches[1]?.triggers).toEqual([trigger(1, { allocate: true, release: true })]);
    const idle = dispatcher.idle();
    batches[1]?.end();
    await idle;
    expect(dispatcher.size()).toBe(0);
  });

  it('merges triggers for a queued node into its one entry', () => {
    const { dispatcher, batches, runPumps } = harness(4, 4);
    dispatcher.dispatch(trigger(1, { allocate: false, release: true }), () => {});
    dispatcher.dispatch(trigger(1), () => {});
    runPumps();
    expect(batches.map((batch) => batch.triggers)).toEqual([[trigger(1, { allocate: true, release: true })]]);
  });
});
