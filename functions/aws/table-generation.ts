import { DescribeTableCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { formatTableGeneration } from '../core/table-generation.ts';

/**
 * The node table's generation, `<table>@<creation time>` (`functions/core/table-generation.ts`),
 * from DescribeTable's `CreationDateTime`. The returned function calls DescribeTable once per
 * container (a table's creation time never changes) and shares that call between concurrent
 * callers; a failed call is not kept, so the next invocation asks again. Needs
 * `dynamodb:DescribeTable` on this table only.
 */
export function tableGenerationOf(client: DynamoDBClient, tableName: string): () => Promise<string> {
  let generation: Promise<string> | undefined;
  return () => {
    generation ??= describe(client, tableName).catch((error: unknown) => {
      generation = undefined;
      throw error;
    });
    return generation;
  };
}

async function describe(client: DynamoDBClient, tableName: string): Promise<string> {
  const { Table: table } = await client.send(new DescribeTableCommand({ TableName: tableName }));
  const created = table?.CreationDateTime;
  if (created === undefined) throw new Error(`DescribeTable ${tableName} returned no CreationDateTime`);
  return formatTableGeneration({ name: table?.TableName ?? tableName, createdAtEpochMs: created.getTime() });
}
