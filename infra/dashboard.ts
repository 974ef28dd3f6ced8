import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import type { Construct } from 'constructs';

const SWEEP_SERVICE = 'serverless-eni-ipam-sweep';
const ALLOCATE_SERVICE = 'serverless-eni-ipam-allocate';
const SYNC_SERVICE = 'serverless-eni-ipam-sync';

/**
 * One CloudWatch dashboard per stack (`ServerlessEniIpam-<cluster>`): the nodes and their deficit,
 * allocation work and blocks, sync writes and failures (from the functions' EMF metrics, in the
 * cluster's namespace), and the alarms' state at a glance.
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
    new cloudwatch.GraphWidget({ title, left: metrics, width: 8 });
  new cloudwatch.Dashboard(scope, 'Dashboard', {
    widgets: [
      [
        graph('Nodes', [
          metric(SWEEP_SERVICE, 'ipam_nodes'),
          metric(SWEEP_SERVICE, 'ipam_nodes_in_deficit'),
          metric(SWEEP_SERVICE, 'ipam_sweep_failures'),
        ]),
        graph('Allocation', [
          metric(ALLOCATE_SERVICE, 'ipam_ip_allocation_ops', 'Sum'),
          metric(ALLOCATE_SERVICE, 'ipam_interface_creation_ops', 'Sum'),
          metric(ALLOCATE_SERVICE, 'ipam_allocation_blocked', 'Sum'),
          metric(ALLOCATE_SERVICE, 'ipam_allocate_events_failed', 'Sum'),
        ]),
        graph('Sync', [
          metric(SYNC_SERVICE, 'ipam_k8s_sync_writes', 'Sum'),
          metric(SYNC_SERVICE, 'ipam_k8s_sync_failures', 'Sum'),
          metric(SYNC_SERVICE, 'ipam_k8s_sync_refused_foreign', 'Sum'),
        ]),
      ],
      [new cloudwatch.AlarmStatusWidget({ title: 'Alarms', alarms: [...alarms], width: 24 })],
    ],
  });
}
