import { describe, expect, it } from 'vitest';
import { computeExcessIps } from '../../../functions/core/excess-selection.ts';
import { eni, ipOn } from './fixtures.ts';

describe('computeExcessIps', () => {
  const fii1 = { firstInterfaceIndex: 1, excludeInterfaceTags: {} };
  const on = (deviceIndex: number, ...hosts: number[]) => hosts.map((host) => ipOn(deviceIndex, host));
  const prefixAddresses = (deviceIndex: number, start: number) =>
    Array.from({ length: 16 }, (_, offset) => ipOn(deviceIndex, start + offset));

  it.each([
    {
      case: 'the ENI with the most releasable addresses wins',
      enis: [
        eni({ deviceIndex: 1, id: 'eni-a', secondaryCount: 3 }),
        eni({ deviceIndex: 2, id: 'eni-b', secondaryCount: 6 }),
      ],
      used: [],
      excess: 4,
      selection: {
        eniId: 'eni-b',
        subnetId: 'subnet-node',
        secondaryIps: on(2, 10, 11, 12, 13),
        prefixes: [],
        ips: on(2, 10, 11, 12, 13),
      },
    },
    {
      case: 'ties go to the lowest ENI id',
      enis: [
        eni({ deviceIndex: 1, id: 'eni-b', secondaryCount: 5 }),
        eni({ deviceIndex: 2, id: 'eni-a', secondaryCount: 5 }),
      ],
      used: [],
      excess: 2,
      selection: {
        eniId: 'eni-a',
        subnetId: 'subnet-node',
        secondaryIps: on(2, 10, 11),
        prefixes: [],
        ips: on(2, 10, 11),
      },
    },
    {
      case: 'used addresses are never selected',
      enis: [eni({ deviceIndex: 1, secondaryCount: 4 })],
      used: on(1, 10, 12),
      excess: 5,
      selection: {
        eniId: 'eni-1',
        subnetId: 'subnet-node',
        secondaryIps: on(1, 11, 13),
        prefixes: [],
        ips: on(1, 11, 13),
      },
    },
    {
      case: 'a wholly unused /28 is released whole when excess >= 16, then secondaries',
      enis: [eni({ deviceIndex: 1, secondaryCount: 3, prefixCount: 2 })],
      used: [ipOn(1, 130)],
      excess: 18,
      selection: {
        eniId: 'eni-1',
        subnetId: 'subnet-node',
        secondaryIps: on(1, 10, 11),
        prefixes: ['10.0.1.144/28'],
        ips: [...on(1, 10, 11), ...prefixAddresses(1, 144)],
      },
    },
    {
      case: 'excess below 16 never releases a /28',
      enis: [eni({ deviceIndex: 1, prefixCount: 2 }), eni({ deviceIndex: 2, secondaryCount: 2 })],
      used: [],
      excess: 15,
      selection: {
        eniId: 'eni-2',
        subnetId: 'subnet-node',
        secondaryIps: on(2, 10, 11),
        prefixes: [],
        ips: on(2, 10, 11),
      },
    },
    {
      case: 'the first prefixed ENI by id with anything releasable wins over plain ENIs',
      enis: [
        eni({ deviceIndex: 1, id: 'eni-z', secondaryCount: 8 }),
        eni({ deviceIndex: 2, id: 'eni-y', prefixCount: 1 }),
      ],
      used: [],
      excess: 16,
      selection: {
        eniId: 'eni-y',
        subnetId: 'subnet-node',
        secondaryIps: [],
        prefixes: ['10.0.2.128/28'],
        ips: prefixAddresses(2, 128),
      },
    },
  ])('$case', ({ enis, used, excess, selection }) => {
    expect(computeExcessIps({ enis, knobs: fii1, usedIps: new Set(used), excessIpCount: excess })).toEqual(
      selection,
    );
  });

  it.each([
    { case: 'no excess', enis: [eni({ deviceIndex: 1, secondaryCount: 4 })], used: [], excess: 0 },
    {
      case: 'everything used',
      enis: [eni({ deviceIndex: 1, secondaryCount: 2 })],
      used: on(1, 10, 11),
      excess: 2,
    },
    {
      case: 'only excluded ENIs have free addresses',
      enis: [eni({ deviceIndex: 0, secondaryCount: 4 })],
      used: [],
      excess: 2,
    },
    {
      case: 'partly used prefixes are kept',
      enis: [eni({ deviceIndex: 1, prefixCount: 1 })],
      used: [ipOn(1, 143)],
      excess: 16,
    },
  ])('nothing to release: $case', ({ enis, used, excess }) => {
    expect(
      computeExcessIps({ enis, knobs: fii1, usedIps: new Set(used), excessIpCount: excess }),
    ).toBeUndefined();
  });

  it('never selects an ENI primary address, even when it is listed as secondary', () => {
    const odd = { ...eni({ deviceIndex: 1, secondaryCount: 1 }), secondaryIps: [ipOn(1, 4), ipOn(1, 10)] };
    expect(computeExcessIps({ enis: [odd], knobs: fii1, usedIps: new Set(), excessIpCount: 5 })?.ips).toEqual(
      [ipOn(1, 10)],
    );
  });

  it('skips ENIs excluded by tags', () => {
    const tagged = eni({ deviceIndex: 1, secondaryCount: 4, tags: { skip: 'yes' } });
    const plain = eni({ deviceIndex: 2, secondaryCount: 1 });
    const selection = computeExcessIps({
      enis: [tagged, plain],
      knobs: { firstInterfaceIndex: 1, excludeInterfaceTags: { skip: 'yes' } },
      usedIps: new Set(),
      excessIpCount: 3,
    });
    expect(selection?.eniId).toBe('eni-2');
  });
});
