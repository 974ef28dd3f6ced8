import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LambdaFunctionRunner } from './lambda-runner.ts';

/** The runner's fault hooks for the chaos suite: container crashes and a shiftable clock. */
const directory = mkdtempSync(join(tmpdir(), 'lambda-runner-faults-test-'));
const entryFile = join(directory, 'slow.mjs');
writeFileSync(
  entryFile,
  `export const handler = async (event) => {
  if (event.now) return { nowMs: Date.now() };
  console.log('started ' + event.id);
  try {
    await new Promise((resolve) => setTimeout(resolve, event.sleepMs));
    return { finished: event.id };
  } finally {
    console.log('finally ran for ' + event.id);
  }
};`,
);

const logs: string[] = [];
const runners: LambdaFunctionRunner[] = [];
const runner = (clockOffsetMs?: BigInt64Array) => {
  const created = new LambdaFunctionRunner(
    {
      functionName: 'fn',
      functionArn: 'arn:aws:lambda:us-east-1:123456789012:function:fn',
      entryFile,
      handlerExport: 'handler',
      environment: {},
      timeoutMs: 10_000,
      memorySizeMb: 256,
      maxConcurrency: 2,
      ...(clockOffsetMs === undefined ? {} : { clockOffsetMs }),
    },
    (line) => logs.push(line.text),
  );
  runners.push(created);
  return created;
};

afterAll(async () => {
  await Promise.all(runners.map((created) => created.stop()));
  rmSync(directory, { recursive: true, force: true });
});

describe('LambdaFunctionRunner fault hooks', () => {
  it('crashContainers kills only the container running a matching event, and no finally block runs', async () => {
    const functionRunner = runner();
    const doomed = functionRunner.invoke({ id: 'doomed', sleepMs: 1_500 });
    const survivor = functionRunner.invoke({ id: 'survivor', sleepMs: 1_500 });
    await expect
      .poll(() => logs.filter((line) => line.startsWith('started ')).length, { timeout: 5_000 })
      .toBe(2);

    const killed = await functionRunner.crashContainers((event) => (event as { id: string }).id === 'doomed');

    expect(killed).toBe(1);
    expect(await doomed).toMatchObject({ status: 'failed', error: { errorType: 'Runtime.ExitError' } });
    expect(await survivor).toMatchObject({ status: 'succeeded', payload: { finished: 'survivor' } });
    expect(logs).toContain('finally ran for survivor');
    expect(logs).not.toContain('finally ran for doomed');
    expect(functionRunner.stats().containers).toBe(1);
  });

  it('shifts Date.now in every container by the shared offset, at once', async () => {
    const offset = new BigInt64Array(new SharedArrayBuffer(8));
    const functionRunner = runner(offset);
    const before = await functionRunner.invoke({ now: true });
    Atomics.store(offset, 0, 3_600_000n);
    const after = await functionRunner.invoke({ now: true });
    const nowOf = (result: typeof before) =>
      result.status === 'succeeded' ? (result.payload as { nowMs: number }).nowMs : Number.NaN;
    expect(nowOf(after) - nowOf(before)).toBeGreaterThanOrEqual(3_600_000);
    expect(nowOf(after) - nowOf(before)).toBeLessThan(3_600_000 + 5_000);
  });
});
