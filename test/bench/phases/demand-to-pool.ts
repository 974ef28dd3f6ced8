import type { AgentVersion } from '../../local-cloud/cilium-agent.ts';
import { type DemandOptions, type LatencyFigures, measureDemandLatency } from '../demand.ts';
import { type Figure, figure } from '../report.ts';
import type { BenchCloud } from './bench-cloud.ts';
import type { LaunchBurst } from './launch-burst.ts';
import type { SingleNodeRoundTrips } from './round-trips-alone.ts';
import type { BenchSettings } from './settings.ts';

/** Demand-to-pool latency, served by the watcher and by the scheduled sweep alone. */
export interface DemandToPool {
  readonly watcher: LatencyFigures;
  readonly sweepAlone: LatencyFigures;
}

/**
 * Pods start at once on up to `settings.demandNodes` m5.large nodes of the burst, first served by
 * the sweep alone, then by the watcher, each on full EC2 buckets. Undefined when the burst has no
 * such node (or none was asked for).
 */
export async function measureDemandToPool(
  bench: BenchCloud,
  burst: LaunchBurst,
  settings: BenchSettings,
): Promise<DemandToPool | undefined> {
  const { state } = bench.cloud.ec2;
  const nodeNames = burst.instanceIds
    .filter((instanceId) => state.instance(instanceId)?.instanceType === 'm5.large')
    .slice(0, settings.demandNodes)
    .map((instanceId) => burst.nodeNames.get(instanceId) as string);
  if (nodeNames.length === 0) return undefined;
  const sweepAlone = await demandLatency(bench, nodeNames, 'sweep', settings);
  const watcher = await demandLatency(bench, nodeNames, 'watcher', settings);
  return { watcher, sweepAlone };
}

async function demandLatency(
  bench: BenchCloud,
  nodeNames: readonly string[],
  mode: DemandOptions['mode'],
  settings: BenchSettings,
): Promise<LatencyFigures> {
  bench.cloud.ec2.throttling.reset();
  settings.onProgress(
    `demand-to-pool latency: pods start on ${nodeNames.length} nodes, ${mode === 'sweep' ? 'the sweep alone' : 'the watcher'}...`,
  );
  // Each node's new pods take 5 more pool IPs, past the pre-allocate watermark of 8 (as the notes say).
  return measureDemandLatency(bench.cloud, nodeNames, {
    newPods: 5,
    preAllocate: 8,
    scale: settings.scale,
    random: bench.random,
    timeoutMs: Math.max(150_000 / settings.scale, 60_000),
    mode,
  });
}

/**
 * p50, p99 and max for each way of serving, per agent version when both ran; beside the same chain
 * for one node alone (event to usable pool), in simulated seconds.
 */
export function demandFigures(
  { watcher, sweepAlone }: DemandToPool,
  singleNode: SingleNodeRoundTrips | undefined,
  scale: number,
): Figure[] {
  // Floor: the same chain for one node alone (event to usable pool), as measureRoundTripsAlone
  // measured it, less the latency its pass-throughs added to each round trip (this phase adds none).
  const chainMs = singleNode ? singleNode.elapsedMs - singleNode.addedLatencyMs * singleNode.roundTrips : 0;
  const floor = singleNode ? (Math.max(chainMs, 1) / 1000) * scale : undefined;
  const floorNote = `Floor: one node alone, EC2 event to usable pool (${singleNode ? `${singleNode.roundTrips} round trips, less the ${singleNode.addedLatencyMs} ms added to each` : 'n/a'}).`;
  const rows: Figure[] = [];
  for (const [mode, latency] of [
    ['watcher', watcher],
    ['sweep alone', sweepAlone],
  ] as const) {
    const versions = Object.keys(latency.byAgent) as AgentVersion[];
    // One set of rows per agent version when both ran (a mixed cluster), else one for all.
    const groups: [AgentVersion | undefined, Omit<LatencyFigures, 'byAgent'>][] =
      versions.length > 1
        ? versions.map((version) => [version, latency.byAgent[version] as Omit<LatencyFigures, 'byAgent'>])
        : [[versions[0], latency]];
    for (const [version, figures] of groups) {
      const suffix = versions.length > 1 ? `_${version?.replace('.', '_')}` : '';
      for (const [statistic, value] of [
        ['p50', figures.p50Seconds],
        ['p99', figures.p99Seconds],
        ['max', figures.maxSeconds],
      ] as const) {
        rows.push(
          figure({
            id: `demand_to_pool_${mode.replace(' ', '_')}${suffix}_${statistic}`,
            label: `demand to pool, ${mode}${versions.length > 1 ? `, ${version} agents` : ''}, ${statistic}`,
            value,
            reference: floor,
            unit: 'simulated s',
            note: `pods start at once on ${figures.nodes} m5.large nodes running ${version ?? '1.19'} agents (5 more pool IPs used each, past the pre-allocate watermark of 8); ${demandNote(version)} (${figures.served}/${figures.nodes} served). ${mode === 'watcher' ? 'One Watch invocation holds the watch; no sweep runs. Target: p99 <= 2 s.' : 'Only the scheduled sweep (every simulated minute) serves them; the pod starts fall at a seeded point of its period.'} ${floorNote}`,
          }),
        );
      }
    }
  }
  return rows;
}

function demandNote(version: AgentVersion | undefined): string {
  return version === '1.20'
    ? "from the agent's spec.ipam.pools.requested write to the first CiliumNode version whose status.eni.enis (non-excluded ENIs) holds the requested IPv4 addresses"
    : "from the agent's status.ipam.used write to the first CiliumNode version whose pool meets the watermark again";
}
