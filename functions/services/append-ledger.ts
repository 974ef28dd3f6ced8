import { type LedgerEntry, type LedgerStreamRecord, ledgerEntriesFor } from '../core/ip-ledger.ts';
import type { Log } from '../core/ports.ts';

/** Where ledger entries go: appended idempotently (`DynamoIpLedger`). */
export interface LedgerSink {
  append(entries: readonly LedgerEntry[]): Promise<{ written: number; alreadyWritten: number }>;
}

export interface LedgerBatchSummary {
  readonly written: number;
  readonly alreadyWritten: number;
  readonly rejected: number;
  /** The first record whose entries could not be written, and every record after it, for Lambda to redeliver. */
  readonly failedSequenceNumbers: readonly string[];
}

/**
 * Appends the entries of a stream batch, record by record in stream order. A record that cannot
 * be read is logged and skipped. When a write fails, the batch stops there and that record is
 * reported as the first failure, so Lambda redelivers it and everything after it, in order; the
 * entries it already wrote are refused again by their keys, so the redelivery writes nothing twice.
 */
export async function appendLedgerBatch(
  records: readonly LedgerStreamRecord[],
  ledger: LedgerSink,
  retentionDays: number,
  log: Log,
): Promise<LedgerBatchSummary> {
  let written = 0;
  let alreadyWritten = 0;
  let rejected = 0;
  for (const [index, record] of records.entries()) {
    if (record.action === 'reject') {
      rejected += 1;
      log.error('skipped a stream record the ledger cannot read', { ...record });
      continue;
    }
    try {
      const result = await ledger.append(ledgerEntriesFor(record.change, retentionDays));
      written += result.written;
      alreadyWritten += result.alreadyWritten;
    } catch (error) {
      log.error('ledger write failed; the batch is redelivered from this record', {
        sequenceNumber: record.sequenceNumber,
        error: String(error),
      });
      const failed = records.slice(index).map((later) => later.sequenceNumber);
      return { written, alreadyWritten, rejected, failedSequenceNumbers: failed };
    }
  }
  return { written, alreadyWritten, rejected, failedSequenceNumbers: [] };
}
