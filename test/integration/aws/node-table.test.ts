import { GetItemCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { beforeAll, describe, expect, it } from 'vitest';
import { nodeTableSchema } from '../../../functions/aws/node-table-schema.ts';
import { NewerRecordSchemaError, VersionConflictError } from '../../../functions/core/errors.ts';
import { UnreadableRecordsError } from '../../../functions/core/unreadable-records.ts';
import { eniFixture, nodeRecordFixture } from '../../fixtures/node-records.ts';
import { dynamoItemSizeBytes } from '../../support/item-size.ts';
import { createTestNodeTable, type TestNodeTable } from '../../support/node-table.ts';

const DYNAMODB_ITEM_LIMIT_BYTES = 400 * 1024;

describe('DynamoNodeRecordStore on DynamoDB Local', () => {
  let table: TestNodeTable;
  beforeAll(async () => {
    table = await createTestNodeTable();
  });

  it('creates a record only when none exists, then reads it back strongly consistent', async () => {
    const record = nodeRecordFixture({ instanceId: 'i-00000000000000001' });
    await table.store.put(record, undefined);
    expect(await table.store.get(record.instanceId)).toEqual(record);

    const second = table.store.put({ ...record, version: 1 }, undefined);
    await expect(second).rejects.toBeInstanceOf(VersionConflictError);
    await expect(second).rejects.toMatchObject({ current: { version: 1 } });
  });

  it('stamps every write with the lowest schema that holds it, and refuses a record of a newer schema', async () => {
    // A table of its own: the newer record would fail the other tests' scans, as it should.
    const table = await createTestNodeTable();
    const stampOf = async (instanceId: string) =>
      (
        await table.client.send(
          new GetItemCommand({ TableName: table.tableName, Key: marshall({ instanceId }) }),
        )
      ).Item?.[nodeTableSchema.schemaVersionAttribute];
    const record = nodeRecordFixture({ instanceId: 'i-00000000000000031' });
    await table.store.put(record, undefined);
    // An IPv4-only record is layout 1: a release that knows no IPv6 still serves it.
    expect(await stampOf(record.instanceId)).toEqual({ N: '1' });
    expect(await table.store.get(record.instanceId)).toEqual(record);
    const dualStack = nodeRecordFixture({
      instanceId: 'i-00000000000000033',
      enis: [eniFixture(0, 0), eniFixture(1, 9, { ipv6Prefixes: ['2600:1f18:4a01:ab03:1::/80'] })],
    });
    await table.store.put(dualStack, undefined);
    expect(await stampOf(dualStack.instanceId)).toEqual({ N: String(nodeTableSchema.recordSchemaVersion) });
    expect(await table.store.get(dualStack.instanceId)).toEqual(dualStack);

    const newer = nodeRecordFixture({ instanceId: 'i-00000000000000032' });
    await table.client.send(
      new PutItemCommand({
        TableName: table.tableName,
        Item: marshall(
          { ...newer, [nodeTableSchema.schemaVersionAttribute]: nodeTableSchema.recordSchemaVersion + 1 },
          {
            removeUndefinedValues: true,
          },
        ),
      }),
    );
    await expect(table.store.get(newer.instanceId)).rejects.toBeInstanceOf(NewerRecordSchemaError);
    await expect(table.store.put({ ...newer, version: 2 }, 1)).rejects.toThrow(
      new RegExp(`schema version ${nodeTableSchema.recordSchemaVersion + 1}`),
    );
    // The scan reads the page to its end: the readable records travel with the error.
    const scan = await table.store.listPage().catch((error: unknown) => error);
    expect(scan).toBeInstanceOf(UnreadableRecordsError);
    expect((scan as UnreadableRecordsError).message).toMatch(/finish deploying the newer release/);
    expect((scan as UnreadableRecordsError).unreadable.map((item) => item.instanceId)).toEqual([
      newer.instanceId,
    ]);
    expect((scan as UnreadableRecordsError).page.records.map((item) => item.instanceId).sort()).toEqual(
      [record.instanceId, dualStack.instanceId].sort(),
    );
  });

  it.each([
    {
      case: 'enis not a list',
      fields: { enis: 'garbage' },
      names: /enis has the wrong type: expected array, found "garbage"/,
    },
    {
      case: 'version a string',
      fields: { version: 'one' },
      names: /version has the wrong type: expected number, found "one"/,
    },
    {
      case: 'an ENI without an id',
      fields: { enis: [{ secondaryIps: [] }] },
      names: /enis\[0\]\.id is missing/,
    },
    {
      case: 'no nodeName',
      fields: { nodeName: undefined },
      names: /nodeName is missing \(expected string\)/,
    },
    {
      case: 'a /80 of an ENI a number',
      fields: { enis: [eniFixture(0, 0), eniFixture(1, 2, { ipv6Prefixes: [80] as unknown as string[] })] },
      names: /enis\[1\]\.ipv6Prefixes\[0\] has the wrong type: expected string, found 80/,
    },
    {
      case: 'a release entry of an unknown state',
      fields: { cidrReleases: { '10.0.16.12/32': { eniId: 'eni-1', state: 'gone', sinceEpochMs: 1 } } },
      names:
        /cidrReleases\.10\.0\.16\.12\/32\.state has the wrong value: expected "pending" or "withdrawing" or "released", found "gone"/,
    },
    {
      case: 'the lease expiry a string',
      fields: { lease: { holder: 'allocate', expiresAtEpochMs: 'soon' } },
      names: /lease\.expiresAtEpochMs has the wrong type/,
    },
  ])('refuses an item of the wrong shape: $case', async ({ fields, names }) => {
    const table = await createTestNodeTable();
    const item = { ...nodeRecordFixture({ instanceId: 'i-00000000000000041' }), ...fields };
    await table.client.send(
      new PutItemCommand({
        TableName: table.tableName,
        Item: marshall(item, { removeUndefinedValues: true }),
      }),
    );
    await expect(table.store.get(item.instanceId)).rejects.toMatchObject({
      name: 'MalformedRecordError',
      message: names,
    });
    await expect(table.store.listPage()).rejects.toMatchObject({
      name: 'UnreadableRecordsError',
      message: names,
    });
  });

  it('drops attributes the record does not declare, so a write never carries them back', async () => {
    const record = nodeRecordFixture({ instanceId: 'i-00000000000000042' });
    const [eth0, eth1] = record.enis;
    await table.client.send(
      new PutItemCommand({
        TableName: table.tableName,
        Item: marshall(
          { ...record, handEdited: 'yes', enis: [eth0, { ...eth1, note: 'by hand' }] },
          { removeUndefinedValues: true },
        ),
      }),
    );
    const read = await table.store.get(record.instanceId);
    expect(read).toStrictEqual(record);

    await table.store.put({ ...record, version: 2 }, 1);
    const stored = await table.client.send(
      new GetItemCommand({ TableName: table.tableName, Key: marshall({ instanceId: record.instanceId }) }),
    );
    expect(stored.Item).not.toHaveProperty('handEdited');
    expect(stored.Item?.enis?.L?.[1]?.M).not.toHaveProperty('note');
  });

  it('reads release entries written before they carried withdrawnInVersion, and keeps the field once written', async () => {
    const earlier = nodeRecordFixture({
      instanceId: 'i-00000000000000033',
      cidrReleases: { '10.0.16.12/32': { eniId: 'eni-1', state: 'withdrawing', sinceEpochMs: 1 } },
    });
    // As an earlier release wrote it: the same schema version, no withdrawnInVersion.
    await table.client.send(
      new PutItemCommand({
        TableName: table.tableName,
        Item: marshall(
          { ...earlier, [nodeTableSchema.schemaVersionAttribute]: nodeTableSchema.recordSchemaVersion },
          { removeUndefinedValues: true },
        ),
      }),
    );
    expect(await table.store.get(earlier.instanceId)).toEqual(earlier);

    const stamped = {
      ...earlier,
      version: 2,
      cidrReleases: {
        '10.0.16.12/32': {
          eniId: 'eni-1',
          state: 'withdrawing' as const,
          sinceEpochMs: 1,
          withdrawnInVersion: 2,
        },
      },
    };
    await table.store.put(stamped, 1);
    expect(await table.store.get(earlier.instanceId)).toEqual(stamped);
  });

  it('reads an item written before the schema stamp, and before IPv6, as a record without /80s', async () => {
    const old = nodeRecordFixture({ instanceId: 'i-00000000000000034' });
    await table.client.send(
      new PutItemCommand({
        TableName: table.tableName,
        Item: marshall(old, { removeUndefinedValues: true }),
      }),
    );
    const read = await table.store.get(old.instanceId);
    expect(read).toEqual(old);
    expect(read?.enis.every((eni) => eni.ipv6Prefixes === undefined)).toBe(true);
  });

  it('answers undefined for an instance without a record', async () => {
    expect(await table.store.get('i-0000000000000dead')).toBeUndefined();
  });

  it('writes the next version only when the stored version is the one read', async () => {
    const record = nodeRecordFixture({ instanceId: 'i-00000000000000002' });
    await table.store.put(record, undefined);
    await table.store.put({ ...record, version: 2, nodeName: 'renamed' }, 1);

    const stale = table.store.put({ ...record, version: 2, nodeName: 'lost update' }, 1);
    await expect(stale).rejects.toBeInstanceOf(VersionConflictError);
    await expect(stale).rejects.toMatchObject({
      expectedVersion: 1,
      current: { version: 2, nodeName: 'renamed' },
    });
    expect((await table.store.get(record.instanceId))?.nodeName).toBe('renamed');
  });

  it('rejects an item over 400 KB, as DynamoDB does (so the size test above proves something)', async () => {
    const oversized = nodeRecordFixture({
      instanceId: 'i-00000000000000005',
      nodeName: 'x'.repeat(401 * 1024),
    });
    expect(dynamoItemSizeBytes(oversized)).toBeGreaterThan(DYNAMODB_ITEM_LIMIT_BYTES);
    await expect(table.store.put(oversized, undefined)).rejects.toThrow(/size/i);
  });

  it('refuses a record whose version is not one past the version read, without writing', async () => {
    const record = nodeRecordFixture({ instanceId: 'i-00000000000000003' });
    await expect(table.store.put({ ...record, version: 5 }, undefined)).rejects.toThrow(/must be 1/);
    expect(await table.store.get(record.instanceId)).toBeUndefined();
  });

  it('lets exactly one of many concurrent writers of the same version win', async () => {
    const record = nodeRecordFixture({ instanceId: 'i-00000000000000004' });
    await table.store.put(record, undefined);
    const attempts = await Promise.allSettled(
      Array.from({ length: 20 }, (_, writer) =>
        table.store.put({ ...record, version: 2, nodeName: `writer-${writer}` }, 1),
      ),
    );
    const winners = attempts.filter((attempt) => attempt.status === 'fulfilled');
    const losers = attempts.filter((attempt) => attempt.status === 'rejected');
    expect(winners).toHaveLength(1);
    expect(losers.every((loser) => loser.reason instanceof VersionConflictError)).toBe(true);
  });

  it('pages through every record', async () => {
    const listed: string[] = [];
    let pageToken: string | undefined;
    do {
      const page = await table.store.listPage(pageToken);
      listed.push(...page.records.map((record) => record.instanceId));
      pageToken = page.nextPageToken;
    } while (pageToken);
    expect(listed).toEqual(expect.arrayContaining(['i-00000000000000001', 'i-00000000000000002']));
  });

  it('stores a fully allocated m5.24xlarge (15 ENIs x 49 IPs) well inside the 400 KB item limit', async () => {
    const full = nodeRecordFixture({
      instanceId: 'i-00000000000000024',
      instanceType: 'm5.24xlarge',
      enis: Array.from({ length: 15 }, (_, deviceIndex) =>
        eniFixture(deviceIndex, 49, {
          tags: { 'io.cilium/cilium-managed': 'true', 'io.cilium/cluster-name': 'prod' },
        }),
      ),
    });
    const prefixed = nodeRecordFixture({
      instanceId: 'i-00000000000000025',
      instanceType: 'm5.24xlarge',
      prefixDelegation: true,
      enis: Array.from({ length: 15 }, (_, deviceIndex) =>
        eniFixture(deviceIndex, 0, {
          prefixes: Array.from({ length: 49 }, (_, i) => `10.${16 + deviceIndex}.${i}.0/28`),
        }),
      ),
    });
    for (const record of [full, prefixed]) {
      await table.store.put(record, undefined);
      expect(await table.store.get(record.instanceId)).toEqual(record);
      // DynamoDB Local enforces the 400 KB limit itself; the size by AWS's rules shows the headroom.
      expect(dynamoItemSizeBytes(record)).toBeLessThan(DYNAMODB_ITEM_LIMIT_BYTES / 8);
    }
  });
});
