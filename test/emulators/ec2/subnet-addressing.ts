import {
  type Cidr,
  intToIp,
  ipToInt,
  mustParseCidr,
  PREFIX_LENGTH,
  PREFIX_SIZE,
  parseCidr,
  prefixAddresses,
  SubnetAddressPool,
} from './addresses.ts';
import { Ec2ApiError, ec2Errors } from './errors.ts';
import { SubnetIpv6PrefixPool } from './ipv6-addresses.ts';
import type { SubnetRecord } from './records.ts';

/**
 * The addresses of every subnet: its IPv4 pool (single addresses and aligned /28 prefixes) and,
 * for a dual-stack subnet, its pool of IPv6 /80 prefixes. Takes are all-or-nothing: a request that
 * fails leaves every pool as it was. A fragmented subnet (`SubnetRecord.fragmented`, the
 * `fragmented-subnet` fault) has no aligned free /28 to delegate.
 */

/** The IPv4 addresses one create or assign asks for. */
export interface AddressRequest {
  readonly primaryAddress: string | undefined;
  /** A create needs a primary address (generated when `primaryAddress` is absent); an assign does not. */
  readonly needsPrimary: boolean;
  readonly secondaryCount: number;
  readonly explicitSecondaries: readonly string[];
  readonly prefixCount: number;
  readonly explicitPrefixes: readonly string[];
}

export interface AddressAllocation {
  readonly primary: string | undefined;
  readonly secondaries: string[];
  readonly prefixes: string[];
}

export class SubnetAddressing {
  private readonly ipv4Pools = new Map<string, SubnetAddressPool>();
  private readonly ipv6Pools = new Map<string, SubnetIpv6PrefixPool>();

  addIpv4Block(subnetId: string, cidr: Cidr): void {
    this.ipv4Pools.set(subnetId, new SubnetAddressPool(cidr));
  }

  addIpv6Block(subnetId: string, cidrBlock: string): void {
    this.ipv6Pools.set(subnetId, new SubnetIpv6PrefixPool(cidrBlock));
  }

  availableCount(subnetId: string): number {
    return this.ipv4Pool(subnetId).availableCount;
  }

  /**
   * Takes addresses from the subnet all-or-nothing: explicit addresses must lie in the subnet and
   * be free, counts take the lowest free addresses, prefixes the lowest free aligned /28s.
   */
  allocate(subnet: SubnetRecord, request: AddressRequest): AddressAllocation {
    const pool = this.ipv4Pool(subnet.subnetId);
    const taken: number[] = [];
    const takeOrRollback = (addresses: number[]): void => {
      pool.take(addresses);
      taken.push(...addresses);
    };
    try {
      const explicitSingles = [
        ...(request.primaryAddress !== undefined ? [request.primaryAddress] : []),
        ...request.explicitSecondaries,
      ].map((address) => requireFreeAddressInSubnet(subnet, pool, address));
      if (new Set(explicitSingles).size !== explicitSingles.length) {
        throw ec2Errors.invalidParameterValue('The same private IP address was specified more than once.');
      }
      takeOrRollback(explicitSingles);

      const generatedCount =
        request.secondaryCount + (request.needsPrimary && !request.primaryAddress ? 1 : 0);
      const generated = generatedCount > 0 ? pool.findFreeAddresses(generatedCount) : [];
      if (!generated) throw ec2Errors.insufficientFreeAddresses(subnet.subnetId);
      takeOrRollback(generated);

      const explicitPrefixBases = request.explicitPrefixes.map((prefix) =>
        requireFreePrefixInSubnet(subnet, pool, prefix),
      );
      for (const base of explicitPrefixBases) takeOrRollback(prefixAddresses(base));

      const prefixCount = request.prefixCount;
      let generatedPrefixes: number[] = [];
      if (prefixCount > 0) {
        // A fragmented subnet, or one without an aligned free /28, cannot delegate prefixes.
        const found = subnet.fragmented ? undefined : pool.findFreePrefixes(prefixCount);
        if (!found) throw ec2Errors.insufficientCidrBlocks(subnet.subnetId);
        generatedPrefixes = found;
        for (const base of found) takeOrRollback(prefixAddresses(base));
      }

      const singles = [...explicitSingles, ...generated].map(intToIp);
      const primary = request.needsPrimary
        ? (request.primaryAddress ?? intToIp(generated[0] ?? Number.NaN))
        : undefined;
      const secondaries = request.needsPrimary ? singles.filter((address) => address !== primary) : singles;
      const prefixes = [...explicitPrefixBases, ...generatedPrefixes].map(
        (base) => `${intToIp(base)}/${PREFIX_LENGTH}`,
      );
      return { primary, secondaries, prefixes };
    } catch (error) {
      pool.release(taken);
      throw error;
    }
  }

