import { InvalidInputError } from './errors.ts';

/**
 * IPv4 and CIDR arithmetic on dotted-quad strings. Pure; an address is handled as an unsigned
 * 32-bit integer internally. Malformed input throws `InvalidInputError` (it comes from EC2 or a
 * CiliumNode, so retrying cannot fix it).
 */

/** Addresses in one delegated IPv4 prefix: EC2 delegates /28s (cilium `option.ENIPDBlockSizeIPv4`). */
export const ADDRESSES_PER_IPV4_PREFIX = 16;

/**
 * How many addresses secondary IPs and /28 prefixes take from their subnet, every member of a /28
 * counted: the one count of what an assign consumes, for the subnet free counts on both sides of
 * the EC2 port and for the metrics.
 */
export function addressesTaken(ipCount: number, prefixCount: number): number {
  return ipCount + prefixCount * ADDRESSES_PER_IPV4_PREFIX;
}

/** What a new ENI takes from its subnet: its primary address, then its secondary IPs and /28s. */
export function addressesTakenByNewEni(eni: {
  readonly secondaryIps: readonly string[];
  readonly prefixes: readonly string[];
}): number {
  return 1 + addressesTaken(eni.secondaryIps.length, eni.prefixes.length);
}

/**
 * The largest block `expandCidr` will list (a /16). Listing is meant for /28 prefixes and small
 * ranges; refusing bigger blocks keeps a malformed prefix from producing millions of strings.
 */
const MAX_EXPANDABLE_ADDRESSES = 65_536;

const DOTTED_QUAD = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

export interface ParsedCidr {
  /** The network address (host bits cleared) as an unsigned 32-bit integer. */
  readonly networkAddress: number;
  readonly prefixLength: number;
  readonly addressCount: number;
}

/** True when `text` is a canonical dotted-quad IPv4 address (no leading zeros, each octet <= 255). */
export function isIpv4Address(text: string): boolean {
  const match = DOTTED_QUAD.exec(text);
  if (match === null) return false;
  return match.slice(1).every((octet) => Number(octet) <= 255 && (octet === '0' || !octet.startsWith('0')));
}

/** The address as an unsigned 32-bit integer. Throws `InvalidInputError` when malformed. */
export function ipv4ToNumber(address: string): number {
  if (!isIpv4Address(address)) {
    throw new InvalidInputError(`not an IPv4 address: ${JSON.stringify(address)}`);
  }
  return address.split('.').reduce((accumulated, octet) => accumulated * 256 + Number(octet), 0);
}

/** The dotted-quad form of an unsigned 32-bit integer. Throws `RangeError` outside 0..2^32-1. */
export function numberToIpv4(value: number): string {
  if (!Number.isInteger(value) || value < 0 || value > 0xffff_ffff) {
    throw new RangeError(`not an IPv4 address value: ${value}`);
  }
  return [value >>> 24, (value >>> 16) & 0xff, (value >>> 8) & 0xff, value & 0xff].join('.');
}

/**
 * Parses `a.b.c.d/n`. The address must be the network address (no host bits set), as EC2 reports
 * subnet CIDRs and delegated prefixes. Throws `InvalidInputError` otherwise.
 */
export function parseCidr(cidr: string): ParsedCidr {
  const [address, lengthText, ...rest] = cidr.split('/');
  if (address === undefined || lengthText === undefined || rest.length > 0 || !/^\d{1,2}$/.test(lengthText)) {
    throw new InvalidInputError(`not an IPv4 CIDR: ${JSON.stringify(cidr)}`);
  }
  const prefixLength = Number(lengthText);
  if (prefixLength > 32) {
    throw new InvalidInputError(`IPv4 prefix length out of range in ${JSON.stringify(cidr)}`);
  }
  const networkAddress = ipv4ToNumber(address);
  const addressCount = 2 ** (32 - prefixLength);
  if (networkAddress % addressCount !== 0) {
    throw new InvalidInputError(`host bits set in IPv4 CIDR ${JSON.stringify(cidr)}`);
  }
  return { networkAddress, prefixLength, addressCount };
}

/** True when `address` lies inside `cidr`. */
export function cidrContains(cidr: string, address: string): boolean {
  const { networkAddress, addressCount } = parseCidr(cidr);
  const value = ipv4ToNumber(address);
  return value >= networkAddress && value < networkAddress + addressCount;
}

/**
 * Every address of `cidr`, network and broadcast included, in ascending order. This is how a
 * delegated /28 reaches the pool: cilium expands each prefix into its 16 addresses and publishes
 * all of them (`ip.PrefixToIps`, `parseENI` in https://github.com/cilium/cilium/blob/507103c61f/pkg/aws/ec2/ec2.go). Refuses blocks larger than /16.
 */
export function expandCidr(cidr: string): string[] {
  const { networkAddress, addressCount } = parseCidr(cidr);
  if (addressCount > MAX_EXPANDABLE_ADDRESSES) {
    throw new InvalidInputError(
      `refusing to expand ${cidr}: more than ${MAX_EXPANDABLE_ADDRESSES} addresses`,
    );
  }
  return Array.from({ length: addressCount }, (_, offset) => numberToIpv4(networkAddress + offset));
}

/** Orders dotted-quad addresses numerically (10.0.0.9 before 10.0.0.10). */
export function compareIpv4(left: string, right: string): number {
  return ipv4ToNumber(left) - ipv4ToNumber(right);
}

/** A numerically sorted copy of `addresses`. */
export function sortIpv4(addresses: Iterable<string>): string[] {
  return [...addresses].sort(compareIpv4);
}
