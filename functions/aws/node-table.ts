import { ConditionalCheckFailedException, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  type DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  type PutCommandInput,
  ScanCommand,
} from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { NewerRecordSchemaError, VersionConflictError } from '../core/errors.ts';
import type { NodeRecord } from '../core/model.ts';
import type { NodeRecordStore } from '../core/ports.ts';
import {
  MalformedRecordError,
  type UnreadableRecord,
  UnreadableRecordsError,
} from '../core/unreadable-records.ts';
import { documentClientOf } from './document-client.ts';
import { decodeNodeRecord } from './node-record-schema.ts';
import { nodeTableSchema } from './node-table-schema.ts';

const KEY = nodeTableSchema.partitionKey.name;
const VERSION = nodeTableSchema.versionAttribute;
const SCHEMA_VERSION = nodeTableSchema.schemaVersionAttribute;
const RECORD_SCHEMA_VERSION = nodeTableSchema.recordSchemaVersion;

/** The lowest record layout that holds `record` (see `nodeTableSchema.schemaVersionAttribute`). */
function recordSchemaVersionOf(record: NodeRecord): number {
  return record.enis.some((eni) => (eni.ipv6Prefixes ?? []).length > 0) ? 2 : 1;
}

/**
 * An item as a record: refuses one a newer release wrote (`NewerRecordSchemaError`) and one that
 * is no node record of this layout (`MalformedRecordError`, naming the first field that is wrong
 * and what was found there: `nodeRecordSchema`), and strips the schema stamp, which is the
 * adapter's business, not the model's. Attributes the schema does not declare are dropped.
 */
export function recordOf(item: Record<string, unknown>): NodeRecord {
  const { [SCHEMA_VERSION]: schemaVersion = 1, ...attributes } = item;
  if (typeof schemaVersion !== 'number' || schemaVersion > RECORD_SCHEMA_VERSION) {
    throw new NewerRecordSchemaError(String(item[KEY]), Number(schemaVersion), RECORD_SCHEMA_VERSION);
  }
  const decoded = decodeNodeRecord(attributes);
  if (!decoded.ok) throw new MalformedRecordError(String(item[KEY]), decoded.field, decoded.problem);
  return decoded.record;
}

/** `recordOf`, or why not: a newer layout or a malformed item is reported, anything else thrown. */
function readItem(item: Record<string, unknown>): NodeRecord | UnreadableRecord {
  try {
    return recordOf(item);
  } catch (error) {
    if (!(error instanceof NewerRecordSchemaError || error instanceof MalformedRecordError)) throw error;
    return { instanceId: String(item[KEY]), error: `${error.name}: ${error.message}` };
  }
}

/**
 * The node table over DynamoDB. Every write is a conditional Put on the version read (or on the
 * item's absence for the first write); a failed condition comes back as `VersionConflictError`
 * carrying the current item (`ReturnValuesOnConditionCheckFailure: ALL_OLD`, which costs no read).
 * Only `ConditionalCheckFailedException` is translated; every other error is rethrown untouched.
 */
export class DynamoNodeRecordStore implements NodeRecordStore {
  private readonly documents: DynamoDBDocumentClient;

  constructor(
    client: DynamoDBClient,
    private readonly tableName: string,
  ) {
    this.documents = documentClientOf(client);
  }

  async get(instanceId: string): Promise<NodeRecord | undefined> {
    const result = await this.documents.send(
      new GetCommand({ TableName: this.tableName, Key: { [KEY]: instanceId }, ConsistentRead: true }),
    );
    return result.Item ? recordOf(result.Item) : undefined;
  }

  async put(record: NodeRecord, expectedVersion: number | undefined): Promise<void> {
    const requiredVersion = (expectedVersion ?? 0) + 1;
    if (record.version !== requiredVersion) {
      throw new Error(
        `node record ${record.instanceId}: version ${record.version} must be ${requiredVersion} (one past the version read)`,
      );
    }
    const condition: Pick<
      PutCommandInput,
      'ConditionExpression' | 'ExpressionAttributeNames' | 'ExpressionAttributeValues'
    > =
      expectedVersion === undefined
        ? { ConditionExpression: 'attribute_not_exists(#key)', ExpressionAttributeNames: { '#key': KEY } }
        : {
            // Never over a record of a newer schema (a newer release wrote it since our read).
            ConditionExpression:
              '#version = :expectedVersion AND (attribute_not_exists(#schema) OR #schema <= :schema)',
            ExpressionAttributeNames: { '#version': VERSION, '#schema': SCHEMA_VERSION },
            ExpressionAttributeValues: {
              ':expectedVersion': expectedVersion,
              ':schema': RECORD_SCHEMA_VERSION,
            },
          };
    try {
      await this.documents.send(
        new PutCommand({
          TableName: this.tableName,
          Item: { ...record, [SCHEMA_VERSION]: recordSchemaVersionOf(record) },
          ...condition,
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) {
        // The old item comes back as raw AttributeValues, even through the document client.
        const current = error.Item ? recordOf(unmarshall(error.Item)) : undefined;
        throw new VersionConflictError(record.instanceId, expectedVersion, current, { cause: error });
      }
      throw error;
    }
  }

  /**
   * One page of the scan. An item that is no record of ours (newer layout, malformed) does not
   * hide the others: the page is read to its end and, if any was unreadable, thrown as
   * `UnreadableRecordsError` carrying the readable records and the continuation. Whole-table
   * readers that can serve the rest catch it (`readRecordPage`); the others stop there.
   */
  async listPage(pageToken?: string): Promise<{ records: NodeRecord[]; nextPageToken?: string }> {
    const result = await this.documents.send(
      new ScanCommand({
        TableName: this.tableName,
        ExclusiveStartKey: pageToken ? { [KEY]: decodePageToken(pageToken) } : undefined,
      }),
    );
    const lastKey = result.LastEvaluatedKey?.[KEY];
    const read = (result.Items ?? []).map(readItem);
    const page = {
      records: read.filter((item): item is NodeRecord => 'version' in item),
      ...(typeof lastKey === 'string' ? { nextPageToken: encodePageToken(lastKey) } : {}),
    };
    const unreadable = read.filter((item): item is UnreadableRecord => !('version' in item));
    if (unreadable.length > 0) throw new UnreadableRecordsError(page, unreadable);
    return page;
  }
}

function encodePageToken(instanceId: string): string {
  return Buffer.from(instanceId, 'utf8').toString('base64url');
}

function decodePageToken(token: string): string {
  return Buffer.from(token, 'base64url').toString('utf8');
}
