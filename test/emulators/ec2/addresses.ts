/**
 * IPv4 arithmetic and a subnet's address pool, mirroring how a VPC subnet hands out private
 * addresses: the first four and the last address of every subnet are reserved by AWS, single
 * addresses and /28 prefixes come from the same space, and a prefix must be an aligned, wholly
 * free /28 ("InsufficientCidrBlocks" otherwise, even when enough scattered single addresses remain).
 */

export interface Cidr {
  /** Network address as an unsigned 32-bit integer. */
  readonly base: number;
  readonly prefixLength: number;
  /** Number of addresses in the block (2^(32-prefixLength)). */
  readonly size: number;
}

/** Size of an EC2 IPv4 prefix (a /28) in addresses. */
export const PREFIX_SIZE = 16;
export const PREFIX_LENGTH = 28;

/** AWS reserves the network address, the VPC router, DNS, "future use" and the broadcast address. */
const RESERVED_AT_START = 4;
const RESERVED_AT_END = 1;

export function ipToInt(address: string): number | undefined {
  const parts = address.split('.');
  if (parts.length !== 4) return undefined;
  let value = 0;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part)) return undefined;
    const octet = Number(part);
    if (octet > 255) return undefined;
    value = value * 256 + octet;
  }
  return value;
}

export function intToIp(value: number): string {
  return [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255].join('.');
}

/** Parses `a.b.c.d/n`; returns undefined for anything else or a host part that is not zero. */
export function parseCidr(text: string): Cidr | undefined {
  const match = /^([\d.]+)\/(\d{1,2})$/.exec(text);
  if (!match) return undefined;
  const base = ipToInt(match[1] ?? '');
  const prefixLength = Number(match[2]);
  if (base === undefined || prefixLength > 32) return undefined;
  const size = 2 ** (32 - prefixLength);
  if (base % size !== 0) return undefined;
  return { base, prefixLength, size };
}

export function mustParseCidr(text: string): Cidr {
  const cidr = parseCidr(text);
  if (!cidr) throw new Error(`not a valid IPv4 CIDR: ${text}`);
  return cidr;
}

export function formatCidr(cidr: Cidr): string {
  return `${intToIp(cidr.base)}/${cidr.prefixLength}`;
}

export function cidrContains(outer: Cidr, inner: Cidr): boolean {
  return inner.base >= outer.base && inner.base + inner.size <= outer.base + outer.size;
}

export function cidrsOverlap(a: Cidr, b: Cidr): boolean {
  return a.base < b.base + b.size && b.base < a.base + a.size;
}

/**
 * The free address space of one subnet. Allocation is deterministic (lowest free address or
 * lowest free aligned /28 first) so tests can predict addresses.
 */
export class SubnetAddressPool {
  private readonly used = new Set<number>();
  private readonly firstUsable: number;
  private readonly lastUsable: number;
  /** No free single address exists below this value (a search hint, lowered on release). */
  private lowestPossiblyFree: number;

  constructor(readonly cidr: Cidr) {
    if (cidr.size < PREFIX_SIZE) throw new Error('an EC2 subnet is at least a /28');
    this.firstUsable = cidr.base + RESERVED_AT_START;
    this.lastUsable = cidr.base + cidr.size - 1 - RESERVED_AT_END;
    this.lowestPossiblyFree = this.firstUsable;
  }

  /** What DescribeSubnets reports as AvailableIpAddressCount. */
  get availableCount(): number {
    return this.lastUsable - this.firstUsable + 1 - this.used.size;
  }

  contains(address: number): boolean {
    return address >= this.cidr.base && address < this.cidr.base + this.cidr.size;
  }

  isUsable(address: number): boolean {
    return address >= this.firstUsable && address <= this.lastUsable;
  }

  isFree(address: number): boolean {
    return this.isUsable(address) && !this.used.has(address);
  }

  /** Finds the lowest free single addresses without taking them. */
  findFreeAddresses(count: number): number[] | undefined {
    const found: number[] = [];
    for (
      let address = this.lowestPossiblyFree;
      address <= this.lastUsable && found.length < count;
      address++
    ) {
      if (!this.used.has(address)) found.push(address);
    }
    return found.length === count ? found : undefined;
  }

  /** Finds the lowest aligned, wholly free /28 blocks (as base addresses) without taking them. */
  findFreePrefixes(count: number): number[] | undefined {
    const found: number[] = [];
    const start = this.lowestPossiblyFree - (this.lowestPossiblyFree % PREFIX_SIZE);
    for (
      let base = start;
      base + PREFIX_SIZE - 1 <= this.lastUsable && found.length < count;
      base += PREFIX_SIZE
    ) {
      if (this.isPrefixFree(base)) found.push(base);
    }
    return found.length === count ? found : undefined;
  }

  isPrefixFree(base: number): boolean {
    if (base % PREFIX_SIZE !== 0) return false;
    for (let address = base; address < base + PREFIX_SIZE; address++) {
      if (!this.isFree(address)) return false;
    }
    return true;
  }

  take(addresses: Iterable<number>): void {
    for (const address of addresses) {
      if (!this.isFree(address)) throw new Error(`address ${intToIp(address)} is not free`);
      this.used.add(address);
    }
    this.advanceHint();
  }

  takePrefix(base: number): void {
    this.take(prefixAddresses(base));
  }

  release(addresses: Iterable<number>): void {
    for (const address of addresses) {
      if (this.used.delete(address) && address < this.lowestPossiblyFree) this.lowestPossiblyFree = address;
    }
  }

  releasePrefix(base: number): void {
    this.release(prefixAddresses(base));
  }

  private advanceHint(): void {
    while (this.lowestPossiblyFree <= this.lastUsable && this.used.has(this.lowestPossiblyFree)) {
      this.lowestPossiblyFree++;
    }
  }
}

export function prefixAddresses(base: number): number[] {
  return Array.from({ length: PREFIX_SIZE }, (_, offset) => base + offset);
}
