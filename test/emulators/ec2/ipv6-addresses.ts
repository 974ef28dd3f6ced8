import {
  bigIntToIpv6,
  DELEGATED_IPV6_PREFIX_LENGTH,
  type ParsedIpv6Cidr,
  parseIpv6Cidr,
} from '../../../functions/core/ipv6-math.ts';

/**
 * The IPv6 side of a dual-stack subnet: its one /64 block (the only size AWS gives a subnet) and
 * the /80 prefixes delegated to its ENIs. Text parsing is the project's own (unit-tested in
 * functions/core/ipv6-math.ts); the rules are AWS's:
 * - a delegated IPv6 prefix is a /80 inside the subnet's /64, so a subnet holds 65 536 of them;
 * - AWS reserves the first four and the last IPv6 address of every subnet block, so the first and
 *   the last /80 can never be delegated whole;
 * - prefixes never overlap (automatic assignment takes the lowest free /80, so tests can predict it).
 * Individual /128 addresses (`Ipv6AddressCount`, `Ipv6Addresses`) are not modelled.
 */

/** The prefix length AWS gives every subnet IPv6 block. */
export const SUBNET_IPV6_PREFIX_LENGTH = 64;
/** The prefix length of a VPC's Amazon-provided IPv6 block. */
export const VPC_IPV6_PREFIX_LENGTH = 56;

const PREFIXES_PER_SUBNET = 1n << BigInt(DELEGATED_IPV6_PREFIX_LENGTH - SUBNET_IPV6_PREFIX_LENGTH);
const PREFIX_SIZE = 1n << BigInt(128 - DELEGATED_IPV6_PREFIX_LENGTH);

/** A parsed IPv6 CIDR, or `undefined` when `text` is not one (`parseIpv6Cidr` throws). */
export function tryParseIpv6Cidr(text: string): ParsedIpv6Cidr | undefined {
  try {
    return parseIpv6Cidr(text);
  } catch {
    return undefined;
  }
}

/** Whether `inner` lies inside `outer` (both parsed). */
export function ipv6CidrWithin(outer: ParsedIpv6Cidr, inner: ParsedIpv6Cidr): boolean {
  if (inner.prefixLength < outer.prefixLength) return false;
  const shift = BigInt(128 - outer.prefixLength);
  return inner.networkAddress >> shift === outer.networkAddress >> shift;
}

export function formatIpv6Cidr(cidr: ParsedIpv6Cidr): string {
  return `${bigIntToIpv6(cidr.networkAddress)}/${cidr.prefixLength}`;
}

export class SubnetIpv6PrefixPool {
  private readonly block: ParsedIpv6Cidr;
  /** Indexes (0..65535) of the /80s delegated, within the /64. */
  private readonly used = new Set<bigint>();

  constructor(readonly cidrBlock: string) {
    const block = tryParseIpv6Cidr(cidrBlock);
    if (block?.prefixLength !== SUBNET_IPV6_PREFIX_LENGTH) {
      throw new Error(`a subnet IPv6 block is a /64, not ${cidrBlock}`);
    }
    this.block = block;
  }

  /** The index of a /80 of this block, `undefined` when `prefix` is not a /80 inside it. */
  indexOf(prefix: string): bigint | undefined {
    const parsed = tryParseIpv6Cidr(prefix);
    if (parsed?.prefixLength !== DELEGATED_IPV6_PREFIX_LENGTH || !ipv6CidrWithin(this.block, parsed)) {
      return undefined;
    }
    return (parsed.networkAddress - this.block.networkAddress) / PREFIX_SIZE;
  }

  /** A /80 that may be delegated now: inside the block, clear of the reserved addresses, free. */
  isFree(prefix: string): boolean {
    const index = this.indexOf(prefix);
    return index !== undefined && isDelegable(index) && !this.used.has(index);
  }

  /** The lowest free /80s, without taking them; `undefined` when fewer than `count` are free. */
  findFree(count: number): string[] | undefined {
    const found: string[] = [];
    for (let index = 1n; index < PREFIXES_PER_SUBNET - 1n && found.length < count; index++) {
      if (!this.used.has(index)) found.push(this.prefixAt(index));
    }
    return found.length === count ? found : undefined;
  }

  take(prefixes: readonly string[]): void {
    for (const prefix of prefixes) {
      const index = this.indexOf(prefix);
      if (index === undefined || !this.isFree(prefix)) throw new Error(`IPv6 prefix ${prefix} is not free`);
      this.used.add(index);
    }
  }

  release(prefixes: readonly string[]): void {
    for (const prefix of prefixes) {
      const index = this.indexOf(prefix);
      if (index !== undefined) this.used.delete(index);
    }
  }

  private prefixAt(index: bigint): string {
    return formatIpv6Cidr({
      networkAddress: this.block.networkAddress + index * PREFIX_SIZE,
      prefixLength: DELEGATED_IPV6_PREFIX_LENGTH,
    });
  }
}

/** The first and the last /80 hold addresses AWS reserves. */
function isDelegable(index: bigint): boolean {
  return index > 0n && index < PREFIXES_PER_SUBNET - 1n;
}
