import type { DemandTracker } from './demand.ts';
import { renderDemand } from './demand.ts';
import type { LocalCloud } from './local-cloud.ts';
import { renderDenials, renderSummary } from './summary.ts';

/**
 * What `npm start` redraws every second (and prints once under `--once`): the Kubernetes API
 * server, the nodes, the denials, the last demand and how long its pool took (when a tracker
 * is given), and each function's invocations.
 */
export async function renderLiveTable(
  cloud: LocalCloud,
  options: {
    readonly recentErrors: readonly string[];
    readonly demand?: DemandTracker;
    readonly nowMs?: number;
  },
): Promise<string> {
  const lines = [
    kubernetesLine(cloud),
    renderSummary(await cloud.summary()),
    renderDenials(await cloud.denials()),
    ...(options.demand === undefined ? [] : [renderDemand(options.demand, options.nowMs ?? Date.now())]),
    describeActivity(cloud, options.recentErrors),
  ];
  return lines.join('\n');
}

/** Which Kubernetes API server the cloud runs on: `kube-apiserver v1.36.3`, or the emulator. */
export function kubernetesLine(cloud: Pick<LocalCloud, 'k8s'>): string {
  return cloud.k8s.backend === 'emulator' ? 'Kubernetes emulator' : `kube-apiserver ${cloud.k8s.version}`;
}

/** Invocations per function (the watcher's among them), the stream's progress, what was given up. */
export function describeActivity(
  cloud: Pick<LocalCloud, 'functionStats' | 'streamStats' | 'asyncFailures' | 'streamFailures'>,
  recentErrors: readonly string[],
): string {
  const invocations = Object.entries(cloud.functionStats())
    .map(
      ([logicalId, stats]) =>
        `${logicalId.replace(/Function[0-9A-F]{8}$/, '')} ${stats.invocations} (${stats.failures} failed, ${stats.coldStarts} cold, ${stats.running} running)`,
    )
    .join(', ');
  const stream = cloud.streamStats();
  const lines = [
    `invocations: ${invocations}`,
    `stream: ${stream.recordsRead} records, ${stream.batchesInvoked} batches, ${stream.batchFailures} failed batches, ${stream.recordsDiscarded} records given up`,
    `given up: ${cloud.asyncFailures.length} async invocations, ${cloud.streamFailures.length} stream batches`,
  ];
  if (recentErrors.length > 0)
    lines.push('recent function errors:', ...recentErrors.map((line) => `  ${line}`));
  return lines.join('\n');
}
