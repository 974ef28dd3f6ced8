import { assembleReport, type BenchResult } from './phases/assemble-report.ts';
import { startBenchCloud, synthesizeBenchStack } from './phases/bench-cloud.ts';
import { Cleanups } from './phases/cleanups.ts';
import { measureColdStarts } from './phases/cold-starts.ts';
import { measureDemandToPool } from './phases/demand-to-pool.ts';
import { measureKillRecovery } from './phases/kill-recovery.ts';
import { launchBurst } from './phases/launch-burst.ts';
import { resyncEveryNode } from './phases/no-op-resync.ts';
import { measureRoundTripsAlone, warmEveryContainer } from './phases/round-trips-alone.ts';
import { type BenchOptions, benchSettings } from './phases/settings.ts';
import { measureSteadyStateSweeps } from './phases/steady-state-sweep.ts';

export type { BenchReport, BenchResult } from './phases/assemble-report.ts';
export type { BenchOptions } from './phases/settings.ts';

/**
 * `npm run bench`: N nodes launched at once on the local cloud (the synthesized stack's bundled
 * functions) with the EC2 emulator enforcing AWS's per-action token buckets on a scaled clock.
 * Every figure is measured from what the stand-ins observed (the EC2 call log, the Kubernetes
 * request log and history, DynamoDB's answers through a recording pass-through, the functions'
 * logs) and reported beside its floor as a ratio. Nothing is asserted about wall-clock time.
 *
 * The phases run in this order on one local cloud (the steady-state sweeps on fresh ones), each
 * in `phases/`; everything they started is stopped at the end, whether the run succeeded or not.
 */
export async function runBench(options: BenchOptions): Promise<BenchResult> {
  const settings = benchSettings(options);
  const startedAtMs = Date.now();
  const cleanups = new Cleanups();
  try {
    const stack = await synthesizeBenchStack(settings, cleanups);
    const bundles = await measureColdStarts(stack, settings, cleanups);
    const bench = await startBenchCloud(stack, settings, cleanups);
    const singleNode = await measureRoundTripsAlone(bench, settings, 'cold');
    await warmEveryContainer(bench, settings);
    const warmSingleNode = await measureRoundTripsAlone(bench, settings, 'warm');
    const burst = await launchBurst(bench, settings);
    const noOpSync = await resyncEveryNode(bench, settings);
    const demandToPool = await measureDemandToPool(bench, burst, settings);
    const killRecovery = await measureKillRecovery(bench, burst, settings);
    const sweepCosts = await measureSteadyStateSweeps(stack, bench.dynamoDbEndpoint, settings);
    return assembleReport({
      settings,
      startedAtMs,
      bench,
      bundles,
      singleNode,
      warmSingleNode,
      burst,
      noOpSync,
      demandToPool,
      killRecovery,
      sweepCosts,
      denials: await bench.cloud.denials(),
    });
  } finally {
    await cleanups.runAll((error) => settings.onProgress(`cleanup failed: ${error.message}`));
  }
}
