import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../../functions/core/errors.ts';
import {
  addressesTaken,
  addressesTakenByNewEni,
  cidrContains,
  expandCidr,
  ipv4ToNumber,
  isIpv4Address,
  numberToIpv4,
  parseCidr,
  sortIpv4,
} from '../../../functions/core/ip-math.ts';

describe('isIpv4Address', () => {
  it.each([
    { case: 'plain address', text: '10.0.1.20', valid: true },
    { case: 'zeros', text: '0.0.0.0', valid: true },
    { case: 'broadcast', text: '255.255.255.255', valid: true },
    { case: 'octet above 255', text: '10.0.1.256', valid: false },
    { case: 'leading zero', text: '10.0.01.2', valid: false },
    { case: 'three octets', text: '10.0.1', valid: false },
    { case: 'CIDR is not an address', text: '10.0.1.0/28', valid: false },
    { case: 'IPv6', text: 'fd00::1', valid: false },
    { case: 'empty', text: '', valid: false },
  ])('$case', ({ text, valid }) => {
    expect(isIpv4Address(text)).toBe(valid);
  });
});

describe('ipv4ToNumber / numberToIpv4', () => {
  it.each([
    { case: 'zero', text: '0.0.0.0', value: 0 },
    { case: 'private', text: '10.0.1.20', value: 167772436 },
    { case: 'top', text: '255.255.255.255', value: 4294967295 },
    { case: 'high bit set stays unsigned', text: '192.168.0.1', value: 3232235521 },
  ])('$case', ({ text, value }) => {
    expect(ipv4ToNumber(text)).toBe(value);
    expect(numberToIpv4(value)).toBe(text);
  });

  it('rejects malformed text with InvalidInputError', () => {
    expect(() => ipv4ToNumber('10.0.0.300')).toThrow(InvalidInputError);
  });

  it.each([
    { case: 'negative', value: -1 },
    { case: 'above 2^32-1', value: 2 ** 32 },
    { case: 'fraction', value: 1.5 },
  ])('numberToIpv4 rejects $case', ({ value }) => {
    expect(() => numberToIpv4(value)).toThrow(RangeError);
  });
});

describe('parseCidr', () => {
  it.each([
    {
      case: 'delegated /28',
      cidr: '10.0.1.128/28',
      networkAddress: 167772544,
      prefixLength: 28,
      addressCount: 16,
    },
    {
      case: 'subnet /20',
      cidr: '10.0.0.0/20',
      networkAddress: 167772160,
      prefixLength: 20,
      addressCount: 4096,
    },
    { case: 'host /32', cidr: '10.0.1.5/32', networkAddress: 167772421, prefixLength: 32, addressCount: 1 },
    { case: 'everything /0', cidr: '0.0.0.0/0', networkAddress: 0, prefixLength: 0, addressCount: 2 ** 32 },
  ])('$case', ({ cidr, networkAddress, prefixLength, addressCount }) => {
    expect(parseCidr(cidr)).toEqual({ networkAddress, prefixLength, addressCount });
  });

  it.each([
    { case: 'host bits set', cidr: '10.0.1.129/28' },
    { case: 'no length', cidr: '10.0.1.128' },
    { case: 'length above 32', cidr: '10.0.1.128/33' },
    { case: 'two slashes', cidr: '10.0.1.128/28/1' },
    { case: 'bad address', cidr: '10.0.1/28' },
  ])('rejects $case', ({ cidr }) => {
    expect(() => parseCidr(cidr)).toThrow(InvalidInputError);
  });
});

describe('cidrContains', () => {
  it.each([
    { case: 'first address', cidr: '10.0.1.128/28', address: '10.0.1.128', inside: true },
    { case: 'last address', cidr: '10.0.1.128/28', address: '10.0.1.143', inside: true },
    { case: 'one past the end', cidr: '10.0.1.128/28', address: '10.0.1.144', inside: false },
    { case: 'one before the start', cidr: '10.0.1.128/28', address: '10.0.1.127', inside: false },
  ])('$case', ({ cidr, address, inside }) => {
    expect(cidrContains(cidr, address)).toBe(inside);
  });
});

describe('expandCidr', () => {
  it('expands a /28 into its 16 addresses in order', () => {
    expect(expandCidr('10.0.1.240/28')).toEqual(Array.from({ length: 16 }, (_, i) => `10.0.1.${240 + i}`));
  });

  it('crosses an octet boundary', () => {
    expect(expandCidr('10.0.1.254/31')).toEqual(['10.0.1.254', '10.0.1.255']);
    expect(expandCidr('10.0.2.0/23').at(-1)).toBe('10.0.3.255');
  });

  it('refuses blocks larger than a /16', () => {
    expect(() => expandCidr('10.0.0.0/15')).toThrow(InvalidInputError);
  });
});

describe('sortIpv4', () => {
  it('sorts numerically, not lexically', () => {
    expect(sortIpv4(['10.0.0.10', '10.0.0.9', '9.255.255.255', '10.0.1.0'])).toEqual([
      '9.255.255.255',
      '10.0.0.9',
      '10.0.0.10',
      '10.0.1.0',
    ]);
  });
});

describe('addressesTaken', () => {
  it.each([
    { ips: 0, prefixes: 0, taken: 0 },
    { ips: 7, prefixes: 0, taken: 7 },
    { ips: 0, prefixes: 2, taken: 32 },
    { ips: 3, prefixes: 1, taken: 19 },
  ])('$ips IPs and $prefixes /28s take $taken addresses', ({ ips, prefixes, taken }) => {
    expect(addressesTaken(ips, prefixes)).toBe(taken);
  });

  it('a new ENI takes its primary address too', () => {
    expect(
      addressesTakenByNewEni({ secondaryIps: ['10.0.0.6', '10.0.0.7'], prefixes: ['10.0.1.0/28'] }),
    ).toBe(19);
  });
});
