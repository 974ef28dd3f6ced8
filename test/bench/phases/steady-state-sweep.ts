import type { SynthesizedStack } from '../../local-cloud/synthesize.ts';
import { type Figure, figure } from '../report.ts';
import { type InvocationCost, measureSweepCost, type SweepCost } from '../sweep-cost.ts';
import { formatCounts } from './counts.ts';
import type { BenchSettings } from './settings.ts';

/**
 * One steady-state sweep's cost (and the resync's and the ENI garbage collection's after it) at
 * each of `settings.sweepCostNodes` cluster sizes, each on a fresh local cloud of the same stack
 * (see `measureSweepCost`), one size after the other.
 */
export async function measureSteadyStateSweeps(
  stack: SynthesizedStack,
  dynamoDbEndpoint: string,
  settings: BenchSettings,
): Promise<SweepCost[]> {
  const sweepCosts: SweepCost[] = [];
  for (const nodes of settings.sweepCostNodes) {
    settings.onProgress(`one steady-state sweep at ${nodes} nodes...`);
    sweepCosts.push(await measureSweepCost(stack, dynamoDbEndpoint, nodes, settings.onProgress));
  }
  return sweepCosts;
}

export function sweepCostFigures(cost: SweepCost): Figure[] {
  const ec2Total = Object.values(cost.ec2Calls).reduce((sum, calls) => sum + calls, 0);
  const note = `one {"task":"sweep"} invocation of the stack's Sweep function after ${cost.nodes} nodes were allocated and published (nothing changed since), read off pass-throughs${cost.failure ? `; THE SWEEP FAILED (${cost.failure}), so the figures are of the part it did` : ''}.`;
  return [
    figure({
      id: `sweep_cost_ec2_calls_${cost.nodes}`,
      label: `steady-state sweep, ${cost.nodes} nodes, EC2 calls`,
      value: ec2Total,
      reference: Math.ceil(cost.nodes / 1000),
      unit: 'calls',
      note: `${note} Calls: ${formatCounts(cost.ec2Calls)}. Floor: one filtered DescribeInstances page per 1000 instances (nothing changed, nothing else to ask).`,
    }),
    figure({
      id: `sweep_cost_rcu_${cost.nodes}`,
      label: `steady-state sweep, ${cost.nodes} nodes, DynamoDB read units`,
      value: cost.dynamoDbReadUnits,
      reference: 0,
      unit: 'RCU',
      note: `${note} An eventually consistent Scan of every record: half a unit per 4 KB of items (item sizes by DynamoDB's rules); ${cost.dynamoDbWrites} writes. Floor 0: with nothing changed nothing needs reading (the platform offers no change feed the sweep could read instead, short of the stream the sync consumes).`,
    }),
    figure({
      id: `sweep_cost_k8s_bytes_${cost.nodes}`,
      label: `steady-state sweep, ${cost.nodes} nodes, bytes listed from the API server`,
      value: cost.kubernetesListBytes,
      reference: 0,
      unit: 'bytes',
      note: `${note} Response bytes of CiliumNode LIST requests; ${cost.kubernetesWrites} Kubernetes writes. Floor 0 (a watch delivers only changes).`,
    }),
    figure({
      id: `sweep_cost_lambda_ms_${cost.nodes}`,
      label: `steady-state sweep, ${cost.nodes} nodes, Lambda time`,
      value: cost.lambdaMs,
      reference: 0,
      unit: 'ms',
      note: `${note} Wall time of the invocation on the local cloud (billed duration on Lambda is of this order at 512 MB). Floor 0: nothing changed.`,
    }),
    ...scheduledWorkFigures(
      'resync',
      'the resync ({"all":true} to the Sync function, every minute)',
      cost.nodes,
      cost.resync,
    ),
    ...scheduledWorkFigures(
      'gc',
      'the ENI garbage collection ({"task":"eni-garbage-collection"}, every 5 minutes)',
      cost.nodes,
      cost.garbageCollection,
    ),
  ];
}

/** The resync's and the garbage collection's cost in the same steady state as the sweep's. */
function scheduledWorkFigures(key: string, what: string, nodes: number, cost: InvocationCost): Figure[] {
  const ec2Total = Object.values(cost.ec2Calls).reduce((sum, calls) => sum + calls, 0);
  const note = `one run of ${what} right after the steady-state sweep at ${nodes} nodes, read off pass-throughs: EC2 calls ${ec2Total} (${formatCounts(cost.ec2Calls)}), ${cost.dynamoDbWrites} DynamoDB writes, ${cost.kubernetesListBytes} bytes listed, ${cost.kubernetesWrites} Kubernetes writes${cost.failure ? `; IT FAILED (${cost.failure})` : ''}. Read units: half a unit per 4 KB of items for a Scan, one per GetItem. Floor 0: nothing changed.`;
  return [
    figure({
      id: `${key}_cost_rcu_${nodes}`,
      label: `steady-state ${key}, ${nodes} nodes, DynamoDB read units`,
      value: cost.dynamoDbReadUnits,
      reference: 0,
      unit: 'RCU',
      note,
    }),
    figure({
      id: `${key}_cost_lambda_ms_${nodes}`,
      label: `steady-state ${key}, ${nodes} nodes, Lambda time`,
      value: cost.lambdaMs,
      reference: 0,
      unit: 'ms',
      note,
    }),
  ];
}
