import * as z from 'zod/mini';
import { nodeTableSchema } from '../aws/node-table-schema.ts';
import { type Decoded, decodeWith, instanceIdSchema } from '../core/input-schema.ts';

/**
 * What the sync function is asked to do, decoded from its invocation payload. Pure.
 * - DynamoDB stream batches (from the node table's event-source mapping), told apart by their
 *   `Records`;
 * - direct invokes `{"instanceId":"i-…"}` (resync one node) and `{"all":true}` (resync every node,
 *   also what the resync schedule sends), nothing else beside them.
 */
export type SyncRequest =
  | { readonly kind: 'stream'; readonly records: readonly StreamRecordRequest[] }
  | { readonly kind: 'one'; readonly instanceId: string }
  | { readonly kind: 'all' };

/** One stream record: its sequence number (for partial batch responses) and what it asks for. */
type StreamRecordRequest =
  | { readonly sequenceNumber: string; readonly action: 'sync'; readonly instanceId: string }
  /** REMOVE (a retired record's TTL expiry): the CiliumNode left with its Node; nothing to do. */
  | { readonly sequenceNumber: string; readonly action: 'ignore-remove' }
  /** A record that names no valid instance: logged and skipped, since a retry cannot fix it. */
  | { readonly sequenceNumber: string; readonly action: 'reject'; readonly reason: string };

const DIRECT_PAYLOADS = 'expected {"instanceId":"i-…"} or {"all":true}';

/** A batch the node table's event-source mapping delivers: every record from a DynamoDB stream. */
const streamBatch = z.object({
  Records: z
    .array(
      z.object({ eventSourceARN: z.string().check(z.includes('/stream/', 'must be a DynamoDB stream')) }),
    )
    .check(z.minLength(1, 'must hold at least one record')),
});

/** One record's key: the instance id the item names (`Keys`, since the stream carries new images only). */
const streamRecordKey = z.object({
  dynamodb: z.object({
    Keys: z.object({ [nodeTableSchema.partitionKey.name]: z.object({ S: instanceIdSchema }) }),
  }),
});

const oneNode = z.strictObject({ instanceId: instanceIdSchema });
const allNodes = z.strictObject({ all: z.literal(true) });

/** Decodes an invocation payload; a malformed one is refused before anything is read or written. */
export function decodeSyncRequest(event: unknown): Decoded<SyncRequest> {
  if (hasOwn(event, 'Records')) {
    const batch = decodeWith(streamBatch, event);
    if (!batch.ok) return { ok: false, reason: `a DynamoDB stream batch: ${batch.reason}` };
    // Each record is read again on its own: one that names no instance is skipped, not the batch.
    return {
      ok: true,
      value: { kind: 'stream', records: (event as { Records: unknown[] }).Records.map(recordRequest) },
    };
  }
  const direct = hasOwn(event, 'instanceId') ? decodeWith(oneNode, event) : decodeWith(allNodes, event);
  if (!direct.ok) return { ok: false, reason: `${DIRECT_PAYLOADS}; ${direct.reason}` };
  return {
    ok: true,
    value: 'all' in direct.value ? { kind: 'all' } : { kind: 'one', instanceId: direct.value.instanceId },
  };
}

function recordRequest(record: unknown, index: number): StreamRecordRequest {
  const sequenceNumber = sequenceNumberOf(record) ?? `(record ${index})`;
  if (hasOwn(record, 'eventName') && (record as { eventName: unknown }).eventName === 'REMOVE') {
    return { sequenceNumber, action: 'ignore-remove' };
  }
  const key = decodeWith(streamRecordKey, record);
  if (!key.ok) return { sequenceNumber, action: 'reject', reason: key.reason };
  return {
    sequenceNumber,
    action: 'sync',
    instanceId: key.value.dynamodb.Keys[nodeTableSchema.partitionKey.name].S,
  };
}

const sequenceNumber = z.object({ dynamodb: z.object({ SequenceNumber: z.string() }) });

function sequenceNumberOf(record: unknown): string | undefined {
  const decoded = decodeWith(sequenceNumber, record);
  return decoded.ok ? decoded.value.dynamodb.SequenceNumber : undefined;
}

function hasOwn(value: unknown, key: string): boolean {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && Object.hasOwn(value, key);
}
