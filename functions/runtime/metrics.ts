import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import { assignedAddressCount } from '../core/allocation-round.ts';
import type { AllocationOutcome } from '../services/allocate-node.ts';
import type { GarbageCollectionSummary, RetireOutcome } from '../services/node-lifecycle.ts';
import type { SweepSummary } from '../services/sweep.ts';
import type { SyncNodeSummary, SyncOutcome } from '../services/sync-node.ts';
import type { WatchSummary } from '../services/watch-ciliumnodes.ts';

/**
 * CloudWatch metrics (Embedded Metric Format through Powertools), named after cilium-operator's
 * `cilium_operator_ipam_*` series so dashboards translate: `ipam_needed_ips`,
 * `ipam_interface_creation_ops`, `ipam_ip_allocation_ops`, ... The mapping from outcomes to points
 * is pure (and tested); `MetricsSink` only buffers and flushes them once per invocation.
 */
export interface MetricPoint {
  readonly name: string;
  readonly value: number;
  readonly unit: 'Count' | 'Milliseconds';
}

const count = (name: string, value: number): MetricPoint => ({ name, value, unit: 'Count' });

export function allocationMetrics(outcome: AllocationOutcome): MetricPoint[] {
  switch (outcome.kind) {
    case 'ignored':
      return [count(`ipam_allocation_ignored_${outcome.reason.replaceAll('-', '_')}`, 1)];
    case 'busy':
      return [count('ipam_allocation_busy', 1)];
    case 'reconciled': {
      let created = 0;
      let assigned = 0;
      for (const result of outcome.results) {
        if (result.kind === 'created') created++;
        if (result.kind === 'assigned') assigned += assignedAddressCount(result);
      }
      return [
        count('ipam_needed_ips', outcome.neededIps),
        count('ipam_interface_creation_ops', created),
        count('ipam_ip_allocation_ops', assigned),
        count('ipam_allocation_blocked', outcome.blocked ? 1 : 0),
        count('ipam_agent_protocol_transitions', outcome.protocolTransition ? 1 : 0),
        // A call our role may not make: the stack's policy and the allocator disagree.
        count('ipam_ec2_unauthorized', outcome.deniedAction === undefined ? 0 : 1),
      ];
    }
  }
}

/**
 * One point per allocate invocation, named after what became of the event (`allocated`, `retired`,
 * `drained`, `skipped`, `rejected`, or `failed` when the handler threw), so every invocation has
 * at least one point to publish and a failing event still counts.
 */
export function allocateEventMetrics(
  status: 'rejected' | 'skipped' | 'allocated' | 'retired' | 'drained' | 'served' | 'failed',
): MetricPoint[] {
  return [count(`ipam_allocate_events_${status}`, 1)];
}

export function retireMetrics(outcome: RetireOutcome): MetricPoint[] {
  return outcome.kind === 'retired'
    ? [count('ipam_nodes_retired', 1), count('ipam_interface_deletion_ops', outcome.deletedEniIds.length)]
    : [];
}

export function sweepMetrics(summary: SweepSummary): MetricPoint[] {
  const reconciled = Object.values(summary.reconciled).reduce((sum, value) => sum + value, 0);
  return [
    count('ipam_nodes', summary.clusterInstances),
    count('ipam_resync_total', 1),
    count('ipam_nodes_reconciled', reconciled),
    count('ipam_nodes_in_deficit', summary.reconciled['needs-ips'] ?? 0),
    count('ipam_nodes_drifted', summary.reconciled.drift ?? 0),
    count('ipam_nodes_retired', summary.retired),
    count('ipam_nodes_crd_protocol', summary.agentProtocols.crd),
    count('ipam_nodes_multi_pool_protocol', summary.agentProtocols['multi-pool']),
    count('ipam_sweep_failures', summary.failed.length),
  ];
}

export function garbageCollectionMetrics(summary: GarbageCollectionSummary): MetricPoint[] {
  return [
    count('ipam_eni_gc_candidates', summary.candidates),
    count('ipam_eni_gc_deleted', summary.deleted.length),
    count('ipam_eni_gc_failed', summary.failed),
  ];
}

/** What a sync invocation did, whether it synced one node, a stream batch or every node. */
export interface SyncTally {
  readonly nodes: number;
  readonly writes: number;
  readonly outcomes: Readonly<Partial<Record<SyncOutcome, number>>>;
  readonly failed: number;
}

export function tallySyncs(summaries: readonly SyncNodeSummary[], failed: number): SyncTally {
  const outcomes: Partial<Record<SyncOutcome, number>> = {};
  for (const summary of summaries) outcomes[summary.outcome] = (outcomes[summary.outcome] ?? 0) + 1;
  return {
    nodes: summaries.length + failed,
    writes: summaries.reduce((sum, summary) => sum + summary.writes, 0),
    outcomes,
    failed,
  };
}

export function syncMetrics(tally: SyncTally): MetricPoint[] {
  return [
    count('ipam_k8s_sync_nodes', tally.nodes),
    count('ipam_k8s_sync_writes', tally.writes),
    count('ipam_k8s_sync_failures', tally.failed),
    count('ipam_k8s_sync_refused_foreign', tally.outcomes['refused-foreign'] ?? 0),
    count('ipam_k8s_sync_refused_unpublishable', tally.outcomes['refused-unpublishable'] ?? 0),
    count('ipam_k8s_sync_stale', tally.outcomes.stale ?? 0),
  ];
}

/**
 * One watch invocation: the CiliumNode events it read, the relists (410 Gone) and reconnects it
 * needed, and the nodes it handed to the allocate function (`failed`: their invocation failed, so
 * the sweep serves them). A watcher that never holds the lease shows as `ipam_watch_lease_held`.
 */
export function watchMetrics(summary: WatchSummary): MetricPoint[] {
  return [
    count(`ipam_watch_${summary.outcome.replaceAll('-', '_')}`, 1),
    count('ipam_watch_events', summary.events),
    count('ipam_watch_relists', summary.relists),
    count('ipam_watch_reconnects', summary.reconnects),
    count('ipam_watch_nodes_allocated', summary.served.allocate),
    count('ipam_watch_nodes_released', summary.served.release),
    count('ipam_watch_serve_failures', summary.served.failed),
  ];
}

/** Buffers points and flushes them as one EMF document per invocation. */
export class MetricsSink {
  private readonly metrics = new Metrics();

  add(points: readonly MetricPoint[]): void {
    for (const point of points) {
      this.metrics.addMetric(point.name, MetricUnit[point.unit], point.value);
    }
  }

  flush(): void {
    this.metrics.publishStoredMetrics();
  }
}
