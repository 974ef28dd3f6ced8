import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import * as z from 'zod/mini';
import { recordOf } from '../aws/node-table.ts';
import { type Decoded, decodeWith } from '../core/input-schema.ts';
import type { LedgerStreamRecord, RecordChange } from '../core/ip-ledger.ts';

/**
 * A batch of the node table's stream as the ledger reads it: per record, the record versions
 * before and after (`OldImage`, `NewImage`; the stream must carry both), in stream order.
 */

const streamBatch = z.object({
  Records: z
    .array(
      z.object({
        eventSourceARN: z.string().check(z.includes('/stream/', 'must be a DynamoDB stream')),
        eventName: z.enum(['INSERT', 'MODIFY', 'REMOVE']),
        dynamodb: z.object({
          SequenceNumber: z.string(),
          ApproximateCreationDateTime: z.optional(z.number()),
          OldImage: z.optional(z.record(z.string(), z.unknown())),
          NewImage: z.optional(z.record(z.string(), z.unknown())),
        }),
      }),
    )
    .check(z.minLength(1, 'must hold at least one record')),
});

type StreamRecord = z.infer<typeof streamBatch>['Records'][number];

/** Decodes a batch; a malformed batch is refused whole, an unreadable image only skips its record. */
export function decodeLedgerBatch(event: unknown): Decoded<LedgerStreamRecord[]> {
  const batch = decodeWith(streamBatch, event);
  if (!batch.ok) return { ok: false, reason: `a DynamoDB stream batch: ${batch.reason}` };
  return { ok: true, value: batch.value.Records.map(recordRequest) };
}

function recordRequest(record: StreamRecord): LedgerStreamRecord {
  const sequenceNumber = record.dynamodb.SequenceNumber;
  const {
    OldImage: oldImage,
    NewImage: newImage,
    ApproximateCreationDateTime: seenAtSeconds,
  } = record.dynamodb;
  if (record.eventName !== 'INSERT' && oldImage === undefined) {
    return {
      sequenceNumber,
      action: 'reject',
      reason: `a ${record.eventName} record without OldImage: the node table's stream must be NEW_AND_OLD_IMAGES`,
    };
  }
  try {
    const change: RecordChange = {
      oldRecord: oldImage === undefined ? undefined : recordOfImage(oldImage),
      newRecord: newImage === undefined ? undefined : recordOfImage(newImage),
      ...(newImage === undefined && seenAtSeconds !== undefined
        ? { removedAtEpochMs: Math.round(seenAtSeconds * 1000) }
        : {}),
    };
    return { sequenceNumber, action: 'ledger', change };
  } catch (error) {
    return {
      sequenceNumber,
      action: 'reject',
      reason: `${(error as Error).name}: ${(error as Error).message}`,
    };
  }
}

function recordOfImage(image: Record<string, unknown>) {
  return recordOf(unmarshall(image as Record<string, AttributeValue>));
}
