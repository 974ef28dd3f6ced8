import type { Context } from 'aws-lambda';
import { parseEc2Event } from '../core/events.ts';
import { parseServeNodeRequest } from '../core/serve-node-request.ts';
import { buildAllocationDependencies } from '../runtime/allocation-dependencies.ts';
import { createLog } from '../runtime/logger.ts';
import { allocateEventMetrics, allocationMetrics, MetricsSink, retireMetrics } from '../runtime/metrics.ts';
import { type AllocationOutcome, allocateNode } from '../services/allocate-node.ts';
import { drainNode, type RetireOutcome, reactivateNode, retireNode } from '../services/node-lifecycle.ts';
import { type ServeNodeOutcome, serveNode } from '../services/serve-node.ts';

const log = createLog('serverless-eni-ipam-allocate');
const dependencies = buildAllocationDependencies(process.env, log);
const metrics = new MetricsSink();

export type AllocateResult =
  | { readonly status: 'rejected'; readonly reason: string }
  | { readonly status: 'skipped'; readonly reason: string }
  | { readonly status: 'allocated'; readonly outcome: AllocationOutcome }
  | { readonly status: 'retired'; readonly outcome: RetireOutcome }
  | { readonly status: 'drained'; readonly outcome: 'drained' | 'skipped' }
  | { readonly status: 'served'; readonly outcome: ServeNodeOutcome };

/**
 * EC2 events. `running` allocates (serving a draining node again first); `shutting-down` and
 * `terminated` retire the node; a spot interruption warning to `terminate` drains it (no new
 * allocation), one to `stop` or `hibernate` changes nothing. A malformed event is logged and answered,
 * never thrown: EventBridge would only retry it. Transient failures throw, so EventBridge retries.
 * The CiliumNode watcher's direct invoke `{"task":"serve-node",...}` (`parseServeNodeRequest`) runs
 * the release step and the allocation it names for one node (`serveNode`); a failure throws back
 * to the watcher, and a malformed request throws too (a direct invoke is not retried).
 * Every invocation, thrown or not, flushes its metrics as one EMF document: Powertools publishes
 * on its own only at 100 stored values, so without the flush a quiet function's points are lost.
 */
export async function handler(
  event: unknown,
  context: Pick<Context, 'awsRequestId'>,
): Promise<AllocateResult> {
  dependencies.prepareKubernetes();
  let result: AllocateResult | undefined;
  try {
    result = await handle(event, context);
    return result;
  } finally {
    metrics.add(allocateEventMetrics(result?.status ?? 'failed'));
    metrics.flush();
  }
}

async function handle(event: unknown, context: Pick<Context, 'awsRequestId'>): Promise<AllocateResult> {
  const serveRequest = parseServeNodeRequest(event);
  if (serveRequest !== undefined) {
    const outcome = await serveNode(serveRequest, {
      ...dependencies,
      invocationId: context.awsRequestId,
      preAgentKnobs: dependencies.preAgentKnobsForInvocation(),
    });
    log.info('served a node for the watcher', { ...serveRequest, outcome });
    if (outcome.kind === 'served' && outcome.allocation) metrics.add(allocationMetrics(outcome.allocation));
    return { status: 'served', outcome };
  }
  const parsed = parseEc2Event(event);
  switch (parsed.kind) {
    case 'invalid':
      log.error('rejected a malformed event; nothing was written', { reason: parsed.reason });
      return { status: 'rejected', reason: parsed.reason };
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
