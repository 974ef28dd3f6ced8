import { randomUUID } from 'node:crypto';
import { CreateTableCommand, DynamoDBClient, ScanCommand } from '@aws-sdk/client-dynamodb';
import {
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
} from '@aws-sdk/client-dynamodb-streams';
import { describe, expect, it } from 'vitest';
import { DynamoIpLedger, ipLedgerTableSchema } from '../../../functions/aws/ip-ledger-table.ts';
import type { NodeRecord } from '../../../functions/core/model.ts';
import { decodeLedgerBatch } from '../../../functions/ledger/request.ts';
import { appendLedgerBatch } from '../../../functions/services/append-ledger.ts';
import { describeAddress, inspectAddress, parseInspectArgs } from '../../../infra/inspect.ts';
import { eniFixture, nodeRecordFixture } from '../../fixtures/node-records.ts';
import { createTestNodeTable } from '../../support/node-table.ts';

/**
 * The IP ledger end to end on DynamoDB Local: a node's record versions written to a node table as
 * the allocator writes them, its real stream read back, the ledger's decoding and appending run on
 * the batch, the batch delivered again (nothing new is written), and `npm run inspect -- --ip`
 * answering who held an address at a past time after the node was terminated.
 */

const T0 = Date.parse('2026-12-01T14:00:00Z');
const MINUTE = 60_000;
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

