import { type BucketSpec, defaultBucketSpec } from '../emulators/ec2/throttling.ts';

/**
 * The bench's pure arithmetic: token-bucket floors, ratios to floors, the longest chain of
 * sequential round trips, a scaled clock and a seeded random source. No I/O, no clock reads
 * except through the functions passed in.
 */

/** The mutating actions one node's allocation needs: three per new ENI, one per assign. */
export const ENI_ACTIONS = [
  'CreateNetworkInterface',
  'AttachNetworkInterface',
  'ModifyNetworkInterfaceAttribute',
] as const;
export const ASSIGN_ACTION = 'AssignPrivateIpAddresses';

/** Seconds one action's bucket needs for `calls` calls from full: max(0, (calls - burst) / refill). */
export function bucketFloorSeconds(calls: number, bucket: BucketSpec): number {
  if (!(calls >= 0) || !(bucket.refillPerSecond > 0)) {
    throw new RangeError(`need calls >= 0 and a positive refill, got ${calls} and ${bucket.refillPerSecond}`);
  }
  return Math.max(0, (calls - bucket.burst) / bucket.refillPerSecond);
}

export interface ActionFloor {
  readonly action: string;
  readonly calls: number;
  readonly burst: number;
  readonly refillPerSecond: number;
  readonly seconds: number;
}

export interface TokenBucketFloor {
  /** The largest per-action floor: no schedule of these calls can finish sooner. */
  readonly seconds: number;
  /** The action whose bucket binds (undefined when no call is needed). */
  readonly bindingAction: string | undefined;
  readonly actions: readonly ActionFloor[];
}

/**
 * The token-bucket floor for a set of calls per action, each against its own bucket (AWS's
 * published buckets unless `bucketOf` says otherwise), all buckets full at the start.
 */
export function tokenBucketFloor(
  callsByAction: Readonly<Record<string, number>>,
  bucketOf: (action: string) => BucketSpec = defaultBucketSpec,
): TokenBucketFloor {
  const actions = Object.entries(callsByAction)
    .filter(([, calls]) => calls > 0)
    .map(([action, calls]) => {
      const bucket = bucketOf(action);
      return {
        action,
        calls,
        burst: bucket.burst,
        refillPerSecond: bucket.refillPerSecond,
        seconds: bucketFloorSeconds(calls, bucket),
      };
    })
    .sort((left, right) => right.seconds - left.seconds || left.action.localeCompare(right.action));
  const binding = actions[0];
  return {
    seconds: binding?.seconds ?? 0,
    bindingAction: binding && binding.seconds > 0 ? binding.action : binding?.action,
    actions,
  };
}

/** The necessary mutating calls for `newEnis` ENIs and `assigns` assigns, by action. */
export function necessaryMutatingCalls(newEnis: number, assigns: number): Record<string, number> {
  const calls: Record<string, number> = {};
  for (const action of ENI_ACTIONS) calls[action] = newEnis;
  calls[ASSIGN_ACTION] = assigns;
  return calls;
}

/**
 * The floor curve for the chart: how many of `nodes` nodes could at best be ready `t` seconds in,
 * if each needs an equal share of every action's calls: min over actions of
 * nodes * min(1, (burst + refill * t) / calls).
 */
export function floorReadyNodes(floor: TokenBucketFloor, nodes: number, seconds: number): number {
  let ready = nodes;
  for (const action of floor.actions) {
    const capacity = action.burst + action.refillPerSecond * Math.max(0, seconds);
    ready = Math.min(ready, Math.floor(nodes * Math.min(1, capacity / action.calls)));
  }
  return ready;
}

/** A figure's ratio to its floor: undefined when either is unknown or the floor is 0. */
export function ratioTo(value: number | undefined, floor: number | undefined): number | undefined {
  if (value === undefined || floor === undefined || !Number.isFinite(value) || !Number.isFinite(floor))
    return undefined;
  if (floor === 0) return undefined;
  return value / floor;
}

/**
 * How a ratio prints: `1.50x`; for a floor of 0, `at floor` when the figure is 0 too and
 * `above floor 0` otherwise (no finite ratio exists); `n/a` when a side is unknown.
 */
export function formatRatio(value: number | undefined, floor: number | undefined): string {
  if (value === undefined || floor === undefined || !Number.isFinite(value) || !Number.isFinite(floor))
    return 'n/a';
  if (floor === 0) return value === 0 ? 'at floor' : 'above floor 0';
  return `${(value / floor).toFixed(2)}x`;
}

/** A number for a table: integers as such, others with up to `digits` decimals (trailing zeros cut). */
export function formatNumber(value: number | undefined, digits = 2): string {
  if (value === undefined || Number.isNaN(value)) return 'n/a';
  if (!Number.isFinite(value)) return value > 0 ? 'inf' : '-inf';
  if (Number.isInteger(value)) return String(value);
  return value.toFixed(digits).replace(/\.?0+$/, '');
}

export function median(values: readonly number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((left, right) => left - right);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1
    ? (sorted[middle] as number)
    : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

export interface Interval {
  readonly startMs: number;
  readonly endMs: number;
}

/**
 * The longest chain of intervals in which each starts no earlier than the previous one ended:
 * the number of SEQUENTIAL round trips (calls that overlap in time, e.g. a Promise.all, count as
 * one step). Greedy by earliest end, which is optimal for this (interval scheduling).
 */
export function longestSequentialChain<T extends Interval>(intervals: readonly T[]): T[] {
  const byEnd = [...intervals].sort(
    (left, right) => left.endMs - right.endMs || left.startMs - right.startMs,
  );
  const chain: T[] = [];
  let lastEndMs = Number.NEGATIVE_INFINITY;
  for (const interval of byEnd) {
    if (interval.startMs >= lastEndMs) {
      chain.push(interval);
      lastEndMs = interval.endMs;
    }
  }
  return chain;
}

/** A clock running `scale` times faster than `realNow` from `startMs` on (epoch ms). */
export function scaledClock(scale: number, realNow: () => number = Date.now): () => number {
  if (!(scale > 0)) throw new RangeError(`scale must be positive, got ${scale}`);
  const startMs = realNow();
  return () => startMs + (realNow() - startMs) * scale;
}

export { seededRandom } from '../support/seeded-random.ts';

/** `m5.large:2,t3.medium:1` -> the launch order it implies: [m5.large, m5.large, t3.medium]. */
export function parseMix(mix: string): string[] {
  const order: string[] = [];
  for (const part of mix.split(',').map((item) => item.trim())) {
    if (part === '') continue;
    const match = /^([a-z0-9-]+\.[a-z0-9-]+)(?::(\d+))?$/.exec(part);
    if (!match) throw new Error(`--mix: expected type[:weight], got ${JSON.stringify(part)}`);
    const weight = Number(match[2] ?? '1');
    if (!Number.isInteger(weight) || weight < 1 || weight > 100)
      throw new Error(`--mix: weight of ${match[1]} must be 1..100, got ${match[2]}`);
    for (let index = 0; index < weight; index++) order.push(match[1] as string);
  }
  if (order.length === 0) throw new Error('--mix: no instance type');
  return order;
}
