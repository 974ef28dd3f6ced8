import { nodeTableSchema } from '../aws/node-table-schema.ts';
import { InvalidInputError } from '../core/errors.ts';

/**
 * What the sync function is asked to do, parsed from its invocation payload. Pure.
 * - DynamoDB stream batches (from the node table's event-source mapping);
 * - direct invokes `{"instanceId":"i-…"}` (resync one node) and `{"all":true}` (resync every node,
 *   also what the resync schedule sends).
 */
export type SyncRequest =
  | { readonly kind: 'stream'; readonly records: readonly StreamRecordRequest[] }
  | { readonly kind: 'one'; readonly instanceId: string }
  | { readonly kind: 'all' };

/** One stream record: its sequence number (for partial batch responses) and what it asks for. */
export type StreamRecordRequest =
  | { readonly sequenceNumber: string; readonly action: 'sync'; readonly instanceId: string }
  /** REMOVE (a retired record's TTL expiry): the CiliumNode left with its Node; nothing to do. */
  | { readonly sequenceNumber: string; readonly action: 'ignore-remove' }
  /** A record that names no valid instance: logged and skipped, since a retry cannot fix it. */
  | { readonly sequenceNumber: string; readonly action: 'reject'; readonly reason: string };

export const INSTANCE_ID_PATTERN = /^i-[0-9a-f]{8,17}$/;

const PAYLOAD_PREVIEW_CHARS = 200;

/**
 * Parses an invocation payload. Throws `InvalidInputError` for anything that is neither a stream
 * batch nor one of the two direct payloads (nothing will have been written).
 */
export function parseSyncRequest(event: unknown): SyncRequest {
  if (isStreamBatch(event)) {
    return { kind: 'stream', records: event.Records.map(parseStreamRecord) };
  }
  if (isObject(event)) {
    const keys = Object.keys(event);
    if (keys.length === 1 && event.all === true) return { kind: 'all' };
    if (
      keys.length === 1 &&
      typeof event.instanceId === 'string' &&
      INSTANCE_ID_PATTERN.test(event.instanceId)
    ) {
      return { kind: 'one', instanceId: event.instanceId };
    }
  }
  throw new InvalidInputError(`expected {"instanceId":"i-…"} or {"all":true}, got ${preview(event)}`);
}

interface StreamBatch {
  Records: unknown[];
}

/** A batch whose every record comes from a DynamoDB stream (`…/stream/…` source ARN). */
function isStreamBatch(event: unknown): event is StreamBatch {
  if (!isObject(event) || !Array.isArray(event.Records) || event.Records.length === 0) return false;
  return event.Records.every(
    (record) =>
      isObject(record) &&
      typeof record.eventSourceARN === 'string' &&
      record.eventSourceARN.includes('/stream/'),
  );
}

function parseStreamRecord(record: unknown, index: number): StreamRecordRequest {
  const streamRecord = isObject(record) && isObject(record.dynamodb) ? record.dynamodb : {};
  const sequenceNumber =
    typeof streamRecord.SequenceNumber === 'string' ? streamRecord.SequenceNumber : `(record ${index})`;
  if (isObject(record) && record.eventName === 'REMOVE') return { sequenceNumber, action: 'ignore-remove' };
  const keys = isObject(streamRecord.Keys) ? streamRecord.Keys : {};
  const keyAttribute = keys[nodeTableSchema.partitionKey.name];
  const instanceId = isObject(keyAttribute) ? keyAttribute.S : undefined;
  if (typeof instanceId !== 'string' || !INSTANCE_ID_PATTERN.test(instanceId)) {
    return {
      sequenceNumber,
      action: 'reject',
      reason: `no valid ${nodeTableSchema.partitionKey.name} key: ${preview(streamRecord.Keys)}`,
    };
  }
  return { sequenceNumber, action: 'sync', instanceId };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function preview(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = String(value);
  }
  return text.length > PAYLOAD_PREVIEW_CHARS ? `${text.slice(0, PAYLOAD_PREVIEW_CHARS)}…` : text;
}
