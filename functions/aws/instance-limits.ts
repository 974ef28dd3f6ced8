import type { InstanceLimits } from '../core/model.ts';
import type { Ec2NetworkPort } from '../core/ports.ts';
import staticLimitsFile from './instance-limits.static.json' with { type: 'json' };

/**
 * Networking limits per instance type, as cilium's `limits` package keeps them: asked of EC2
 * (DescribeInstanceTypes' NetworkInfo), remembered for the life of the container, and answered
 * from cilium's generated static table when EC2 does not know the type or cannot be asked.
 *
 * Build ONE catalog per container (module scope of a function's `index.ts`): limits of a type never
 * change, so a warm container asks EC2 once per type. That call draws on the shared Describe*
 * bucket (100 burst, 20/s per account and Region), which a scale-up burst must not spend on
 * repeats.
 */
export interface InstanceLimitsCatalogOptions {
  /** DescribeInstanceTypes for one type; `undefined` when EC2 does not know it (the port's contract). */
  readonly describeInstanceLimits: Ec2NetworkPort['describeInstanceLimits'];
  /** How long "EC2 does not know this type" is believed before asking again. Default 15 min. */
  readonly unknownTypeTtlMs?: number;
  /** After a failed call answered from the static table, how long before EC2 is asked again. Default 1 min. */
  readonly retryAfterFailureMs?: number;
  /** Clock for the expiries above; injectable for tests. */
  readonly nowMs?: () => number;
  /** Replaces the shipped static table (tests). */
  readonly staticTable?: ReadonlyMap<string, InstanceLimits>;
  /**
   * Told whenever an answer does not come from EC2: the type is unknown to EC2, or the call failed
   * (`error` set) and the static table answered. Meant for a log line or metric.
   */
  readonly onFallback?: (event: LimitsFallbackEvent) => void;
}

export interface LimitsFallbackEvent {
  readonly instanceType: string;
  readonly reason: 'unknown-to-ec2' | 'describe-failed';
  /** Whether the static table had the type. */
  readonly staticHit: boolean;
  readonly error?: unknown;
}

interface CachedAnswer {
  readonly limits: InstanceLimits | undefined;
  readonly expiresAtMs: number;
}

const DEFAULT_UNKNOWN_TYPE_TTL_MS = 15 * 60_000;
const DEFAULT_RETRY_AFTER_FAILURE_MS = 60_000;

export class InstanceLimitsCatalog {
  private readonly answers = new Map<string, CachedAnswer>();
  /** One in-flight DescribeInstanceTypes per type, shared by concurrent askers. */
  private readonly pending = new Map<string, Promise<InstanceLimits | undefined>>();
  private readonly describeInstanceLimits: Ec2NetworkPort['describeInstanceLimits'];
  private readonly unknownTypeTtlMs: number;
  private readonly retryAfterFailureMs: number;
  private readonly nowMs: () => number;
  private readonly staticTable: ReadonlyMap<string, InstanceLimits>;
  private readonly onFallback: ((event: LimitsFallbackEvent) => void) | undefined;

  constructor(options: InstanceLimitsCatalogOptions) {
    this.describeInstanceLimits = options.describeInstanceLimits;
    this.unknownTypeTtlMs = options.unknownTypeTtlMs ?? DEFAULT_UNKNOWN_TYPE_TTL_MS;
    this.retryAfterFailureMs = options.retryAfterFailureMs ?? DEFAULT_RETRY_AFTER_FAILURE_MS;
    this.nowMs = options.nowMs ?? Date.now;
    this.staticTable = options.staticTable ?? STATIC_INSTANCE_LIMITS;
    this.onFallback = options.onFallback;
  }

  /**
   * The limits of `instanceType`, or `undefined` when neither EC2 nor the static table knows it
   * (the caller cannot size the node and must not guess). Throws the EC2 error only when the call
   * failed AND the static table does not know the type; that failure is not cached.
   */
  async limitsFor(instanceType: string): Promise<InstanceLimits | undefined> {
    const cached = this.answers.get(instanceType);
    if (cached && cached.expiresAtMs > this.nowMs()) return cached.limits;
    let pending = this.pending.get(instanceType);
    if (!pending) {
      pending = this.resolve(instanceType).finally(() => this.pending.delete(instanceType));
      this.pending.set(instanceType, pending);
    }
    return pending;
  }

  private async resolve(instanceType: string): Promise<InstanceLimits | undefined> {
    const fromStaticTable = this.staticTable.get(instanceType);
    let fromEc2: InstanceLimits | undefined;
    try {
      fromEc2 = await this.describeInstanceLimits(instanceType);
    } catch (error) {
      this.onFallback?.({
        instanceType,
        reason: 'describe-failed',
        staticHit: fromStaticTable !== undefined,
        error,
      });
      if (!fromStaticTable) throw error;
      return this.remember(instanceType, fromStaticTable, this.retryAfterFailureMs);
    }
    if (fromEc2) return this.remember(instanceType, fromEc2, Number.POSITIVE_INFINITY);
    this.onFallback?.({ instanceType, reason: 'unknown-to-ec2', staticHit: fromStaticTable !== undefined });
    return this.remember(instanceType, fromStaticTable, this.unknownTypeTtlMs);
  }

