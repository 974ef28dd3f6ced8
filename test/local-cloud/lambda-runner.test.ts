import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { LambdaFunctionRunner, type LambdaFunctionSpec } from './lambda-runner.ts';

/** Tiny ESM "assets" standing in for bundles, to pin the runner's Lambda semantics. */
const directory = mkdtempSync(join(tmpdir(), 'lambda-runner-test-'));
const asset = (name: string, source: string) => {
  const file = join(directory, `${name}.mjs`);
  writeFileSync(file, source);
  return file;
};

const ECHO = asset(
  'echo',
  `let containerInvocations = 0;
const coldStartAtMs = Date.now();
export const handler = async (event, context) => {
  containerInvocations++;
  if (event.fail) throw Object.assign(new Error('asked to fail'), { name: 'InvalidInputError' });
  if (event.sleepMs) await new Promise((resolve) => setTimeout(resolve, event.sleepMs));
  if (event.log) console.log(event.log);
  return {
    containerInvocations,
    coldStartAtMs,
    tableName: process.env.TABLE_NAME,
    home: process.env.HOME ?? null,
    functionName: context.functionName,
    requestId: context.awsRequestId,
    remainingMs: context.getRemainingTimeInMillis(),
    nothing: undefined,
  };
};`,
);
const BROKEN = asset('broken', `throw new Error('cannot load');\nexport const handler = async () => null;`);
const NO_RESULT = asset('no-result', 'export const handler = async () => undefined;');

const runners: LambdaFunctionRunner[] = [];
const logs: string[] = [];
const runner = (entryFile: string, overrides: Partial<LambdaFunctionSpec> = {}) => {
  const created = new LambdaFunctionRunner(
    {
      functionName: 'fn',
      functionArn: 'arn:aws:lambda:us-east-1:123456789012:function:fn',
      entryFile,
      handlerExport: 'handler',
      environment: { TABLE_NAME: 'nodes' },
      timeoutMs: 5_000,
      memorySizeMb: 256,
      maxConcurrency: 2,
      ...overrides,
    },
    (line) => logs.push(line.text),
  );
  runners.push(created);
  return created;
};

afterEach(async () => {
  await Promise.all(runners.splice(0).map((created) => created.stop()));
});
afterAll(() => rmSync(directory, { recursive: true, force: true }));

describe('LambdaFunctionRunner', () => {
  it('reuses a warm container: module scope runs once, the environment is the function’s only', async () => {
    const fn = runner(ECHO);
    const first = await fn.invoke({});
    const second = await fn.invoke({});
    expect(first).toMatchObject({ status: 'succeeded', coldStart: true });
    expect(second).toMatchObject({ status: 'succeeded', coldStart: false });
    if (first.status !== 'succeeded' || second.status !== 'succeeded') return;
    expect(second.payload).toMatchObject({
      containerInvocations: 2,
      coldStartAtMs: (first.payload as { coldStartAtMs: number }).coldStartAtMs,
      tableName: 'nodes',
      home: null,
      functionName: 'fn',
      requestId: second.requestId,
    });
    expect((second.payload as { remainingMs: number }).remainingMs).toBeGreaterThan(4_000);
    expect(second.payload).not.toHaveProperty('nothing');
  });

  it('reports a thrown error as Lambda does, and keeps the container', async () => {
    const fn = runner(ECHO);
    const failed = await fn.invoke({ fail: true });
    expect(failed).toMatchObject({
      status: 'failed',
      error: { errorType: 'InvalidInputError', errorMessage: 'asked to fail' },
    });
    expect(await fn.invoke({})).toMatchObject({ status: 'succeeded', coldStart: false });
  });

  it('answers null for an undefined result', async () => {
    expect(await runner(NO_RESULT).invoke({})).toMatchObject({ status: 'succeeded', payload: null });
  });

  it('times an invocation out and replaces its container', async () => {
    const fn = runner(ECHO, { timeoutMs: 200 });
    expect(await fn.invoke({ sleepMs: 2_000 })).toMatchObject({
      status: 'failed',
      error: { errorType: 'Sandbox.Timedout', errorMessage: 'Task timed out after 0.20 seconds' },
    });
    expect(await fn.invoke({})).toMatchObject({ status: 'succeeded', coldStart: true });
  });

  it('fails invocations of a module that does not load, retrying the init each time', async () => {
    const fn = runner(BROKEN);
    expect(await fn.invoke({})).toMatchObject({
      status: 'failed',
      coldStart: true,
      error: { errorType: 'Runtime.ImportModuleError', errorMessage: 'cannot load' },
    });
    expect(await fn.invoke({})).toMatchObject({ status: 'failed', coldStart: true });
    expect(fn.stats()).toMatchObject({ invocations: 2, failures: 2, coldStarts: 2 });
  });

  it('runs one invocation per container, up to the concurrency limit', async () => {
    const fn = runner(ECHO, { maxConcurrency: 1 });
    const started = Date.now();
    const results = await Promise.all([fn.invoke({ sleepMs: 150 }), fn.invoke({ sleepMs: 150 })]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(results.map((result) => result.coldStart)).toEqual([true, false]);
    expect(fn.stats()).toMatchObject({ containers: 1, coldStarts: 1 });
  });

  it('passes the container’s log lines to the sink', async () => {
    await runner(ECHO).invoke({ log: 'hello from the function' });
    await expect.poll(() => logs).toContain('hello from the function');
  });
});
