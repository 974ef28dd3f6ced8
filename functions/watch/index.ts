import type { Context } from 'aws-lambda';
import { InvalidInputError } from '../core/errors.ts';
import { createLog } from '../runtime/logger.ts';
import { buildWatchDependencies } from '../runtime/watch-dependencies.ts';
import { type WatchSummary, watchCiliumNodes } from '../services/watch-ciliumnodes.ts';

const log = createLog('serverless-eni-ipam-watch');
const dependencies = buildWatchDependencies(process.env, log);

/**
 * `{"task":"watch"}` (or a plain EventBridge scheduled event), every minute: holds the CiliumNode
 * watch for `WATCH_SECONDS` or until `DRAIN_SECONDS` before the function's timeout, whichever
 * comes first, then hands the lease over (see `watchCiliumNodes`). Anything else is refused.
 */
export async function handler(
  event: unknown,
  context: Pick<Context, 'awsRequestId' | 'getRemainingTimeInMillis'>,
): Promise<WatchSummary> {
  parseWatchRequest(event);
  dependencies.prepareKubernetes();
  const watchMs = Math.min(dependencies.watchMs, context.getRemainingTimeInMillis() - dependencies.drainMs);
  if (watchMs <= 0) throw new InvalidInputError('the function timeout leaves no time to watch');
  return await watchCiliumNodes(
    { ...dependencies, invocationId: context.awsRequestId },
    Date.now() + watchMs,
  );
}

export function parseWatchRequest(event: unknown): 'watch' {
  if (typeof event === 'object' && event !== null) {
    const request = event as Record<string, unknown>;
    if (request.task === 'watch' || request['detail-type'] === 'Scheduled Event') return 'watch';
  }
  throw new InvalidInputError(`expected {"task":"watch"}, got ${JSON.stringify(event)?.slice(0, 200)}`);
}