  private remember(
    instanceType: string,
    limits: InstanceLimits | undefined,
    ttlMs: number,
  ): InstanceLimits | undefined {
    this.answers.set(instanceType, { limits, expiresAtMs: this.nowMs() + ttlMs });
    return limits;
  }
}

/** Whether a type is bare metal, from its name, as the static table cannot say (`*.metal`, `*.metal-48xl`). */
function isBareMetalTypeName(instanceType: string): boolean {
  return instanceType.includes('metal');
}

interface StaticLimitsRow {
  readonly maxInterfaces: number;
  readonly ipv4PerInterface: number;
  readonly ipv6PerInterface: number;
  readonly hypervisor: string;
}

const staticRows: Readonly<Record<string, StaticLimitsRow>> = staticLimitsFile.instanceTypes;

/** cilium's static table (`instance-limits.static.json`), as `InstanceLimits`. */
export const STATIC_INSTANCE_LIMITS: ReadonlyMap<string, InstanceLimits> = new Map(
  Object.entries(staticRows).map(([instanceType, row]) => [
    instanceType,
    {
      maxInterfaces: row.maxInterfaces,
      ipv4PerInterface: row.ipv4PerInterface,
      ipv6PerInterface: row.ipv6PerInterface,
      hypervisor: row.hypervisor,
      bareMetal: isBareMetalTypeName(instanceType),
    },
  ]),
);

/**
 * The port with `describeInstanceLimits` answered by one catalog: build it once per container so
 * every invocation of a warm container shares the cache. Every other method goes to `port` as it
 * is (`CatalogedEc2Network`).
 *
 * This cache stays a wrapper, apart from the adapter's (VPC, route tables, subnets), because the
 * catalog also answers from cilium's static table when EC2 cannot: that fallback is a policy of
 * the functions' composition (`functions/runtime/allocation-dependencies.ts` logs it), not of EC2.
 */
export function withInstanceLimitsCatalog(
  port: Ec2NetworkPort,
  options: Omit<InstanceLimitsCatalogOptions, 'describeInstanceLimits'> = {},
): Ec2NetworkPort {
  const catalog = new InstanceLimitsCatalog({
    ...options,
    describeInstanceLimits: (instanceType) => port.describeInstanceLimits(instanceType),
  });
  return new CatalogedEc2Network(port, catalog);
}

/** `Ec2NetworkPort` delegating every call to `port`, except the limits, which `catalog` answers. */
class CatalogedEc2Network implements Ec2NetworkPort {
  constructor(
    private readonly port: Ec2NetworkPort,
    private readonly catalog: InstanceLimitsCatalog,
  ) {}

  describeInstanceLimits(instanceType: string): Promise<InstanceLimits | undefined> {
    return this.catalog.limitsFor(instanceType);
  }

  describeInstance: Ec2NetworkPort['describeInstance'] = (...args) => this.port.describeInstance(...args);
  describeInstances: Ec2NetworkPort['describeInstances'] = (...args) => this.port.describeInstances(...args);
  describeAttachedEnis: Ec2NetworkPort['describeAttachedEnis'] = (...args) =>
    this.port.describeAttachedEnis(...args);
  listClusterInstances: Ec2NetworkPort['listClusterInstances'] = (...args) =>
    this.port.listClusterInstances(...args);
  findDetachedEnisCreatedFor: Ec2NetworkPort['findDetachedEnisCreatedFor'] = (...args) =>
    this.port.findDetachedEnisCreatedFor(...args);
  findDetachedEnisOfCluster: Ec2NetworkPort['findDetachedEnisOfCluster'] = () =>
    this.port.findDetachedEnisOfCluster();
  describeVpc: Ec2NetworkPort['describeVpc'] = (...args) => this.port.describeVpc(...args);
  describeSubnets: Ec2NetworkPort['describeSubnets'] = (...args) => this.port.describeSubnets(...args);
  describeSecurityGroups: Ec2NetworkPort['describeSecurityGroups'] = (...args) =>
    this.port.describeSecurityGroups(...args);
  createEni: Ec2NetworkPort['createEni'] = (...args) => this.port.createEni(...args);
  attachEni: Ec2NetworkPort['attachEni'] = (...args) => this.port.attachEni(...args);
  setDeleteOnTermination: Ec2NetworkPort['setDeleteOnTermination'] = (...args) =>
    this.port.setDeleteOnTermination(...args);
  assignIps: Ec2NetworkPort['assignIps'] = (...args) => this.port.assignIps(...args);
  assignIpv6Prefixes: Ec2NetworkPort['assignIpv6Prefixes'] = (...args) =>
    this.port.assignIpv6Prefixes(...args);
  unassignIps: Ec2NetworkPort['unassignIps'] = (...args) => this.port.unassignIps(...args);
  detachEni: Ec2NetworkPort['detachEni'] = (...args) => this.port.detachEni(...args);
  deleteEni: Ec2NetworkPort['deleteEni'] = (...args) => this.port.deleteEni(...args);
}
