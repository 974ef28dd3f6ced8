import type { Denials } from '../../local-cloud/summary.ts';
import type { BundleFigures } from '../bundles.ts';
import { floorReadyNodes, type TokenBucketFloor } from '../floors.ts';
import { type ItemSizes, m5x24ItemSizes } from '../item-size.ts';
import type { Figure } from '../report.ts';
import { renderReadyChart } from '../svg.ts';
import type { SweepCost } from '../sweep-cost.ts';
import type { BenchCloud } from './bench-cloud.ts';
import {
  type BurstTally,
  denialFigures,
  ec2CallFigures,
  storeWriteFigures,
  tallyBurst,
  timeToLastReadyFigure,
} from './burst-figures.ts';
import { bundleFigures } from './cold-starts.ts';
import { type DemandToPool, demandFigures } from './demand-to-pool.ts';
import { itemSizeFigures } from './item-size-figures.ts';
import { type KillRecovery, killRecoveryFigures } from './kill-recovery.ts';
import type { LaunchBurst } from './launch-burst.ts';
import { type NoOpResync, noOpResyncFigure } from './no-op-resync.ts';
import { roundTripsAloneFigures, type SingleNodeRoundTrips } from './round-trips-alone.ts';
import { type BenchSettings, type ReportedOptions, reportedOptions } from './settings.ts';
import { sweepCostFigures } from './steady-state-sweep.ts';

/** bench.json: every figure, and the raw counts behind them. */
export interface BenchReport {
  readonly options: ReportedOptions;
  readonly startedAt: string;
  readonly wallSeconds: number;
  readonly figures: readonly Figure[];
  readonly floor: TokenBucketFloor;
  readonly readyNodes: number;
  /** Simulated seconds after the launch at which each node was first seen ready. */
  readonly readySeconds: readonly number[];
  readonly burst: {
    readonly realSeconds: number;
    readonly timedOut: boolean;
    readonly invariantViolations: number;
    readonly newEnis: number;
    readonly floorAssigns: number;
    readonly leakedEnis: number;
    readonly ec2CallsByAction: Readonly<Record<string, number>>;
    readonly ec2ThrottledByAction: Readonly<Record<string, number>>;
    readonly dynamoDb: BurstTally['dynamoDb'];
    readonly kubernetes: BurstTally['kubernetes'];
    readonly allocations: Readonly<Record<string, number>>;
    readonly eventsDelivered: number;
    readonly eventsDuplicated: number;
    readonly functionErrors: number;
    readonly functionStats: Readonly<Record<string, unknown>>;
  };
  readonly noOpSync: NoOpResync;
  readonly singleNode: SingleNodeRoundTrips | undefined;
  /** The same, launched after the containers were warmed. */
  readonly warmSingleNode: SingleNodeRoundTrips | undefined;
  readonly itemSizes: {
    readonly ipsBytes: number;
    readonly prefixesBytes: number;
    readonly prefixesExpandedBytes: number;
  };
  readonly bundles: readonly BundleFigures[];
  readonly demandToPool?: DemandToPool;
  readonly killRecovery?: KillRecovery;
  readonly sweepCosts: readonly SweepCost[];
}

export interface BenchResult {
  readonly report: BenchReport;
  /** nodes-ready.svg: nodes ready over simulated time, beside the floor's curve. */
  readonly chartSvg: string;
}

/** What every phase measured, with the cloud it ran on (still running: its counters are read now). */
export interface MeasuredRun {
  readonly settings: BenchSettings;
  readonly startedAtMs: number;
  readonly bench: BenchCloud;
  readonly bundles: readonly BundleFigures[];
  readonly singleNode: SingleNodeRoundTrips | undefined;
  readonly warmSingleNode: SingleNodeRoundTrips | undefined;
  readonly burst: LaunchBurst;
  readonly noOpSync: NoOpResync;
  readonly demandToPool: DemandToPool | undefined;
  readonly killRecovery: KillRecovery | undefined;
  readonly sweepCosts: readonly SweepCost[];
  /** The authorization denials over the whole run, read at its end. */
  readonly denials: Denials;
}

