import { PutItemCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import { describe, expect, it } from 'vitest';
import { nodeTableSchema } from '../../../functions/aws/node-table-schema.ts';
import type { InvocationResult } from '../../local-cloud/lambda-runner.ts';
import { type LambdaStreamRecord, StreamPoller } from '../../local-cloud/stream-poller.ts';
import type { StreamMappingDefinition } from '../../local-cloud/template.ts';
import { createTestNodeTable } from '../../support/node-table.ts';

/**
 * The stream poller against DynamoDB Local's real stream, with a scripted function in place of the
 * sync: what Lambda's event-source mapping does with batches, partial batch responses, function
 * errors (bisection), retries and records given up on.
 */

const MAPPING: StreamMappingDefinition = {
  logicalId: 'Mapping',
  functionLogicalId: 'Function',
  tableLogicalId: 'Table',
  enabled: true,
  batchSize: 10,
  bisectBatchOnFunctionError: true,
  maximumRetryAttempts: 3,
  maximumRecordAgeSeconds: -1,
  reportBatchItemFailures: true,
  parallelizationFactor: 1,
  startingPosition: 'TRIM_HORIZON',
};

type Script = (
  records: LambdaStreamRecord[],
  call: number,
) => { ok: true; payload?: unknown } | { ok: false };

async function runPoller(
  instanceIds: readonly string[],
  script: Script,
  mapping: Partial<StreamMappingDefinition> = {},
) {
  const table = await createTestNodeTable();
  for (const instanceId of instanceIds) {
    await table.client.send(
      new PutItemCommand({ TableName: table.tableName, Item: { instanceId: { S: instanceId } } }),
    );
  }
  const batches: string[][] = [];
  const succeeded: string[] = [];
  const poller = new StreamPoller({
    client: new DynamoDBStreamsClient({}),
    streamArn: table.streamArn,
    region: 'us-east-1',
    mapping: { ...MAPPING, ...mapping },
    retryDelayMs: () => 0,
    invoke: async (event): Promise<InvocationResult> => {
      const keys = event.Records.map((record) => (record.dynamodb.Keys.instanceId as { S: string }).S);
      batches.push(keys);
      const outcome = script(event.Records, batches.length);
      const base = {
        requestId: String(batches.length),
        functionName: 'Function',
        durationMs: 1,
        coldStart: false,
      };
      if (!outcome.ok) {
        return { ...base, status: 'failed', error: { errorType: 'Error', errorMessage: 'scripted failure' } };
      }
      const failed = new Set(
        (
          (outcome.payload as { batchItemFailures?: { itemIdentifier: string }[] } | undefined)
            ?.batchItemFailures ?? []
        ).map((failure) => failure.itemIdentifier),
      );
      for (const record of event.Records) {
        if (!failed.has(record.dynamodb.SequenceNumber))
          succeeded.push((record.dynamodb.Keys.instanceId as { S: string }).S);
      }
      return { ...base, status: 'succeeded', payload: outcome.payload ?? null };
    },
  });
  await poller.drain();
  await poller.stop();
  return { batches, succeeded, discarded: poller.discarded, stats: poller.stats() };
}

const GOOD = ['i-00000001', 'i-00000002', 'i-00000003', 'i-00000004', 'i-00000005'];
const POISON = 'i-0000dead';

describe('StreamPoller (Lambda DynamoDB-stream event-source mapping)', () => {
  it('delivers every record in stream order in Lambda’s event shape', async () => {
    const seen: LambdaStreamRecord[] = [];
    const { batches, discarded } = await runPoller(GOOD, (records) => {
      seen.push(...records);
      return { ok: true };
    });
    expect(batches).toEqual([GOOD]);
    expect(discarded).toEqual([]);
    expect(seen[0]).toMatchObject({
      eventName: 'INSERT',
      eventSource: 'aws:dynamodb',
      eventVersion: '1.1',
      dynamodb: {
        Keys: { instanceId: { S: GOOD[0] } },
        NewImage: { instanceId: { S: GOOD[0] } },
        StreamViewType: nodeTableSchema.streamViewType,
      },
    });
    expect(typeof seen[0]?.dynamodb.SequenceNumber).toBe('string');
  });

  it('bisects a failing batch down to the poison record and gives up on it alone after the retries', async () => {
    const records = [GOOD[0], GOOD[1], POISON, GOOD[2], GOOD[3], GOOD[4]] as string[];
    const { batches, succeeded, discarded } = await runPoller(records, (batch) =>
      batch.some((record) => (record.dynamodb.Keys.instanceId as { S: string }).S === POISON)
        ? { ok: false }
        : { ok: true },
    );
    expect(batches).toEqual([
      records,
      [GOOD[0], GOOD[1], POISON],
      [GOOD[0], GOOD[1]],
      [POISON],
      [POISON],
      [GOOD[2], GOOD[3], GOOD[4]],
    ]);
    expect(succeeded.sort()).toEqual([...GOOD].sort());
    expect(discarded).toHaveLength(1);
    expect(discarded[0]).toMatchObject({
      reason: 'retries-exhausted',
      keys: [{ instanceId: { S: POISON } }],
      attempts: 4,
    });
  });

  it('retries from the lowest sequence number a partial batch response names, not the records before it', async () => {
    const { batches, discarded } = await runPoller(GOOD, (records, call) =>
      call === 1
        ? {
            ok: true,
            payload: {
              batchItemFailures: [
                { itemIdentifier: records[3]?.dynamodb.SequenceNumber },
                { itemIdentifier: records[2]?.dynamodb.SequenceNumber },
              ],
            },
          }
        : { ok: true },
    );
    expect(batches).toEqual([GOOD, GOOD.slice(2)]);
    expect(discarded).toEqual([]);
  });

  it('treats a malformed partial batch response as a failure of the whole batch', async () => {
    const { batches } = await runPoller(GOOD, (_records, call) =>
      call === 1 ? { ok: true, payload: { batchItemFailures: [{ itemIdentifier: '' }] } } : { ok: true },
    );
    expect(batches).toEqual([GOOD, GOOD]);
  });

  it('without bisection or retries, gives the whole failing batch up at once and moves on', async () => {
    const { batches, discarded, stats } = await runPoller(GOOD, () => ({ ok: false }), {
      bisectBatchOnFunctionError: false,
      maximumRetryAttempts: 0,
    });
    expect(batches).toEqual([GOOD]);
    expect(discarded).toMatchObject([
      { reason: 'retries-exhausted', attempts: 1, keys: GOOD.map((id) => ({ instanceId: { S: id } })) },
    ]);
    expect(stats.recordsDiscarded).toBe(GOOD.length);
  });

  it('sends batches of at most BatchSize records', async () => {
    const { batches } = await runPoller(GOOD, () => ({ ok: true }), { batchSize: 2 });
    expect(batches).toEqual([GOOD.slice(0, 2), GOOD.slice(2, 4), GOOD.slice(4)]);
  });
});
