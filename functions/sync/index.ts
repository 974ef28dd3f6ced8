import type { DynamoDBBatchResponse } from 'aws-lambda';
import { handlerEdge, invocationMetrics } from '../runtime/handler-edge.ts';
import { createLog } from '../runtime/logger.ts';
import { MetricsSink, syncMetrics, tallySyncs } from '../runtime/metrics.ts';
import { SyncAllFailedError, type SyncAllSummary, syncAll, syncEach } from '../services/sync-all.ts';
import { type SyncNodeSummary, syncNode } from '../services/sync-node.ts';
import { buildSyncDependencies } from './dependencies.ts';
import { decodeSyncRequest, type SyncRequest } from './request.ts';

const log = createLog('serverless-eni-ipam-sync');
const dependencies = buildSyncDependencies(process.env, log);
const metrics = new MetricsSink();

export type SyncHandlerResult = DynamoDBBatchResponse | SyncNodeSummary | SyncAllSummary;

/**
 * The sync Lambda.
 * - DynamoDB stream batch: each instance is synced once, whatever number of records name it (the
 *   sync reads the LATEST record with a consistent read, so stale or redelivered records are
 *   no-ops); REMOVE records are ignored; records naming no valid instance are logged and skipped.
 *   Answers a partial batch response listing only the records of instances whose sync failed.
 * - `{"instanceId":"i-…"}`: syncs that node and returns its summary.
 * - `{"all":true}`: syncs every node; throws `SyncAllFailedError` if any failed (after trying all).
 * - anything else: throws `InvalidInputError`, having written nothing (the handler edge's rule).
 */
export const handler = handlerEdge<SyncRequest, SyncHandlerResult, void>({
  log,
  metrics,
  decode: decodeSyncRequest,
  warmUp: () => dependencies.prepareKubernetes(),
  handle: (request) => handle(request),
  invocationMetrics,
});

async function handle(request: SyncRequest): Promise<SyncHandlerResult> {
  switch (request.kind) {
    case 'one': {
      const summary = await syncNode(request.instanceId, dependencies);
      metrics.add(syncMetrics(tallySyncs([summary], 0)));
      return summary;
    }
    case 'all': {
      const summary = await syncAll(dependencies, { concurrency: dependencies.concurrency });
      metrics.add(syncMetrics({ ...summary, failed: summary.failed.length }));
      if (summary.failed.length > 0) throw new SyncAllFailedError(summary);
      return summary;
    }
    case 'stream': {
      for (const record of request.records) {
        if (record.action === 'reject') {
          log.error('skipped a stream record that names no instance', { ...record });
        }
      }
      const toSync = request.records.flatMap((record) => (record.action === 'sync' ? [record] : []));
      const results = await syncEach(
        toSync.map((record) => record.instanceId),
        dependencies,
        { concurrency: dependencies.concurrency },
      );
      metrics.add(
        syncMetrics(
          tallySyncs(
            results.flatMap((result) => (result.ok ? [result.summary] : [])),
            results.filter((result) => !result.ok).length,
          ),
        ),
      );
      const failedInstances = new Set(
        results.filter((result) => !result.ok).map((result) => result.instanceId),
      );
      return {
        batchItemFailures: toSync
          .filter((record) => failedInstances.has(record.instanceId))
          .map((record) => ({ itemIdentifier: record.sequenceNumber })),
      };
    }
  }
}
