import { LambdaClient } from '@aws-sdk/client-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseResyncArgs, resync } from '../../../infra/resync.ts';
import { type LocalLambdaApi, startLocalLambdaApi } from '../../local-cloud/lambda-api.ts';

/**
 * The resync command's invoke path through the real @aws-sdk/client-lambda against the local
 * Lambda Invoke API (what `npm run resync -- --local` talks to).
 */
let api: LocalLambdaApi;
const received: { functionName: string; event: unknown }[] = [];

beforeAll(async () => {
  api = await startLocalLambdaApi(async (functionName, event) => {
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