/**
 * The report and the chart. Read at the end of the run, so counted over all of it: the
 * authorization denials, the allocations, events and function errors since the burst began, and
 * the functions' invocation counters.
 */
export function assembleReport(run: MeasuredRun): BenchResult {
  const { settings, burst } = run;
  const tally = tallyBurst(run.bench, burst);
  const itemSizes = m5x24ItemSizes();
  const figures = allFigures(run, tally, itemSizes);
  const report: BenchReport = {
    options: reportedOptions(settings),
    startedAt: new Date(run.startedAtMs).toISOString(),
    wallSeconds: (Date.now() - run.startedAtMs) / 1000,
    figures,
    floor: tally.floor,
    readyNodes: burst.readyAt.size,
    readySeconds: burst.instanceIds.flatMap((id) =>
      burst.readyAt.has(id) ? [burst.readyAt.get(id) as number] : [],
    ),
    burst: burstSection(run, tally),
    noOpSync: run.noOpSync,
    singleNode: run.singleNode,
    warmSingleNode: run.warmSingleNode,
    itemSizes: {
      ipsBytes: itemSizes.ipsBytes,
      prefixesBytes: itemSizes.prefixesBytes,
      prefixesExpandedBytes: itemSizes.prefixesExpandedBytes,
    },
    bundles: run.bundles,
    ...(run.demandToPool ? { demandToPool: run.demandToPool } : {}),
    ...(run.killRecovery ? { killRecovery: run.killRecovery } : {}),
    sweepCosts: run.sweepCosts,
  };
  return { report, chartSvg: readyChart(settings, report) };
}

/** Every figure, in the order of the printed table and of bench.json. */
function allFigures(run: MeasuredRun, tally: BurstTally, itemSizes: ItemSizes): Figure[] {
  const { settings, burst } = run;
  return [
    ...ec2CallFigures(tally, burst, settings),
    ...denialFigures(run.denials),
    timeToLastReadyFigure(tally, burst, settings),
    ...roundTripsAloneFigures(run.singleNode, run.warmSingleNode),
    ...storeWriteFigures(tally, settings),
    noOpResyncFigure(run.noOpSync),
    ...itemSizeFigures(itemSizes),
    ...(run.demandToPool
      ? demandFigures(run.demandToPool, run.warmSingleNode ?? run.singleNode, settings.scale)
      : []),
    ...(run.killRecovery ? killRecoveryFigures(run.killRecovery) : []),
    ...run.sweepCosts.flatMap(sweepCostFigures),
    ...run.bundles.flatMap((bundle) => bundleFigures(bundle)),
  ];
}

function burstSection(run: MeasuredRun, tally: BurstTally): BenchReport['burst'] {
  const { bench, burst } = run;
  return {
    realSeconds: burst.realSeconds,
    timedOut: burst.timedOut,
    invariantViolations: burst.invariantViolations,
    newEnis: burst.newEnis,
    floorAssigns: burst.floorAssigns,
    leakedEnis: tally.leakedEnis,
    ec2CallsByAction: tally.ec2CallsByAction,
    ec2ThrottledByAction: tally.ec2ThrottledByAction,
    dynamoDb: tally.dynamoDb,
    kubernetes: tally.kubernetes,
    allocations: { ...bench.functionLog.allocations },
    eventsDelivered: bench.events.eventsDelivered,
    eventsDuplicated: bench.events.eventsDuplicated,
    functionErrors: bench.functionLog.errors - burst.functionErrorsBefore,
    functionStats: bench.cloud.functionStats(),
  };
}

function readyChart(settings: BenchSettings, report: BenchReport): string {
  const { floor } = report;
  const n = settings.nodes;
  return renderReadyChart({
    title: `${n} nodes launched at once (${settings.mix}${settings.prefixDelegation ? ', prefixes' : ''}, first-interface-index ${settings.firstInterfaceIndex})`,
    readySeconds: report.readySeconds,
    nodes: n,
    floorAt: (seconds) => floorReadyNodes(floor, n, seconds),
    floorSeconds: floor.seconds,
  });
}
