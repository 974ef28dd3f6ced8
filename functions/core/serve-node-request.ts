import * as z from 'zod/mini';
import { type Decoded, decodeWith, instanceIdSchema } from './input-schema.ts';
import type { NodeServiceResult } from './ports.ts';
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
const SERVE_NODES_TASK = 'serve-nodes';
const SERVE_ONE_NODE_TASK = 'serve-node';

/** Most nodes one request names: what one allocate invocation serves at once. */
export const MAX_NODES_PER_REQUEST = 50;

export function serveNodesRequest(triggers: readonly WatchTrigger[]): Record<string, unknown> {
  return {
    task: SERVE_NODES_TASK,
    nodes: triggers.map(({ instanceId, allocate, release }) => ({ instanceId, allocate, release })),
  };
}

const nodeFields = { instanceId: instanceIdSchema, allocate: z.boolean(), release: z.boolean() };
const nodesListed = `must list 1 to ${MAX_NODES_PER_REQUEST} nodes`;

const serveNodes = z.object({
  task: z.literal(SERVE_NODES_TASK),
  nodes: z.array(z.object(nodeFields), { error: nodesListed }).check(
    z.minLength(1, nodesListed),
    z.maxLength(MAX_NODES_PER_REQUEST, nodesListed),
    z.refine(
      (nodes) => new Set(nodes.map((node) => node.instanceId)).size === nodes.length,
      'must name each instance once',
    ),
  ),
});

const serveOneNode = z.object({ task: z.literal(SERVE_ONE_NODE_TASK), ...nodeFields });

const serveRequest = z.discriminatedUnion('task', [serveNodes, serveOneNode]);

/** Whether `event` is a direct invoke (it names a `task`), which is answered by throwing when malformed. */
export function isDirectInvoke(event: unknown): boolean {
  return typeof event === 'object' && event !== null && Object.hasOwn(event, 'task');
}

/** The nodes a serve request names, each with what to run. */
export function decodeServeNodesRequest(event: unknown): Decoded<WatchTrigger[]> {
  const decoded = decodeWith(serveRequest, event);
  if (!decoded.ok) return decoded;
  const request = decoded.value;
  const nodes = request.task === SERVE_NODES_TASK ? request.nodes : [request];
  return {
    ok: true,
    value: nodes.map(({ instanceId, allocate, release }) => ({ instanceId, allocate, release })),
  };
}

/**
 * The watcher's view of the allocate function's answer for each node (`ServedNode`, as JSON): the
 * nodes that failed, with their error, and those whose allocation backed off from another
 * invocation's lease, with its expiry (when the watcher asks again). Anything else was served.
 */
export function nodeServiceResult(nodes: readonly unknown[]): NodeServiceResult {
  const failures: { instanceId: string; error: string }[] = [];
  const held: { instanceId: string; leaseExpiresAtEpochMs: number }[] = [];
  for (const node of nodes as readonly ({
    instanceId?: unknown;
    error?: unknown;
    outcome?: unknown;
  } | null)[]) {
    const instanceId = String(node?.instanceId);
    if (typeof node?.error === 'string') failures.push({ instanceId, error: node.error });
    const allocation = (node?.outcome as { allocation?: { kind?: unknown; leaseExpiresAtEpochMs?: unknown } })
      ?.allocation;
    if (allocation?.kind === 'busy' && typeof allocation.leaseExpiresAtEpochMs === 'number') {
      held.push({ instanceId, leaseExpiresAtEpochMs: allocation.leaseExpiresAtEpochMs });
    }
  }
  return { failures, held };
}
