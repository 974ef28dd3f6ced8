import { InvalidInputError } from './errors.ts';
import type { WatchTrigger } from './watch-plan.ts';

/**
 * The allocate function's direct-invoke request from the CiliumNode watcher:
 * `{"task":"serve-nodes","nodes":[{"instanceId":"i-…","allocate":true,"release":false},…]}`, up to
 * `MAX_NODES_PER_REQUEST` distinct nodes, served at once by one invocation. The watcher holds no
 * EC2 or node-table rights and writes nothing to Kubernetes; it names the nodes and what to run,
 * and the allocate function runs the sweep's release and allocation paths for each. The one-node
 * form an earlier watcher sends (`{"task":"serve-node","instanceId":…,"allocate":…,"release":…}`)
 * is still read, so an allocate function updated before the watcher keeps serving it. Pure.
 */
export const SERVE_NODES_TASK = 'serve-nodes';
const SERVE_ONE_NODE_TASK = 'serve-node';

/** Most nodes one request names: what one allocate invocation serves at once. */
export const MAX_NODES_PER_REQUEST = 50;

export function serveNodesRequest(triggers: readonly WatchTrigger[]): Record<string, unknown> {
  return {
    task: SERVE_NODES_TASK,
    nodes: triggers.map(({ instanceId, allocate, release }) => ({ instanceId, allocate, release })),
  };
}

/**
 * The nodes `event` names, when it is a serve request; `undefined` when it is not one at all (an
 * EC2 event, for the caller's own parser). A serve request that is malformed throws, naming why.
 */
export function parseServeNodesRequest(event: unknown): WatchTrigger[] | undefined {
  if (typeof event !== 'object' || event === null) return undefined;
  const request = event as Record<string, unknown>;
  if (request.task === SERVE_ONE_NODE_TASK) return [parseNode(request, 'the request')];
  if (request.task !== SERVE_NODES_TASK) return undefined;
  const { nodes } = request;
  if (!Array.isArray(nodes) || nodes.length === 0 || nodes.length > MAX_NODES_PER_REQUEST) {
    throw new InvalidInputError(`nodes must be a list of 1 to ${MAX_NODES_PER_REQUEST} nodes`);
  }
  const triggers = nodes.map((node: unknown, index) => {
    if (typeof node !== 'object' || node === null)
      throw new InvalidInputError(`nodes[${index}] must be an object`);
    return parseNode(node as Record<string, unknown>, `nodes[${index}]`);
  });
  const instanceIds = new Set(triggers.map((trigger) => trigger.instanceId));
  if (instanceIds.size !== triggers.length) throw new InvalidInputError('nodes must name each instance once');
  return triggers;
}

function parseNode(node: Record<string, unknown>, where: string): WatchTrigger {
  const { instanceId, allocate, release } = node;
  if (typeof instanceId !== 'string' || !/^i-[0-9a-f]{8,17}$/.test(instanceId)) {
    throw new InvalidInputError(
      `${where}: instanceId must be an instance id, got ${JSON.stringify(instanceId)}`,
    );
  }
  if (typeof allocate !== 'boolean' || typeof release !== 'boolean') {
    throw new InvalidInputError(`${where}: allocate and release must be booleans`);
  }
  return { instanceId, allocate, release };
}
