import { readFileSync } from 'node:fs';

/**
 * Per-instance-type ENI limits, as DescribeInstanceTypes' NetworkInfo reports them. The emulator
 * reads the same static table the project ships (cilium's generated limits), so both agree.
 */
export interface InstanceTypeLimits {
  /** NetworkInfo.MaximumNetworkInterfaces: ENIs the instance may have, the primary included. */
  readonly maxInterfaces: number;
  /** NetworkInfo.Ipv4AddressesPerInterface: IPv4 addresses per ENI, the primary included. */
  readonly ipv4PerInterface: number;
  /**
   * NetworkInfo.Ipv6AddressesPerInterface: IPv6 addresses per ENI, 0 for a type without IPv6. AWS:
   * "as many IPv6 addresses as you can assign private IPv4 addresses", the default when absent.
   */
  readonly ipv6PerInterface?: number;
  /** `nitro`, `xen`, or empty (bare metal). */
  readonly hypervisor: string;
}

export interface InstanceTypeInfo extends InstanceTypeLimits {
  readonly instanceType: string;
  readonly ipv6PerInterface: number;
  readonly bareMetal: boolean;
  /** /28 and /80 prefixes are only offered on Nitro and bare-metal instances (VPC CNI README). */
  readonly supportsPrefixes: boolean;
}

interface StaticLimitsFile {
  instanceTypes: Record<string, InstanceTypeLimits>;
}

const STATIC_LIMITS_URL = new URL('../../../functions/aws/instance-limits.static.json', import.meta.url);

let cachedStaticLimits: ReadonlyMap<string, InstanceTypeLimits> | undefined;

/** The shipped table, read once per process. */
export function staticInstanceTypeLimits(): ReadonlyMap<string, InstanceTypeLimits> {
  if (!cachedStaticLimits) {
    const file = JSON.parse(readFileSync(STATIC_LIMITS_URL, 'utf8')) as StaticLimitsFile;
    cachedStaticLimits = new Map(Object.entries(file.instanceTypes));
  }
  return cachedStaticLimits;
}

export function describeInstanceType(instanceType: string, limits: InstanceTypeLimits): InstanceTypeInfo {
  const bareMetal = instanceType.includes('metal');
  return {
    instanceType,
    ...limits,
    ipv6PerInterface: limits.ipv6PerInterface ?? limits.ipv4PerInterface,
    bareMetal,
    supportsPrefixes: limits.hypervisor === 'nitro' || bareMetal,
  };
}
