import { InvalidInputError } from './errors.ts';

/**
 * IPv6 addresses and CIDRs as text: parsing, RFC 5952 canonical text (what Go's `netip` prints and
 * what cilium agents compare), containment. Pure; an address is an unsigned 128-bit `bigint`
 * internally. Malformed input throws `InvalidInputError` (it comes from EC2 or a CiliumNode, so
 * retrying cannot fix it). Only the forms EC2 and the agents write are accepted: hexadecimal
 * groups with at most one `::`; no zone, no embedded dotted-quad IPv4.
 */

/** The prefix length of the IPv6 prefix EC2 delegates to an ENI (`Ipv6PrefixCount`): a /80. */
export const DELEGATED_IPV6_PREFIX_LENGTH = 80;

const GROUP = /^[0-9a-fA-F]{1,4}$/;
const BITS = 128n;

/** The address as an unsigned 128-bit integer. Throws `InvalidInputError` when malformed. */
export function ipv6ToBigInt(address: string): bigint {
  const groups = expandGroups(address);
  if (groups === undefined) throw new InvalidInputError(`not an IPv6 address: ${JSON.stringify(address)}`);
  return groups.reduce((value, group) => (value << 16n) | BigInt(Number.parseInt(group, 16)), 0n);
}

/** True when `text` parses as an IPv6 address (any valid spelling, not only the canonical one). */
export function isIpv6Address(text: string): boolean {
  return expandGroups(text) !== undefined;
}

/**
 * RFC 5952 text of an unsigned 128-bit value: lowercase, leading zeros dropped, the longest run of
 * two or more zero groups (the first one on a tie) written as `::`.
 */
export function bigIntToIpv6(value: bigint): string {
  if (value < 0n || value >> BITS !== 0n) throw new RangeError(`not an IPv6 address value: ${value}`);
  const groups = Array.from({ length: 8 }, (_, index) =>
    Number((value >> BigInt(16 * (7 - index))) & 0xffffn),
  );
  const run = longestZeroRun(groups);
  const text = (part: number[]) => part.map((group) => group.toString(16)).join(':');
  if (run.length < 2) return text(groups);
  return `${text(groups.slice(0, run.start))}::${text(groups.slice(run.start + run.length))}`;
}

export interface ParsedIpv6Cidr {
  readonly networkAddress: bigint;
  readonly prefixLength: number;
}

/**
 * Parses `address/length`. The address must be the network address (no host bits set), as EC2
 * reports subnet blocks and delegated prefixes. Throws `InvalidInputError` otherwise.
 */
export function parseIpv6Cidr(cidr: string): ParsedIpv6Cidr {
  const [address, lengthText, ...rest] = cidr.split('/');
  if (address === undefined || lengthText === undefined || rest.length > 0 || !/^\d{1,3}$/.test(lengthText)) {
    throw new InvalidInputError(`not an IPv6 CIDR: ${JSON.stringify(cidr)}`);
  }
  const prefixLength = Number(lengthText);
  if (prefixLength > 128) {
    throw new InvalidInputError(`IPv6 prefix length out of range in ${JSON.stringify(cidr)}`);
  }
  const networkAddress = ipv6ToBigInt(address);
  if ((networkAddress & hostMask(prefixLength)) !== 0n) {
    throw new InvalidInputError(`host bits set in IPv6 CIDR ${JSON.stringify(cidr)}`);
  }
  return { networkAddress, prefixLength };
}

/** The canonical text of an IPv6 CIDR (`2600:1F18:0:0:1::/80` → `2600:1f18::1:0:0:0/80`). */
export function canonicalIpv6Cidr(cidr: string): string {
  const { networkAddress, prefixLength } = parseIpv6Cidr(cidr);
  return `${bigIntToIpv6(networkAddress)}/${prefixLength}`;
}

/** True when `text` is an IPv6 CIDR written exactly as `canonicalIpv6Cidr` writes it. */
export function isCanonicalIpv6Cidr(text: string): boolean {
  try {
    return canonicalIpv6Cidr(text) === text;
  } catch {
    return false;
  }
}

/** True when `address` (an IPv6 address) lies inside `cidr`; false for an IPv4 address. */
export function ipv6CidrContains(cidr: string, address: string): boolean {
  if (!isIpv6Address(address)) return false;
  const { networkAddress, prefixLength } = parseIpv6Cidr(cidr);
  return (ipv6ToBigInt(address) & ~hostMask(prefixLength) & ((1n << BITS) - 1n)) === networkAddress;
}

/** The address `offset` places after the network address of `cidr`, in canonical text. */
export function ipv6AddressAt(cidr: string, offset: bigint): string {
  const { networkAddress, prefixLength } = parseIpv6Cidr(cidr);
  if (offset < 0n || offset > hostMask(prefixLength)) {
    throw new RangeError(`offset ${offset} is outside ${cidr}`);
  }
  return bigIntToIpv6(networkAddress + offset);
}

function hostMask(prefixLength: number): bigint {
  return (1n << (BITS - BigInt(prefixLength))) - 1n;
}

/** The eight groups of a textual address, `::` expanded; `undefined` when malformed. */
function expandGroups(address: string): string[] | undefined {
  const halves = address.split('::');
  if (halves.length > 2) return undefined;
  const split = (half: string | undefined) => (half === undefined || half === '' ? [] : half.split(':'));
  const head = split(halves[0]);
  const tail = split(halves[1]);
  if (![...head, ...tail].every((group) => GROUP.test(group))) return undefined;
  if (halves.length === 1) return head.length === 8 ? head : undefined;
  const missing = 8 - head.length - tail.length;
  return missing >= 1 ? [...head, ...Array.from({ length: missing }, () => '0'), ...tail] : undefined;
}

function longestZeroRun(groups: readonly number[]): { start: number; length: number } {
  let best = { start: 0, length: 0 };
  let start = -1;
  for (let index = 0; index <= groups.length; index++) {
    if (index < groups.length && groups[index] === 0) {
      if (start < 0) start = index;
      continue;
    }
    if (start >= 0 && index - start > best.length) best = { start, length: index - start };
    start = -1;
  }
  return best;
}
