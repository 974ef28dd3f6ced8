import type { Context } from 'aws-lambda';
import { InvalidInputError } from '../core/errors.ts';
import { decodeWatchRequest } from '../core/task-requests.ts';
import { handlerEdge, invocationMetrics } from '../runtime/handler-edge.ts';
import { createLog } from '../runtime/logger.ts';
import { MetricsSink, watchMetrics } from '../runtime/metrics.ts';
import { buildWatchDependencies } from '../runtime/watch-dependencies.ts';
import { type WatchSummary, watchCiliumNodes } from '../services/watch-ciliumnodes.ts';

const log = createLog('serverless-eni-ipam-watch');
const dependencies = buildWatchDependencies(process.env, log);
const metrics = new MetricsSink();

/**
 * `{"task":"watch"}` (or a plain EventBridge scheduled event), every minute: holds the CiliumNode
 * watch for `WATCH_SECONDS` or until `DRAIN_SECONDS` before the function's timeout, whichever
 * comes first, then hands the lease over (see `watchCiliumNodes`). Anything else is refused
 * (`decodeWatchRequest`, through the handler edge).
 */
export const handler = handlerEdge<
  'watch',
  WatchSummary,
  Pick<Context, 'awsRequestId' | 'getRemainingTimeInMillis'>
>({
  log,
  metrics,
  decode: decodeWatchRequest,
  warmUp: () => dependencies.prepareKubernetes(),
  handle: async (_task, context) => {
    const watchMs = Math.min(dependencies.watchMs, context.getRemainingTimeInMillis() - dependencies.drainMs);
    if (watchMs <= 0) throw new InvalidInputError('the function timeout leaves no time to watch');
    const summary = await watchCiliumNodes(
      { ...dependencies, invocationId: context.awsRequestId },
      Date.now() + watchMs,
    );
    metrics.add(watchMetrics(summary));
    return summary;
  },
  invocationMetrics,
});
