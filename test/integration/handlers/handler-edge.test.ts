import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { FunctionName } from '../../../functions/core/function-configuration.ts';
import { functionEnvironments } from '../../fixtures/function-environments.ts';

/**
 * Every deployed handler goes through the handler edge: loaded as its module is, with the
 * environment the stack synthesizes, each one refuses a malformed payload with a reason naming the
 * field, and publishes exactly one EMF document for that invocation. A handler that forgot to flush
 * (or parsed its input by itself) fails here. Nothing is contacted: a refused payload reaches no
 * adapter.
 */

type Handler = (event: unknown, context: unknown) => Promise<unknown>;

const HANDLERS: readonly {
  name: FunctionName;
  module: string;
  payload: unknown;
  field: RegExp;
  answered?: true;
}[] = [
  {
    name: 'Allocate',
    module: '../../../functions/allocate/index.ts',
    payload: {
      source: 'aws.ec2',
      'detail-type': 'EC2 Instance State-change Notification',
      detail: { 'instance-id': 'i-1', state: 'running' },
    },
    field: /detail\.instance-id: must be an instance id/,
    answered: true,
  },
  {
    name: 'Allocate',
    module: '../../../functions/allocate/index.ts',
    payload: {
      task: 'serve-nodes',
      nodes: [{ instanceId: 'i-0123456789abcdef0', allocate: 'yes', release: false }],
    },
    field: /nodes\[0\]\.allocate: expected boolean/,
  },
  {
    name: 'Sweep',
    module: '../../../functions/sweep/index.ts',
    payload: { task: 'dance' },
    field: /task: must be "sweep" or "eni-garbage-collection"/,
  },
  {
    name: 'Sync',
    module: '../../../functions/sync/index.ts',
    payload: { instanceId: 42 },
    field: /instanceId: must be an instance id|instanceId: expected string/,
  },
  {
    name: 'Watch',
    module: '../../../functions/watch/index.ts',
    payload: [],
    field: /expected \{"task":"watch"\}/,
  },
];

let environments: Record<FunctionName, Record<string, string>>;

beforeAll(() => {
  environments = functionEnvironments();
}, 120_000);

async function loadHandler(name: FunctionName, module: string): Promise<Handler> {
  vi.resetModules();
  for (const [key, value] of Object.entries({
    ...environments[name],
    AWS_REGION: 'eu-west-1',
    POWERTOOLS_LOG_LEVEL: 'SILENT',
    POWERTOOLS_METRICS_DISABLED: 'false',
  })) {
    vi.stubEnv(key, value);
  }
  try {
    return (await import(module)).handler as Handler;
  } finally {
    vi.unstubAllEnvs();
  }
}

/** The EMF documents (`_aws` lines) `work` printed to stdout. */
async function emfDocumentsOf(work: () => Promise<unknown>): Promise<Record<string, unknown>[]> {
  const documents: Record<string, unknown>[] = [];
  const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    for (const line of String(chunk).split('\n'))
      if (line.includes('"_aws"')) documents.push(JSON.parse(line));
    return true;
  });
  try {
    await work().catch(() => undefined);
  } finally {
    write.mockRestore();
  }
  return documents;
}

describe('every handler goes through the edge', () => {
  it.each(HANDLERS)(
    '$name refuses a malformed payload naming the field, and flushes once',
    async ({ name, module, payload, field, answered }) => {
      const handler = await loadHandler(name, module);
      const invoke = () =>
        handler(payload, { awsRequestId: 'edge-test', getRemainingTimeInMillis: () => 900_000 });
      if (answered)
        await expect(invoke()).resolves.toMatchObject({
          status: 'rejected',
          reason: expect.stringMatching(field),
        });
      else
        await expect(invoke()).rejects.toMatchObject({
          name: 'InvalidInputError',
          message: expect.stringMatching(field),
        });
      const documents = await emfDocumentsOf(invoke);
      expect(documents).toHaveLength(1);
      expect(Object.keys(documents[0] ?? {}).some((key) => key.endsWith('_rejected'))).toBe(true);
    },
  );
});
