import { InvalidInputError } from './errors.ts';
import type { WatchTrigger } from './watch-plan.ts';

/**
 * The allocate function's direct-invoke request from the CiliumNode watcher:
 * `{"task":"serve-node","instanceId":"i-…","allocate":true,"release":false}`. The watcher holds
 * no EC2 or node-table rights and writes nothing to Kubernetes; it names the node and what to run,
 * and the allocate function runs the sweep's release and allocation paths for it. Pure.
 */
export const SERVE_NODE_TASK = 'serve-node';

export function serveNodeRequest(trigger: WatchTrigger): Record<string, unknown> {
  return {
    task: SERVE_NODE_TASK,
    instanceId: trigger.instanceId,
    allocate: trigger.allocate,
    release: trigger.release,
  };
}

/**
 * The request, when `event` is one; `undefined` when it is not a serve-node request at all (an EC2
 * event, for the caller's own parser). A serve-node request that is malformed throws, naming why.
 */
export function parseServeNodeRequest(event: unknown): WatchTrigger | undefined {
  if (typeof event !== 'object' || event === null) return undefined;
  const request = event as Record<string, unknown>;
  if (request.task !== SERVE_NODE_TASK) return undefined;
  const { instanceId, allocate, release } = request;
  if (typeof instanceId !== 'string' || !/^i-[0-9a-f]{8,17}$/.test(instanceId)) {
    throw new InvalidInputError(`instanceId must be an instance id, got ${JSON.stringify(instanceId)}`);
  }
  if (typeof allocate !== 'boolean' || typeof release !== 'boolean') {
    throw new InvalidInputError('allocate and release must be booleans');
  }
  return { instanceId, allocate, release };
}

export class ServeNodeRequestError extends Error {
  override readonly name = 'ServeNodeRequestError';
}
