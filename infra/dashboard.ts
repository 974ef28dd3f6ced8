import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type { Construct } from 'constructs';
import { SERVICE_NAMES } from './service-names.ts';

/**
 * One CloudWatch dashboard per stack (`ServerlessEniIpam-<cluster>`): the nodes and their deficit,
 * allocation work and blocks, sync writes and failures, ENI garbage collection (from the functions'
 * EMF metrics, in the cluster's namespace, each under its function's own service), and the alarms'
 * state at a glance.
 */
export function addDashboard(
  scope: Construct,
  namespace: string,
  alarms: readonly cloudwatch.IAlarm[],
): void {
  const metric = (service: string, metricName: string, statistic = 'Maximum') =>
    new cloudwatch.Metric({
      namespace,
      metricName,
      dimensionsMap: { service },
      statistic,
      period: Duration.minutes(1),
    });
  const graph = (title: string, metrics: cloudwatch.IMetric[]) =>
    new cloudwatch.GraphWidget({ title, left: metrics, width: 6 });
  new cloudwatch.Dashboard(scope, 'Dashboard', {
    widgets: [
      [
        graph('Nodes', [
          metric(SERVICE_NAMES.Sweep, 'ipam_nodes'),
          metric(SERVICE_NAMES.Sweep, 'ipam_nodes_in_deficit'),
          metric(SERVICE_NAMES.Sweep, 'ipam_sweep_failures'),
        ]),
        graph('Allocation', [
          metric(SERVICE_NAMES.Allocate, 'ipam_ip_allocation_ops', 'Sum'),
          metric(SERVICE_NAMES.Allocate, 'ipam_interface_creation_ops', 'Sum'),
          metric(SERVICE_NAMES.Allocate, 'ipam_allocation_blocked', 'Sum'),
          metric(SERVICE_NAMES.Allocate, 'ipam_allocate_events_failed', 'Sum'),
        ]),
        graph('Sync', [
          metric(SERVICE_NAMES.Sync, 'ipam_k8s_sync_writes', 'Sum'),
          metric(SERVICE_NAMES.Sync, 'ipam_k8s_sync_failures', 'Sum'),
          metric(SERVICE_NAMES.Sync, 'ipam_k8s_sync_refused_foreign', 'Sum'),
        ]),
        graph('ENI garbage collection', [
          metric(SERVICE_NAMES.GarbageCollection, 'ipam_eni_gc_candidates', 'Sum'),
          metric(SERVICE_NAMES.GarbageCollection, 'ipam_eni_gc_deleted', 'Sum'),
          metric(SERVICE_NAMES.GarbageCollection, 'ipam_eni_gc_failed', 'Sum'),
        ]),
      ],
      [new cloudwatch.AlarmStatusWidget({ title: 'Alarms', alarms: [...alarms], width: 24 })],
    ],
  });
}
