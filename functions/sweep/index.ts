import type { Context } from 'aws-lambda';
import { decodeSweepRequest, type SweepTask } from '../core/task-requests.ts';
import { buildAllocationDependencies } from '../runtime/allocation-dependencies.ts';
import { handlerEdge, invocationMetrics } from '../runtime/handler-edge.ts';
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

/**
 * Scheduled work: `{"task":"sweep"}` (also a plain EventBridge scheduled event) reconciles every
 * node and, with `RELEASE_EXCESS_IPS=true`, moves each node's excess-IP release handshake on (marks
 * kept on the node item, so the `EXCESS_IP_RELEASE_DELAY_SECONDS` delay survives cold starts);
 * `{"task":"eni-garbage-collection"}` deletes leaked ENIs. Anything else is refused
 * (`decodeSweepRequest`, through the handler edge).
 */
export const handler = handlerEdge<
  SweepTask,
  SweepSummary | GarbageCollectionSummary,
  Pick<Context, 'awsRequestId'>
>({
  log,
  metrics,
  decode: decodeSweepRequest,
  warmUp: (task) => {
    if (task === 'sweep') dependencies.prepareKubernetes();
  },
  handle: (task, context) => (task === 'sweep' ? runSweep(context) : collectGarbage()),
  invocationMetrics,
});

async function collectGarbage(): Promise<GarbageCollectionSummary> {
  const summary = await collectEniGarbage(dependencies.lifecycle, {
    graceMs: dependencies.eniGarbageCollectionGraceMs,
    maxDeletionsPerRun: MAX_ENI_DELETIONS_PER_RUN,
  });
  metrics.add(garbageCollectionMetrics(summary));
  return summary;
}

async function runSweep(context: Pick<Context, 'awsRequestId'>): Promise<SweepSummary> {
  const summary = await sweep({
    ...dependencies,
    concurrency: SWEEP_CONCURRENCY,
    invocationId: context.awsRequestId,
    preAgentKnobs: dependencies.preAgentKnobsForInvocation(),
  });
  metrics.add(sweepMetrics(summary));
  return summary;
}
