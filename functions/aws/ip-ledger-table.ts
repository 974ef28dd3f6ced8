import { ConditionalCheckFailedException, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { type DynamoDBDocumentClient, PutCommand, paginateQuery } from '@aws-sdk/lib-dynamodb';
import { type LedgerEntry, ledgerSortKey } from '../core/ip-ledger.ts';
import { documentClientOf } from './document-client.ts';

/**
 * The IP ledger table (`functions/core/ip-ledger.ts`): the ONE definition of its keys and TTL that
 * the CDK stack, this adapter and the tests build from. One item per entry: partition key the
 * address (`10.0.3.17`, `10.0.3.16/28`), sort key `ledgerSortKey` (time first), so one Query reads
 * an address's whole history in order.
 */
export const ipLedgerTableSchema = {
  partitionKey: { name: 'address', type: 'S' },
  sortKey: { name: 'entryKey', type: 'S' },
  timeToLiveAttribute: 'expiresAtEpochSeconds',
} as const;

const ADDRESS = ipLedgerTableSchema.partitionKey.name;
const ENTRY_KEY = ipLedgerTableSchema.sortKey.name;

/** How many puts one `append` keeps in flight. */
const PUT_CONCURRENCY = 10;

export class DynamoIpLedger {
  private readonly documents: DynamoDBDocumentClient;

  constructor(
    client: DynamoDBClient,
    private readonly tableName: string,
  ) {
    this.documents = documentClientOf(client);
  }

  /**
   * Appends entries; idempotent. Each is a put conditioned on its key being absent: an entry a
   * redelivered stream record yields again has the same key and content, so its put is refused
   * (`ConditionalCheckFailedException`, counted as already written) and nothing is overwritten.
   * Every other error is thrown, after the puts in flight settle. Returns how many were new.
   */
  async append(entries: readonly LedgerEntry[]): Promise<{ written: number; alreadyWritten: number }> {
    let written = 0;
    let alreadyWritten = 0;
    for (let start = 0; start < entries.length; start += PUT_CONCURRENCY) {
      const results = await Promise.allSettled(
        entries.slice(start, start + PUT_CONCURRENCY).map((entry) => this.putNew(entry)),
      );
      for (const result of results) {
        if (result.status === 'rejected') throw result.reason;
        if (result.value) written += 1;
        else alreadyWritten += 1;
      }
    }
    return { written, alreadyWritten };
  }

  private async putNew(entry: LedgerEntry): Promise<boolean> {
    try {
      await this.documents.send(
        new PutCommand({
          TableName: this.tableName,
          Item: ledgerItemOf(entry),
          ConditionExpression: 'attribute_not_exists(#address)',
          ExpressionAttributeNames: { '#address': ADDRESS },
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw error;
    }
  }

  /** Every entry kept for these addresses (the keys `ledgerAddressesCovering` gives), in time order per address. */
  async entriesOf(addresses: readonly string[]): Promise<LedgerEntry[]> {
    const entries: LedgerEntry[] = [];
    for (const address of addresses) {
      const pages = paginateQuery(
        { client: this.documents },
        {
          TableName: this.tableName,
          KeyConditionExpression: '#address = :address',
          ExpressionAttributeNames: { '#address': ADDRESS },
          ExpressionAttributeValues: { ':address': address },
        },
      );
      for await (const page of pages) {
        for (const item of page.Items ?? []) entries.push(entryOf(item));
      }
    }
    return entries;
  }
}

/** The item of an entry: the entry's fields, plus its two keys. */
export function ledgerItemOf(entry: LedgerEntry): Record<string, unknown> {
  return { ...entry, [ENTRY_KEY]: ledgerSortKey(entry) };
}

function entryOf(item: Record<string, unknown>): LedgerEntry {
  const { [ENTRY_KEY]: _key, ...entry } = item;
  return entry as unknown as LedgerEntry;
}
