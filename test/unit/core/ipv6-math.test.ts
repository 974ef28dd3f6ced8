import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../../functions/core/errors.ts';
import {
  bigIntToIpv6,
  canonicalIpv6Cidr,
  ipv6AddressAt,
  ipv6CidrContains,
  ipv6ToBigInt,
  isCanonicalIpv6Cidr,
  isIpv6Address,
} from '../../../functions/core/ipv6-math.ts';

describe('canonical IPv6 text (RFC 5952, as Go netip prints it)', () => {
  it.each([
    {
      case: 'already canonical',
      text: '2600:1f18:4a3b:9d01:2a4f::',
      canonical: '2600:1f18:4a3b:9d01:2a4f::',
    },
    { case: 'uppercase and leading zeros', text: '2600:1F18:004A:0001::', canonical: '2600:1f18:4a:1::' },
    { case: 'fully written', text: '2001:0db8:0000:0000:0000:0000:0000:0001', canonical: '2001:db8::1' },
    {
      case: 'a single zero group is not compressed',
      text: '2001:db8:0:1:1:1:1:1',
      canonical: '2001:db8:0:1:1:1:1:1',
    },
    { case: 'the longest run wins', text: '2001:0:0:1:0:0:0:1', canonical: '2001:0:0:1::1' },
    { case: 'the first run wins a tie', text: '2001:db8:0:0:1:0:0:1', canonical: '2001:db8::1:0:0:1' },
    { case: 'all zeros', text: '0:0:0:0:0:0:0:0', canonical: '::' },
    { case: 'loopback', text: '::1', canonical: '::1' },
  ])('$case', ({ text, canonical }) => {
    expect(bigIntToIpv6(ipv6ToBigInt(text))).toBe(canonical);
  });

  it.each([
    { case: 'two ::', text: '2001::1::2' },
    { case: 'nine groups', text: '1:2:3:4:5:6:7:8:9' },
    { case: 'seven groups without ::', text: '1:2:3:4:5:6:7' },
    { case: ':: standing for no group', text: '1:2:3:4::5:6:7:8' },
    { case: 'a five-digit group', text: '2001:db8::12345' },
    { case: 'IPv4', text: '10.0.0.1' },
    { case: 'empty', text: '' },
  ])('refuses $case', ({ text }) => {
    expect(isIpv6Address(text)).toBe(false);
    expect(() => ipv6ToBigInt(text)).toThrow(InvalidInputError);
  });
});

describe('canonicalIpv6Cidr', () => {
  it.each([
    {
      case: 'a /80 as EC2 writes it',
      cidr: '2600:1f18:4a3b:9d01:2a4f::/80',
      canonical: '2600:1f18:4a3b:9d01:2a4f::/80',
    },
    {
      case: 'uppercase',
      cidr: '2600:1F18:4A3B:9D01:2A4F:0:0:0/80',
      canonical: '2600:1f18:4a3b:9d01:2a4f::/80',
    },
    {
      case: 'a /80 whose compressible run is inside the network part',
      cidr: '2600:0:0:0:1234::/80',
      canonical: '2600::1234:0:0:0/80',
    },
    { case: 'a /64', cidr: '2600:1f18:4a3b:9d01::/64', canonical: '2600:1f18:4a3b:9d01::/64' },
  ])('$case', ({ cidr, canonical }) => {
    expect(canonicalIpv6Cidr(cidr)).toBe(canonical);
    expect(isCanonicalIpv6Cidr(canonical)).toBe(true);
  });

  it.each([
    { case: 'host bits set', cidr: '2600:1f18:4a3b:9d01:2a4f::1/80' },
    { case: 'no length', cidr: '2600:1f18::' },
    { case: 'length above 128', cidr: '2600:1f18::/129' },
    { case: 'an IPv4 CIDR', cidr: '10.0.0.0/28' },
  ])('refuses $case', ({ cidr }) => {
    expect(() => canonicalIpv6Cidr(cidr)).toThrow(InvalidInputError);
    expect(isCanonicalIpv6Cidr(cidr)).toBe(false);
  });

  it('tells canonical text from other spellings of the same CIDR', () => {
    expect(isCanonicalIpv6Cidr('2600:1F18::/80')).toBe(false);
  });
});

describe('containment and offsets', () => {
  const prefix = '2600::1234:0:0:0/80';

  it.each([
    { case: 'the network address', address: '2600::1234:0:0:0', inside: true },
    { case: 'the first host', address: '2600::1234:0:0:1', inside: true },
    { case: 'the last address', address: '2600:0:0:0:1234:ffff:ffff:ffff', inside: true },
    { case: 'the next /80', address: '2600::1235:0:0:0', inside: false },
    { case: 'an IPv4 address', address: '10.0.0.1', inside: false },
  ])('$case', ({ address, inside }) => {
    expect(ipv6CidrContains(prefix, address)).toBe(inside);
  });

  it('counts addresses from the network address, in canonical text', () => {
    expect(ipv6AddressAt(prefix, 1n)).toBe('2600::1234:0:0:1');
    expect(ipv6AddressAt(prefix, 0x10000n)).toBe('2600::1234:0:1:0');
    expect(() => ipv6AddressAt(prefix, 1n << 48n)).toThrow(RangeError);
  });
});
