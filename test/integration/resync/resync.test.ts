import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseResyncArgs, resync } from '../../../infra/resync.ts';
import { type LocalLambdaApi, startLocalLambdaApi } from '../../local-cloud/lambda-api.ts';

/**
 * The resync command's invoke path through the real @aws-sdk/client-lambda against the local
 * Lambda Invoke API (what `npm run resync -- --local` talks to).
 */
let api: LocalLambdaApi;
const received: { functionName: string; event: unknown }[] = [];
const queued: { functionName: string; event: unknown }[] = [];

beforeAll(async () => {
  api = await startLocalLambdaApi({
    has: (functionName) => functionName !== 'missing',
    queue: (functionName, event) => {
      if (functionName === 'missing') return false;
      queued.push({ functionName, event });
      return true;
    },
    invoke: async (functionName, event) => {
      received.push({ functionName, event });
      const base = { requestId: 'r', functionName, durationMs: 1, coldStart: false };
      if (functionName === 'missing') return undefined;
      if (functionName === 'broken') {
        return {
          ...base,
          status: 'failed' as const,
          error: { errorType: 'InvalidInputError', errorMessage: 'no' },
        };
      }
      return { ...base, status: 'succeeded' as const, payload: { nodes: 3, writes: 0 } };
    },
  });
});
afterAll(async () => {
  await api.close();
});

const target = (functionName: string) => ({
  functionName,
  client: new LambdaClient({
    region: 'us-east-1',
    endpoint: api.url,
    credentials: { accessKeyId: 'local', secretAccessKey: 'local' },
  }),
});

describe('resync', () => {
  it.each([
    { case: '--all', argv: ['--all'], payload: { all: true } },
    {
      case: '--instance',
      argv: ['--instance', 'i-0123456789abcdef0'],
      payload: { instanceId: 'i-0123456789abcdef0' },
    },
  ])('builds the sync payload for $case', ({ argv, payload }) => {
    expect(parseResyncArgs(argv).payload).toEqual(payload);
  });

  it.each([
    { case: 'neither', argv: [], message: /either --instance/ },
    { case: 'both', argv: ['--all', '--instance', 'i-0123456789abcdef0'], message: /either --instance/ },
    { case: 'a malformed instance id', argv: ['--instance', 'node-1'], message: /instance id/ },
  ])('refuses $case', ({ argv, message }) => {
    expect(() => parseResyncArgs(argv)).toThrow(message);
  });

  it('invokes the sync function and returns its answer', async () => {
    expect(await resync(target('sync-fn'), { all: true })).toEqual({ nodes: 3, writes: 0 });
    expect(received.at(-1)).toEqual({ functionName: 'sync-fn', event: { all: true } });
  });

  it("reports the function's error", async () => {
    await expect(resync(target('broken'), { all: true })).rejects.toThrow(
      /broken failed \(Unhandled\).*InvalidInputError/,
    );
  });

  it('reports an unknown function', async () => {
    await expect(resync(target('missing'), { all: true })).rejects.toThrow(/not found/i);
  });
});

describe("the local Lambda Invoke API's invocation types, as Lambda answers them", () => {
  const invoke = (functionName: string, InvocationType: 'Event' | 'DryRun') =>
    target(functionName).client.send(
      new InvokeCommand({
        FunctionName: functionName,
        InvocationType,
        Payload: new TextEncoder().encode('{"all":true}'),
      }),
    );

  it('Event: 202 at once, no payload, the event queued rather than run', async () => {
    const runsBefore = received.length;
    const answer = await invoke('sync-fn', 'Event');
    expect(answer.StatusCode).toBe(202);
    expect(answer.Payload?.length ?? 0).toBe(0);
    expect(queued.at(-1)).toEqual({ functionName: 'sync-fn', event: { all: true } });
    expect(received.length).toBe(runsBefore);
  });

  it('DryRun: 204 and nothing run or queued; an unknown function is 404 for both', async () => {
    const before = { runs: received.length, queued: queued.length };
    expect((await invoke('sync-fn', 'DryRun')).StatusCode).toBe(204);
    expect({ runs: received.length, queued: queued.length }).toEqual(before);
    await expect(invoke('missing', 'Event')).rejects.toThrow(/not found/i);
    await expect(invoke('missing', 'DryRun')).rejects.toThrow(/not found/i);
  });
});
