import type { DynamoDBBatchResponse } from 'aws-lambda';
import type { LedgerStreamRecord } from '../core/ip-ledger.ts';
import { handlerEdge, invocationMetrics } from '../runtime/handler-edge.ts';
import { createLog } from '../runtime/logger.ts';
import { MetricsSink } from '../runtime/metrics.ts';
import { appendLedgerBatch } from '../services/append-ledger.ts';
import { buildLedgerDependencies } from './dependencies.ts';
import { decodeLedgerBatch } from './request.ts';

const log = createLog('serverless-eni-ipam-ledger');
const dependencies = buildLedgerDependencies(process.env);
const metrics = new MetricsSink();

/**
 * The ledger Lambda, the node table stream's second consumer: appends the IP ledger's entries of
 * each record (`functions/core/ip-ledger.ts`), in stream order. Answers a partial batch response
 * naming the first record it could not write, so Lambda redelivers from there; a redelivered
 * record's entries are refused by their keys and written once. A malformed batch is refused.
 */
export const handler = handlerEdge<LedgerStreamRecord[], DynamoDBBatchResponse, void>({
  log,
  metrics,
  decode: decodeLedgerBatch,
  handle: async (records) => {
    const summary = await appendLedgerBatch(records, dependencies.ledger, dependencies.retentionDays, log);
    metrics.add([
      { name: 'ipam_ledger_entries_written', value: summary.written, unit: 'Count' },
      { name: 'ipam_ledger_entries_replayed', value: summary.alreadyWritten, unit: 'Count' },
      { name: 'ipam_ledger_records_rejected', value: summary.rejected, unit: 'Count' },
    ]);
    return {
      batchItemFailures: summary.failedSequenceNumbers.map((itemIdentifier) => ({ itemIdentifier })),
    };
  },
  invocationMetrics,
});
