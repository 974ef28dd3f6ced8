/**
 * EC2's request-rate throttling: one token bucket per API action, per account and Region
 * ("Limits are applied to individual API actions, not API action categories":
 * https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html; the buckets are listed in
 * test/README.md, *EC2 throttling*).
 * A call takes one token; an empty bucket answers RequestLimitExceeded. Tokens refill
 * continuously and a refill token is usable as soon as it arrives, so after 1 s at 5/s exactly
 * five calls pass. Token arithmetic is done in integer milli-tokens so that holds exactly.
 */

export interface BucketSpec {
  /** Bucket size: calls that pass back to back from full. */
  readonly burst: number;
  /** Tokens added per second. */
  readonly refillPerSecond: number;
}

export interface ThrottlingSettings {
  /** Per-bucket overrides, keyed by action name or by `<Action> (unfiltered)` for the unfiltered Describe buckets. */
  readonly buckets?: Readonly<Record<string, BucketSpec>>;
}

/** `true` = AWS's published buckets, `false` = no throttling, an object = AWS's buckets with overrides. */
export type ThrottlingOption = boolean | ThrottlingSettings;

const NON_MUTATING: BucketSpec = { burst: 100, refillPerSecond: 20 };
const UNFILTERED_NON_MUTATING: BucketSpec = { burst: 50, refillPerSecond: 10 };
const MUTATING: BucketSpec = { burst: 50, refillPerSecond: 5 };
const RESOURCE_MUTATING: BucketSpec = { burst: 100, refillPerSecond: 5 };
const TAGGING: BucketSpec = { burst: 100, refillPerSecond: 10 };

/** The expensive Describe actions that get a smaller bucket when called without filters or pagination. */
const UNFILTERED_BUCKET_ACTIONS: ReadonlySet<string> = new Set([
  'DescribeInstances',
  'DescribeInstanceStatus',
  'DescribeNetworkInterfaces',
  'DescribeSecurityGroups',
  'DescribeSnapshots',
  'DescribeSpotInstanceRequests',
  'DescribeVolumes',
]);

/** Mutating actions with their own larger bucket (100 / 5). */
const RESOURCE_MUTATING_ACTIONS: ReadonlySet<string> = new Set([
  'CreateNetworkInterface',
  'DeleteNetworkInterface',
  'AssignPrivateIpAddresses',
  'UnassignPrivateIpAddresses',
  'AssignIpv6Addresses',
  'ModifyNetworkInterfaceAttribute',
]);

const TAGGING_ACTIONS: ReadonlySet<string> = new Set(['CreateTags', 'DeleteTags']);

export function isNonMutatingAction(action: string): boolean {
  return /^(Describe|List|Get|Search)/.test(action);
}

/**
 * The bucket a call draws from. For the expensive Describe actions a call counts as filtered or
 * paginated only when it sends `Filter.*`, `MaxResults` or `NextToken`; id lists alone do not
 * (the conservative reading of the AWS page), so they land in the smaller unfiltered bucket.
 */
export function bucketKeyFor(action: string, parameterNames: Iterable<string>): string {
  if (!UNFILTERED_BUCKET_ACTIONS.has(action)) return action;
  for (const name of parameterNames) {
    if (name.startsWith('Filter.') || name === 'MaxResults' || name === 'NextToken') return action;
  }
  return `${action} (unfiltered)`;
}

/** AWS's published bucket for a bucket key. */
export function defaultBucketSpec(bucketKey: string): BucketSpec {
  if (bucketKey.endsWith(' (unfiltered)')) return UNFILTERED_NON_MUTATING;
  if (isNonMutatingAction(bucketKey)) return NON_MUTATING;
  if (RESOURCE_MUTATING_ACTIONS.has(bucketKey)) return RESOURCE_MUTATING;
  if (TAGGING_ACTIONS.has(bucketKey)) return TAGGING;
  return MUTATING;
}

interface BucketState {
  milliTokens: number;
  lastRefillMs: number;
}

export class ThrottleBuckets {
  private readonly buckets = new Map<string, BucketState>();
  private settings: ThrottlingSettings | undefined;

  constructor(
    private readonly clock: () => number,
    option: ThrottlingOption = false,
  ) {
    this.settings = toSettings(option);
  }

  get enabled(): boolean {
    return this.settings !== undefined;
  }

  /** Changes the throttling mode; all buckets start full again. */
  configure(option: ThrottlingOption): void {
    this.settings = toSettings(option);
    this.buckets.clear();
  }

  /** Refills every bucket to full. */
  reset(): void {
    this.buckets.clear();
  }

  spec(bucketKey: string): BucketSpec {
    return this.settings?.buckets?.[bucketKey] ?? defaultBucketSpec(bucketKey);
  }

  /** Takes one token; false means the call is throttled. Always true when throttling is off. */
  tryTake(bucketKey: string): boolean {
    if (!this.settings) return true;
    const spec = this.spec(bucketKey);
    const capacity = spec.burst * 1000;
    const now = this.clock();
    const bucket = this.buckets.get(bucketKey) ?? { milliTokens: capacity, lastRefillMs: now };
    const elapsedMs = Math.max(0, now - bucket.lastRefillMs);
    bucket.milliTokens = Math.min(
      capacity,
      bucket.milliTokens + Math.floor(elapsedMs * spec.refillPerSecond),
    );
    bucket.lastRefillMs = now;
    this.buckets.set(bucketKey, bucket);
    if (bucket.milliTokens < 1000) return false;
    bucket.milliTokens -= 1000;
    return true;
  }

  /** Whole tokens left in a bucket right now (for tests and the bench). */
  tokens(bucketKey: string): number {
    const spec = this.spec(bucketKey);
    const bucket = this.buckets.get(bucketKey);
    if (!bucket) return spec.burst;
    const elapsedMs = Math.max(0, this.clock() - bucket.lastRefillMs);
    return Math.floor(
      Math.min(spec.burst * 1000, bucket.milliTokens + elapsedMs * spec.refillPerSecond) / 1000,
    );
  }
}

function toSettings(option: ThrottlingOption): ThrottlingSettings | undefined {
  if (option === false) return undefined;
  if (option === true) return {};
  return option;
}
