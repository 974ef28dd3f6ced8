import type { Context } from 'aws-lambda';
import { type Ec2Event, parseEc2Event } from '../core/events.ts';
import type { Decoded } from '../core/input-schema.ts';
import { decodeServeNodesRequest, isDirectInvoke } from '../core/serve-node-request.ts';
import type { WatchTrigger } from '../core/watch-plan.ts';
import { buildAllocationDependencies } from '../runtime/allocation-dependencies.ts';
import { handlerEdge } from '../runtime/handler-edge.ts';
import { createLog } from '../runtime/logger.ts';
import { allocateEventMetrics, allocationMetrics, MetricsSink, retireMetrics } from '../runtime/metrics.ts';
import { type AllocationOutcome, allocateNode } from '../services/allocate-node.ts';
import { drainNode, type RetireOutcome, reactivateNode, retireNode } from '../services/node-lifecycle.ts';
import { type ServedNode, serveNodes } from '../services/serve-node.ts';

const log = createLog('serverless-eni-ipam-allocate');
const dependencies = buildAllocationDependencies(process.env, log);
const metrics = new MetricsSink();

export type AllocateResult =
  | { readonly status: 'rejected'; readonly reason: string }
  | { readonly status: 'skipped'; readonly reason: string }
  | { readonly status: 'allocated'; readonly outcome: AllocationOutcome }
  | { readonly status: 'retired'; readonly outcome: RetireOutcome }
  | { readonly status: 'drained'; readonly outcome: 'drained' | 'skipped' }
  | { readonly status: 'served'; readonly nodes: readonly ServedNode[] };

/** What the allocate function is given: the watcher's serve request, or an EventBridge event. */
type AllocateInput =
  | { readonly kind: 'serve'; readonly triggers: readonly WatchTrigger[] }
  | { readonly kind: 'event'; readonly event: Ec2Event };

function decodeAllocateInput(event: unknown): Decoded<AllocateInput> {
  if (isDirectInvoke(event)) {
    const triggers = decodeServeNodesRequest(event);
    return triggers.ok ? { ok: true, value: { kind: 'serve', triggers: triggers.value } } : triggers;
  }
  const parsed = parseEc2Event(event);
  return parsed.ok ? { ok: true, value: { kind: 'event', event: parsed.value } } : parsed;
}

/**
 * EC2 events. `running` allocates (serving a draining node again first); `shutting-down` and
 * `terminated` retire the node; a spot interruption warning to `terminate` drains it (no new
 * allocation), one to `stop` or `hibernate` changes nothing. A malformed event is logged and
 * answered `rejected`, never thrown: EventBridge would only retry it. Transient failures throw, so
 * EventBridge retries. The CiliumNode watcher's direct invoke `{"task":"serve-nodes",...}` runs the
 * release step and the allocation it names for each node, all at once (`serveNodes`); the answer
 * lists each node's outcome or error, and a malformed request throws (its caller sees why).
 * Decoding, refusal and the metrics flush are the handler edge's (`handlerEdge`).
 */
export const handler = handlerEdge<AllocateInput, AllocateResult, Pick<Context, 'awsRequestId'>>({
  log,
  metrics,
  decode: decodeAllocateInput,
  answerInvalid: (reason, event) => (isDirectInvoke(event) ? undefined : { status: 'rejected', reason }),
  warmUp: () => dependencies.prepareKubernetes(),
  handle: (input, context) =>
    input.kind === 'serve' ? serveForWatcher(input.triggers, context) : handleEvent(input.event, context),
  invocationMetrics: (outcome) =>
    allocateEventMetrics(outcome.kind === 'handled' ? outcome.result.status : outcome.kind),
});

async function handleEvent(
  parsed: Ec2Event,
  context: Pick<Context, 'awsRequestId'>,
): Promise<AllocateResult> {
  switch (parsed.kind) {
    case 'scheduled':
      log.warn('scheduled events go to the sweep function, not here');
      return { status: 'skipped', reason: 'scheduled event' };
    case 'spot-interruption':
      if (parsed.action !== 'terminate') {
        log.info('spot interruption without termination; the node stays served', { ...parsed });
        return { status: 'skipped', reason: `spot interruption ${parsed.action}` };
      }
      return { status: 'drained', outcome: await drainNode(parsed.instanceId, dependencies.lifecycle) };
    case 'state-change': {
      if (parsed.state === 'shutting-down' || parsed.state === 'terminated') {
        const outcome = await retireNode(parsed.instanceId, dependencies.lifecycle);
        log.info('termination handled', { instanceId: parsed.instanceId, outcome });
        metrics.add(retireMetrics(outcome));
        return { status: 'retired', outcome };
      }
      if (parsed.state !== 'running') {
        log.info('no allocation work for this state', { instanceId: parsed.instanceId, state: parsed.state });
        return { status: 'skipped', reason: `state ${parsed.state}` };
      }
      const preAgentKnobs = dependencies.preAgentKnobsForInvocation();
      const allocate = () =>
        allocateNode(parsed.instanceId, {
          ...dependencies,
          invocationId: context.awsRequestId,
          preAgentKnobs,
        });
      let outcome = await allocate();
      // Only a node that is not active pays for the reactivation check (a draining node running again).
      if (
        outcome.kind === 'ignored' &&
        outcome.reason === 'not-active' &&
        (await reactivateNode(parsed.instanceId, dependencies.lifecycle)) === 'reactivated'
      ) {
        outcome = await allocate();
      }
      log.info('allocation finished', { instanceId: parsed.instanceId, outcome });
      metrics.add(allocationMetrics(outcome));
      return { status: 'allocated', outcome };
    }
  }
}

/** The watcher's nodes, served at once; each node's outcome logged and its allocation counted. */
async function serveForWatcher(
  triggers: readonly WatchTrigger[],
  context: Pick<Context, 'awsRequestId'>,
): Promise<AllocateResult> {
  const nodes = await serveNodes(triggers, {
    ...dependencies,
    invocationId: context.awsRequestId,
    preAgentKnobs: dependencies.preAgentKnobsForInvocation(),
  });
  for (const node of nodes) {
    log.info('served a node for the watcher', { ...node });
    if ('outcome' in node && node.outcome.kind === 'served' && node.outcome.allocation) {
      metrics.add(allocationMetrics(node.outcome.allocation));
    }
  }
  return { status: 'served', nodes };
}
