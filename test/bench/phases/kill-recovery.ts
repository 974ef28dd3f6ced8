import { setTimeout as sleep } from 'node:timers/promises';
import { CONFIGURATION_VARIABLES } from '../../../functions/core/function-configuration.ts';
import { k8sEmulatorOf } from '../../local-cloud/local-cloud.ts';
import {
  allocationKiller,
  KILL_POINTS,
  type KillPoint,
  poolUsable,
  startPods,
} from '../../support/allocation-kill.ts';
import { percentile } from '../demand.ts';
import { type Figure, figure } from '../report.ts';
import type { BenchCloud } from './bench-cloud.ts';
import type { LaunchBurst } from './launch-burst.ts';
import type { BenchSettings } from './settings.ts';

/**
 * Recovery after a crash: on fresh m5.large nodes of the burst (pool 8, nothing used), pods take 8
 * IPs, so the allocation needs a new ENI; the allocate invocation serving the node is killed at
 * one point of that allocation (see `KILL_POINTS`), one point per node, one node at a time, each
 * served by its own Watch invocation (no sweep runs). Measured from the kill to the pool covering
 * the pods and the pre-allocation again, in real seconds: node leases run on real time.
 */
export interface KillRecovery {
  readonly leaseSeconds: number;
  /** Per point; undefined when the kill point was never reached or the pool never usable in time. */
  readonly byPoint: readonly { readonly point: KillPoint; readonly recoverySeconds: number | undefined }[];
}

const PODS = 8;
const KILL_WAIT_MS = 30_000;
const RECOVERY_WAIT_MS = 60_000;

/** Runs after the demand-to-pool phase on m5.large nodes it did not use; undefined without enough of them. */
export async function measureKillRecovery(
  bench: BenchCloud,
  burst: LaunchBurst,
  settings: BenchSettings,
): Promise<KillRecovery | undefined> {
  const { cloud } = bench;
  const nodes = burst.instanceIds
    .filter((instanceId) => cloud.ec2.state.instance(instanceId)?.instanceType === 'm5.large')
    .slice(settings.demandNodes, settings.demandNodes + KILL_POINTS.length)
    .map((instanceId) => ({ instanceId, privateDnsName: burst.nodeNames.get(instanceId) as string }));
  if (settings.demandNodes === 0 || nodes.length < KILL_POINTS.length) return undefined;
  const killer = allocationKiller(cloud);
  const byPoint: KillRecovery['byPoint'][number][] = [];
  for (const [index, point] of KILL_POINTS.entries()) {
    const node = nodes[index] as (typeof nodes)[number];
    settings.onProgress(`recovery after a kill ${point}: ${node.instanceId}...`);
    cloud.ec2.throttling.reset();
    const watching = cloud.invoke('Watch', { task: 'watch' });
    await cloud.waitUntil(() => k8sEmulatorOf(cloud).openWatches() > 0, {
      description: 'the watcher opened its watch',
    });
    const killedAt = killer.arm(node, point);
    await startPods(cloud, node.privateDnsName, PODS);
    byPoint.push({ point, recoverySeconds: await recoverySeconds(bench, node.instanceId, killedAt) });
    await watching.catch(() => undefined);
  }
  // The bench deploys the default lease.
  return { leaseSeconds: CONFIGURATION_VARIABLES.LEASE_DURATION_SECONDS.default, byPoint };
}

async function recoverySeconds(
  bench: BenchCloud,
  instanceId: string,
  killedAt: Promise<number>,
): Promise<number | undefined> {
  const killAtMs = await Promise.race([killedAt, sleep(KILL_WAIT_MS).then(() => undefined)]);
  if (killAtMs === undefined) return undefined;
  try {
    await bench.cloud.waitUntil(() => poolUsable(bench.cloud, instanceId, 2 * PODS), {
      timeoutMs: RECOVERY_WAIT_MS,
      intervalMs: 50,
      description: 'the pool usable again',
    });
  } catch {
    return undefined;
  }
  return (Date.now() - killAtMs) / 1000;
}

/**
 * One row per kill point and the distribution over them (p50, max), in real seconds, beside the
 * node lease: the earliest moment the watcher may ask again for a node whose holder died.
 */
export function killRecoveryFigures({ leaseSeconds, byPoint }: KillRecovery): Figure[] {
  const note = `the allocate invocation serving a node is killed at that point (container terminated: no release, no heartbeat); from the kill to the pool covering ${PODS} pods and the pre-allocation again, one node at a time, the watcher serving (no sweep). Reference: one node lease (${leaseSeconds} s), after which the watcher asks again.`;
  const seconds = byPoint.flatMap(({ recoverySeconds }) =>
    recoverySeconds === undefined ? [] : [recoverySeconds],
  );
  seconds.sort((a, b) => a - b);
  const rows = byPoint.map(({ point, recoverySeconds }) =>
    figure({
      id: `recovery_after_kill_${point.replaceAll('-', '_')}`,
      label: `recovery after a kill, ${point}`,
      value: recoverySeconds,
      reference: leaseSeconds,
      referenceKind: 'reference',
      unit: 'real s',
      note,
    }),
  );
  for (const [statistic, value] of [
    ['p50', percentile(seconds, 0.5)],
    ['max', seconds.at(-1)],
  ] as const) {
    rows.push(
      figure({
        id: `recovery_after_kill_${statistic}`,
        label: `recovery after a kill, ${statistic} (${seconds.length}/${byPoint.length} recovered)`,
        value,
        reference: leaseSeconds,
        referenceKind: 'reference',
        unit: 'real s',
        note,
      }),
    );
  }
  return rows;
}