  /**
   * The /80s a create or an assign asks for (`held` already on the ENI, at most `limit` in all),
   * validated and found free but not taken: a count takes the lowest free ones, explicit prefixes
   * must be free /80s of the subnet's block. Empty when the request asks for none.
   */
  chooseIpv6Prefixes(
    subnet: SubnetRecord,
    request: { ipv6PrefixCount?: number; ipv6Prefixes?: string[]; ipv6AddressCount?: number },
    held: number,
    limit: number,
  ): string[] {
    if (request.ipv6AddressCount !== undefined) {
      throw new Error('single IPv6 addresses (Ipv6AddressCount) are not modelled by the emulator');
    }
    const explicit = request.ipv6Prefixes ?? [];
    if (request.ipv6PrefixCount !== undefined && explicit.length > 0) {
      throw ec2Errors.invalidParameterCombination('Ipv6PrefixCount and Ipv6Prefix are exclusive.');
    }
    const count = nonNegativeParameter('Ipv6PrefixCount', request.ipv6PrefixCount ?? 0) + explicit.length;
    if (count === 0) return [];
    if (subnet.ipv6CidrBlock === undefined) throw ec2Errors.subnetWithoutIpv6(subnet.subnetId);
    if (held + count > limit) throw ec2Errors.ipv6AddressLimitExceeded();
    const pool = this.ipv6Pool(subnet.subnetId);
    if (explicit.length === 0) {
      const found = pool.findFree(count);
      if (!found) throw ec2Errors.insufficientCidrBlocks(subnet.subnetId);
      return found;
    }
    for (const prefix of explicit) {
      if (pool.indexOf(prefix) === undefined) throw ec2Errors.ipv6PrefixInvalid(prefix, subnet.subnetId);
      if (!pool.isFree(prefix)) throw ec2Errors.addressInUse(prefix);
    }
    if (new Set(explicit).size !== explicit.length) {
      throw ec2Errors.invalidParameterValue('The same IPv6 prefix was specified more than once.');
    }
    return [...explicit];
  }

  takeIpv6Prefixes(subnetId: string, prefixes: readonly string[]): void {
    this.ipv6Pool(subnetId).take(prefixes);
  }

  /** Returns single addresses and /28 prefixes to the subnet. */
  releaseIpv4(subnetId: string, addresses: readonly string[], prefixes: readonly string[]): void {
    const pool = this.ipv4Pool(subnetId);
    pool.release(addresses.map(mustIpToInt));
    for (const prefix of prefixes) pool.releasePrefix(mustParseCidr(prefix).base);
  }

  releaseIpv6Prefixes(subnetId: string, prefixes: readonly string[]): void {
    this.ipv6Pool(subnetId).release(prefixes);
  }

  private ipv4Pool(subnetId: string): SubnetAddressPool {
    const pool = this.ipv4Pools.get(subnetId);
    if (!pool) throw ec2Errors.subnetNotFound(subnetId);
    return pool;
  }

  private ipv6Pool(subnetId: string): SubnetIpv6PrefixPool {
    const pool = this.ipv6Pools.get(subnetId);
    if (!pool) throw ec2Errors.subnetWithoutIpv6(subnetId);
    return pool;
  }
}

function requireFreeAddressInSubnet(subnet: SubnetRecord, pool: SubnetAddressPool, address: string): number {
  const value = ipToInt(address);
  if (value === undefined) throw ec2Errors.invalidParameterValue(`Invalid IPv4 address: ${address}`);
  if (!pool.contains(value) || !pool.isUsable(value))
    throw ec2Errors.addressNotInSubnet(address, subnet.subnetId);
  if (!pool.isFree(value)) throw ec2Errors.addressInUse(address);
  return value;
}

function requireFreePrefixInSubnet(subnet: SubnetRecord, pool: SubnetAddressPool, prefix: string): number {
  const cidr = parseCidr(prefix);
  if (!cidr || cidr.prefixLength !== PREFIX_LENGTH) {
    throw ec2Errors.invalidParameterValue(`Invalid IPv4 prefix: ${prefix} (expecting an aligned /28).`);
  }
  if (!pool.contains(cidr.base) || !pool.contains(cidr.base + PREFIX_SIZE - 1)) {
    throw ec2Errors.addressNotInSubnet(prefix, subnet.subnetId);
  }
  if (!pool.isPrefixFree(cidr.base)) throw ec2Errors.addressInUse(prefix);
  return cidr.base;
}

/** A count parameter of a request: a non-negative integer, else InvalidParameterValue. */
export function nonNegativeParameter(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 0) {
    throw ec2Errors.invalidParameterValue(`Value (${value}) for parameter ${name} is invalid.`);
  }
  return value;
}

function mustIpToInt(address: string): number {
  const value = ipToInt(address);
  if (value === undefined) throw new Ec2ApiError('InvalidParameterValue', `Invalid IPv4 address: ${address}`);
  return value;
}
