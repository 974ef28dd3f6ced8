import type { Context } from 'aws-lambda';
import { InvalidInputError } from '../core/errors.ts';
import { buildAllocationDependencies } from '../runtime/allocation-dependencies.ts';
import { createLog } from '../runtime/logger.ts';
import { garbageCollectionMetrics, MetricsSink, sweepMetrics } from '../runtime/metrics.ts';
import { collectEniGarbage, type GarbageCollectionSummary } from '../services/node-lifecycle.ts';
import { type SweepSummary, sweep } from '../services/sweep.ts';

const log = createLog('serverless-eni-ipam-sweep');
const dependencies = buildAllocationDependencies(process.env, log);
const metrics = new MetricsSink();

/** Nodes reconciled at once: enough to finish a large cluster within a minute, small enough for EC2's buckets. */
const SWEEP_CONCURRENCY = 16;
/** cilium-operator deletes at most 25 ENIs per interval; we allow a few more per run. */
const MAX_ENI_DELETIONS_PER_RUN = 50;

export type SweepTask = 'sweep' | 'eni-garbage-collection';

/**
 * Scheduled work: `{"task":"sweep"}` (also a plain EventBridge scheduled event) reconciles every
 * node and, with `RELEASE_EXCESS_IPS=true`, moves each node's excess-IP release handshake on (marks
 * kept on the node item, so the `EXCESS_IP_RELEASE_DELAY_SECONDS` delay survives cold starts);
 * `{"task":"eni-garbage-collection"}` deletes leaked ENIs. Anything else is refused.
 */
export function parseSweepRequest(event: unknown): SweepTask {
  if (typeof event === 'object' && event !== null) {
    const request = event as Record<string, unknown>;
    if (request.task === 'sweep' || request['detail-type'] === 'Scheduled Event') return 'sweep';
    if (request.task === 'eni-garbage-collection') return 'eni-garbage-collection';
  }
  throw new InvalidInputError(
    `expected {"task":"sweep"} or {"task":"eni-garbage-collection"}, got ${JSON.stringify(event)?.slice(0, 200)}`,
  );
}

export async function handler(
  event: unknown,
  context: Pick<Context, 'awsRequestId'>,
): Promise<SweepSummary | GarbageCollectionSummary> {
  const task = parseSweepRequest(event);
  if (task === 'sweep') dependencies.prepareKubernetes();
  try {
    if (task === 'eni-garbage-collection') {
      const summary = await collectEniGarbage(dependencies.lifecycle, {
        graceMs: dependencies.eniGarbageCollectionGraceMs,
        maxDeletionsPerRun: MAX_ENI_DELETIONS_PER_RUN,
      });
      metrics.add(garbageCollectionMetrics(summary));
      return summary;
    }
    const summary = await sweep({
      ...dependencies,
      concurrency: SWEEP_CONCURRENCY,
      invocationId: context.awsRequestId,
      preAgentKnobs: dependencies.preAgentKnobsForInvocation(),
    });
    metrics.add(sweepMetrics(summary));
    return summary;
  } finally {
    metrics.flush();
  }
}
