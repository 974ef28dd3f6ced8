import { parseMix } from '../floors.ts';

export interface BenchOptions {
  readonly nodes: number;
  /** `type:weight,...`, e.g. `m5.large:2,t3.medium:1`. */
  readonly mix: string;
  readonly firstInterfaceIndex: 0 | 1;
  readonly prefixDelegation: boolean;
  /** Fraction of EC2 events delivered twice (0..1). */
  readonly duplicateEvents: number;
  /** Simulated seconds per real second (EC2 token refill, schedules, Lambda retry waits). */
  readonly scale: number;
  /** Containers per function (Lambda's concurrency, locally); default 8. */
  readonly concurrency?: number;
  /** Fresh-process imports per function for the init time (median); default 5. */
  readonly importRuns?: number;
  /** The simulated cilium-agents: 1.19 (CRD protocol, default), 1.20 (multi-pool), or mixed (every other node). */
  readonly agents?: '1.19' | '1.20' | 'mixed';
  /** Nodes whose pods start at once for the demand-to-pool latency (m5.large of the burst); default 50. */
  readonly demandNodes?: number;
  /** Cluster sizes at which one steady-state sweep's cost is measured; default 100, 1000, 5000. */
  readonly sweepCostNodes?: readonly number[];
  /** Time today's naive bundles beside the functions' (built from git history); default true. */
  readonly naiveBaseline?: boolean;
  /** Real seconds to wait for every node before reporting what was reached. */
  readonly timeoutSeconds?: number;
  /** A running DynamoDB Local (e.g. the test run's); default start one. */
  readonly dynamoDbEndpoint?: string;
  /** Seed for the duplicate-event draw. */
  readonly seed?: number;
  /** Where the functions' log lines go (default: dropped). */
  readonly functionLog?: (line: string) => void;
  readonly onProgress?: (line: string) => void;
}

/** The options with every default filled in: what the phases read. */
export interface BenchSettings extends BenchOptions {
  readonly concurrency: number;
  readonly importRuns: number;
  readonly agents: '1.19' | '1.20' | 'mixed';
  readonly demandNodes: number;
  readonly sweepCostNodes: readonly number[];
  readonly naiveBaseline: boolean;
  readonly timeoutSeconds: number;
  readonly seed: number;
  /** The instance types of the mix, one per weight unit, in launch order. */
  readonly instanceTypes: readonly string[];
  readonly onProgress: (line: string) => void;
}

/** The options as the report records them: the run's shape, without its wiring. */
export type ReportedOptions = Omit<BenchOptions, 'functionLog' | 'onProgress' | 'dynamoDbEndpoint'>;

/** Checks the options (throws naming the flag) and fills in the defaults. */
export function benchSettings(options: BenchOptions): BenchSettings {
  validate(options);
  return {
    ...options,
    concurrency: options.concurrency ?? 8,
    importRuns: options.importRuns ?? 5,
    agents: options.agents ?? '1.19',
    demandNodes: options.demandNodes ?? 50,
    sweepCostNodes: options.sweepCostNodes ?? [100, 1_000, 5_000],
    naiveBaseline: options.naiveBaseline ?? true,
    timeoutSeconds: options.timeoutSeconds ?? Math.min(1_200, 120 + options.nodes * 0.6),
    seed: options.seed ?? 1,
    instanceTypes: parseMix(options.mix),
    onProgress: options.onProgress ?? (() => {}),
  };
}

/** The options the report records, in the order bench.json has always listed them. */
export function reportedOptions(settings: BenchSettings): ReportedOptions {
  return {
    nodes: settings.nodes,
    mix: settings.mix,
    firstInterfaceIndex: settings.firstInterfaceIndex,
    prefixDelegation: settings.prefixDelegation,
    duplicateEvents: settings.duplicateEvents,
    scale: settings.scale,
    concurrency: settings.concurrency,
    importRuns: settings.importRuns,
    demandNodes: settings.demandNodes,
    sweepCostNodes: settings.sweepCostNodes,
    seed: settings.seed,
  };
}

function validate(options: BenchOptions): void {
  if (!Number.isInteger(options.nodes) || options.nodes < 1 || options.nodes > 5_000)
    throw new Error(`--nodes must be 1..5000, got ${options.nodes}`);
  if (!(options.scale > 0 && options.scale <= 1_000))
    throw new Error(`--scale must be in (0, 1000], got ${options.scale}`);
  if (!(options.duplicateEvents >= 0 && options.duplicateEvents <= 1))
    throw new Error(`--duplicate-events must be in [0, 1], got ${options.duplicateEvents}`);
  if (options.firstInterfaceIndex !== 0 && options.firstInterfaceIndex !== 1)
    throw new Error(`--first-interface-index must be 0 or 1, got ${options.firstInterfaceIndex}`);
  if (options.agents !== undefined && !['1.19', '1.20', 'mixed'].includes(options.agents))
    throw new Error(`--agents must be 1.19, 1.20 or mixed, got ${options.agents}`);
  parseMix(options.mix);
}