async function createLedgerTable(client: DynamoDBClient): Promise<string> {
  const tableName = `ledger-${randomUUID()}`;
  const { partitionKey, sortKey } = ipLedgerTableSchema;
  await client.send(
    new CreateTableCommand({
      TableName: tableName,
      AttributeDefinitions: [
        { AttributeName: partitionKey.name, AttributeType: partitionKey.type },
        { AttributeName: sortKey.name, AttributeType: sortKey.type },
      ],
      KeySchema: [
        { AttributeName: partitionKey.name, KeyType: 'HASH' },
        { AttributeName: sortKey.name, KeyType: 'RANGE' },
      ],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  return tableName;
}

/** Every record of the stream so far, shaped as Lambda's event-source mapping delivers them. */
async function streamBatch(streamArn: string) {
  const streams = new DynamoDBStreamsClient({});
  const { StreamDescription } = await streams.send(new DescribeStreamCommand({ StreamArn: streamArn }));
  const records: unknown[] = [];
  for (const shard of StreamDescription?.Shards ?? []) {
    let { ShardIterator: iterator } = await streams.send(
      new GetShardIteratorCommand({
        StreamArn: streamArn,
        ShardId: shard.ShardId,
        ShardIteratorType: 'TRIM_HORIZON',
      }),
    );
    while (iterator) {
      const page = await streams.send(new GetRecordsCommand({ ShardIterator: iterator }));
      if ((page.Records ?? []).length === 0) break;
      for (const record of page.Records ?? []) {
        const seenAt = record.dynamodb?.ApproximateCreationDateTime;
        const { OldImage: oldImage, NewImage: newImage, ...rest } = record.dynamodb ?? {};
        records.push({
          ...record,
          eventSourceARN: streamArn,
          dynamodb: {
            ...rest,
            ...(oldImage ? { OldImage: withEmptyMaps(oldImage) } : {}),
            ...(newImage ? { NewImage: withEmptyMaps(newImage) } : {}),
            ApproximateCreationDateTime: seenAt ? seenAt.getTime() / 1000 : undefined,
          },
        });
      }
      iterator = page.NextShardIterator;
    }
  }
  streams.destroy();
  return { Records: records };
}

/**
 * An image as Lambda's event carries it: read through the Streams SDK client from DynamoDB Local,
 * an empty map attribute comes back as `{}` instead of `{"M":{}}` (the record's empty tag maps).
 */
function withEmptyMaps(image: Record<string, unknown>): Record<string, unknown> {
  const repair = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(repair);
    if (typeof value !== 'object' || value === null) return value;
    if (Object.keys(value).length === 0) return { M: {} };
    const [[type, inner]] = Object.entries(value) as [[string, unknown]];
    if (type === 'M') return { M: withEmptyMaps(inner as Record<string, unknown>) };
    if (type === 'L') return { L: (inner as unknown[]).map(repair) };
    return value;
  };
  return Object.fromEntries(Object.entries(image).map(([name, value]) => [name, repair(value)]));
}

/** A node's life: IPs assigned, one released, an ENI added then deleted, then the instance terminated. */
function lifeOfANode(instanceId: string): NodeRecord[] {
  const base = { instanceId, nodeName: 'ip-10-0-1-10.ec2.internal', createdAtEpochMs: T0 };
  const eth0 = eniFixture(0, 0, { foreign: true, secondaryIps: ['10.0.16.200'] });
  const eni1 = (count: number) => eniFixture(1, count);
  const eni2 = eniFixture(2, 0, { prefixes: ['10.0.3.16/28'] });
  const version = (number: number, enis: NodeRecord['enis'], extra: Partial<NodeRecord> = {}) =>
    nodeRecordFixture({ ...base, version: number, enis, updatedAtEpochMs: T0 + number * MINUTE, ...extra });
  return [
    version(1, [eth0, eni1(3)]), // 10.0.17.11 .12 .13 assigned at 14:01
    version(2, [eth0, eni1(2)]), // 10.0.17.13 released at 14:02
    version(3, [eth0, eni1(2)], { lease: { holder: 'req', expiresAtEpochMs: T0 } }), // no address change
    version(4, [eth0, eni1(2), eni2]), // 10.0.3.16/28 assigned at 14:04
    version(5, [eth0, eni1(2)]), // the /28's ENI deleted at 14:05
    version(6, [eth0, eni1(2)], { lifecycle: 'retired' }), // terminated at 14:06
  ];
}

describe('the IP ledger', () => {
  it('records every assignment and release from the stream once, and answers who held an address then', async () => {
    const client = new DynamoDBClient({});
    const nodes = await createTestNodeTable(client);
    const ledgerTable = await createLedgerTable(client);
    const instanceId = 'i-0aaaaaaaaaaaaaaa1';
    let previous: number | undefined;
    for (const record of lifeOfANode(instanceId)) {
      await nodes.store.put(record, previous);
      previous = record.version;
    }

    const decoded = decodeLedgerBatch(await streamBatch(nodes.streamArn));
    if (!decoded.ok) throw new Error(decoded.reason);
    const ledger = new DynamoIpLedger(client, ledgerTable);
    const first = await appendLedgerBatch(decoded.value, ledger, 90, quiet);
    const itemsAfterFirst = (await client.send(new ScanCommand({ TableName: ledgerTable }))).Items ?? [];
    const replay = await appendLedgerBatch(decoded.value, ledger, 90, quiet);
    const itemsAfterReplay = (await client.send(new ScanCommand({ TableName: ledgerTable }))).Items ?? [];

    // Assigned: 3 IPs and the /28. Released: 1 IP, the /28 (ENI deleted), 2 IPs (node retired).
    expect(first).toEqual({ written: 8, alreadyWritten: 0, rejected: 0, failedSequenceNumbers: [] });
    expect(replay).toEqual({ written: 0, alreadyWritten: 8, rejected: 0, failedSequenceNumbers: [] });
    expect(itemsAfterReplay).toEqual(itemsAfterFirst);
    expect(
      itemsAfterFirst.every((item) => Number(item.expiresAtEpochSeconds?.N) > T0 / 1000 + 89 * 86_400),
    ).toBe(true);

    const ask = async (...args: string[]) => {
      const options = parseInspectArgs([...args, '--ledger-table', ledgerTable]);
      if (options.mode !== 'ip') throw new Error('not an --ip question');
      return describeAddress(options.ip, await inspectAddress(options), options.atEpochMs);
    };
    expect(await ask('--ip', '10.0.17.13', '--at', '2026-12-01T14:01:30Z')).toEqual([
      '10.0.17.13 at 2026-12-01T14:01:30.000Z: held by',
      `  10.0.17.13 on eni-00000000000000001 (subnet-00000001) of ${instanceId}, node ip-10-0-1-10.ec2.internal: from 2026-12-01T14:01:00.000Z to 2026-12-01T14:02:00.000Z (released)`,
    ]);
    expect(await ask('--ip', '10.0.17.13', '--at', '2026-12-01T14:02:30Z')).toEqual([
      '10.0.17.13 at 2026-12-01T14:02:30.000Z: held by nobody the allocator assigned it to',
    ]);
    // An address inside the delegated /28, asked after the node was terminated.
    expect(await ask('--ip', '10.0.3.17', '--at', '2026-12-01T14:04:30Z')).toEqual([
      '10.0.3.17 at 2026-12-01T14:04:30.000Z: held by',
      `  10.0.3.16/28 on eni-00000000000000002 (subnet-00000001) of ${instanceId}, node ip-10-0-1-10.ec2.internal: from 2026-12-01T14:04:00.000Z to 2026-12-01T14:05:00.000Z (eni-deleted)`,
    ]);
    expect(await ask('--ip', '10.0.17.11')).toEqual([
      '10.0.17.11: 1 holdings in the ledger',
      `  10.0.17.11 on eni-00000000000000001 (subnet-00000001) of ${instanceId}, node ip-10-0-1-10.ec2.internal: from 2026-12-01T14:01:00.000Z to 2026-12-01T14:06:00.000Z (node-retired)`,
    ]);
    // The foreign eth0's secondary was never the allocator's.
    expect(await ask('--ip', '10.0.16.200')).toEqual(['10.0.16.200: the ledger holds no assignment of it']);
    client.destroy();
  });

  it('skips a record it cannot read, and refuses a malformed batch', () => {
    const decoded = decodeLedgerBatch({
      Records: [
        {
          eventSourceARN: 'arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/2026',
          eventName: 'MODIFY',
          dynamodb: { SequenceNumber: '1', NewImage: { instanceId: { S: 'i-0aaaaaaaaaaaaaaa1' } } },
        },
      ],
    });
    expect(decoded).toEqual({
      ok: true,
      value: [
        {
          sequenceNumber: '1',
          action: 'reject',
          reason: "a MODIFY record without OldImage: the node table's stream must be NEW_AND_OLD_IMAGES",
        },
      ],
    });
    expect(decodeLedgerBatch({ instanceId: 'i-0aaaaaaaaaaaaaaa1' })).toMatchObject({ ok: false });
  });

  it.each([
    { case: 'no address', args: ['--ip', 'host-1'], error: '--ip expects an IPv4 or IPv6 address' },
    {
      case: 'a time without zone',
      args: ['--ip', '10.0.3.17', '--at', '2026-12-01 14:02'],
      error: '--at expects',
    },
    {
      case: '--at without --ip',
      args: ['--instance', 'i-0aaaaaaaaaaaaaaa1', '--at', '2026-12-01T14:02:00Z'],
      error: '--at goes with --ip',
    },
    {
      case: 'both questions',
      args: ['--instance', 'i-0aaaaaaaaaaaaaaa1', '--ip', '10.0.3.17'],
      error: 'say either',
    },
  ])('inspect refuses $case', ({ args, error }) => {
    expect(() => parseInspectArgs(args)).toThrow(error);
  });
});
