import { randomUUID } from 'node:crypto';
import { CreateTableCommand, DynamoDBClient, UpdateTimeToLiveCommand } from '@aws-sdk/client-dynamodb';
import { DynamoNodeRecordStore } from '../../functions/aws/node-table.ts';
import { nodeTableSchema } from '../../functions/aws/node-table-schema.ts';

export interface TestNodeTable {
  readonly client: DynamoDBClient;
  readonly tableName: string;
  readonly store: DynamoNodeRecordStore;
  readonly streamArn: string;
}

/**
 * Creates a fresh node table in DynamoDB Local from the same schema the CDK stack uses
 * (`nodeTableSchema`): key, stream view type and TTL attribute.
 */
export async function createTestNodeTable(client = new DynamoDBClient({})): Promise<TestNodeTable> {
  const tableName = `nodes-${randomUUID()}`;
  const { partitionKey, streamViewType, timeToLiveAttribute } = nodeTableSchema;
  const created = await client.send(
    new CreateTableCommand({
      TableName: tableName,
      AttributeDefinitions: [{ AttributeName: partitionKey.name, AttributeType: partitionKey.type }],
      KeySchema: [{ AttributeName: partitionKey.name, KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
      StreamSpecification: { StreamEnabled: true, StreamViewType: streamViewType },
    }),
  );
  await client.send(
    new UpdateTimeToLiveCommand({
      TableName: tableName,
      TimeToLiveSpecification: { AttributeName: timeToLiveAttribute, Enabled: true },
    }),
  );
  const streamArn = created.TableDescription?.LatestStreamArn;
  if (!streamArn) throw new Error(`table ${tableName} was created without a stream`);
  return { client, tableName, store: new DynamoNodeRecordStore(client, tableName), streamArn };
}
