import { ConditionalCheckFailedException, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { WatchLeaseStore, WatchLeaseView } from '../core/ports.ts';

/** The watch-state table's key attribute; the stack builds the table from it. */
export const WATCH_STATE_KEY = 'watch';
/** The one watch there is: CiliumNodes. */
const CILIUM_NODES = 'ciliumnodes';

/**
 * The watcher's lease and resume point, one item in the watch-state table: `holder` and
 * `leaseExpiresAtEpochMs` (single flight: one watcher at a time) and `resourceVersion` (where the
 * next watcher resumes). Every write is conditional: taking the lease on its absence, expiry or our
 * own holding; renewing, checkpointing and releasing on our holding. A lost condition answers
 * `false` (the lease moved on; stop watching), never throws.
 */
export class DynamoWatchLeaseStore implements WatchLeaseStore {
  private readonly documents: DynamoDBDocumentClient;

  constructor(
    client: DynamoDBClient,
    private readonly tableName: string,
  ) {
    this.documents = DynamoDBDocumentClient.from(client);
  }

  async read(): Promise<WatchLeaseView> {
    const { Item } = await this.documents.send(
      new GetCommand({
        TableName: this.tableName,
        Key: { [WATCH_STATE_KEY]: CILIUM_NODES },
        ConsistentRead: true,
      }),
    );
    return toView(Item);
  }

  async acquire(
    holder: string,
    nowEpochMs: number,
    leaseMs: number,
    endsAtEpochMs: number,
  ): Promise<WatchLeaseView | undefined> {
    return this.update(
      'SET holder = :holder, leaseExpiresAtEpochMs = :expires, endsAtEpochMs = :ends',
      'attribute_not_exists(holder) OR leaseExpiresAtEpochMs <= :now OR holder = :holder',
      { ':holder': holder, ':expires': nowEpochMs + leaseMs, ':now': nowEpochMs, ':ends': endsAtEpochMs },
    );
  }

  async renew(
    holder: string,
    nowEpochMs: number,
    leaseMs: number,
    resourceVersion?: string,
  ): Promise<boolean> {
    const checkpoint = resourceVersion === undefined ? '' : ', resourceVersion = :rv';
    const values: Record<string, unknown> = { ':holder': holder, ':expires': nowEpochMs + leaseMs };
    if (resourceVersion !== undefined) values[':rv'] = resourceVersion;
    return (
      (await this.update(`SET leaseExpiresAtEpochMs = :expires${checkpoint}`, 'holder = :holder', values)) !==
      undefined
    );
  }

  async release(holder: string, resourceVersion?: string): Promise<boolean> {
    const values: Record<string, unknown> = { ':holder': holder };
    if (resourceVersion !== undefined) values[':rv'] = resourceVersion;
    const set = resourceVersion === undefined ? '' : 'SET resourceVersion = :rv ';
    return (
      (await this.update(
        `${set}REMOVE holder, leaseExpiresAtEpochMs, endsAtEpochMs`,
        'holder = :holder',
        values,
      )) !== undefined
    );
  }

  private async update(
    expression: string,
    condition: string,
    values: Record<string, unknown>,
  ): Promise<WatchLeaseView | undefined> {
    try {
      const { Attributes } = await this.documents.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { [WATCH_STATE_KEY]: CILIUM_NODES },
          UpdateExpression: expression,
          ConditionExpression: condition,
          ExpressionAttributeValues: values,
          ReturnValues: 'ALL_NEW',
        }),
      );
      return toView(Attributes);
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return undefined;
      throw error;
    }
  }
}

function toView(item: Record<string, unknown> | undefined): WatchLeaseView {
  const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
  const number = (value: unknown) => (typeof value === 'number' ? value : undefined);
  return {
    holder: text(item?.holder),
    leaseExpiresAtEpochMs: number(item?.leaseExpiresAtEpochMs),
    endsAtEpochMs: number(item?.endsAtEpochMs),
    resourceVersion: text(item?.resourceVersion),
  };
}
