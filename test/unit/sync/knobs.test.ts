import { describe, expect, it } from 'vitest';
import type { CiliumEniSpec, CiliumNode } from '../../../functions/core/ciliumnode.ts';
import { instanceIdOfCiliumNode, knobsFromCiliumNode, usedIps } from '../../../functions/core/knobs.ts';
import type { NodeKnobs } from '../../../functions/core/model.ts';
import { defaultKnobs } from '../../fixtures/node-records.ts';

const stackDefaults: NodeKnobs = {
  ...defaultKnobs,
  preAllocate: 8,
  subnetTags: { tier: 'pods' },
  deleteOnTermination: false,
};

function node(spec: CiliumNode['spec'], status?: CiliumNode['status']): CiliumNode {
  return { metadata: { name: 'n' }, spec, ...(status ? { status } : {}) };
}

describe('knobsFromCiliumNode', () => {
  it('uses the stack-wide defaults while no CiliumNode exists', () => {
    expect(knobsFromCiliumNode(undefined, stackDefaults)).toBe(stackDefaults);
  });

  it('reads every knob with cilium JSON names', () => {
    const cn = node({
      ipam: { 'pre-allocate': 16, 'min-allocate': 10, 'max-allocate': 100, 'max-above-watermark': 4 },
      eni: {
        'first-interface-index': 1,
        'subnet-ids': ['subnet-a', 'subnet-b'],
        'subnet-tags': { a: '1' },
        'security-groups': ['sg-1'],
        'security-group-tags': { sg: 'x' },
        'exclude-interface-tags': { skip: 'yes' },
        'use-primary-address': true,
        'disable-prefix-delegation': true,
        'delete-on-termination': false,
      },
    });
    expect(knobsFromCiliumNode(cn, stackDefaults)).toEqual({
      preAllocate: 16,
      minAllocate: 10,
      maxAllocate: 100,
      maxAboveWatermark: 4,
      firstInterfaceIndex: 1,
      subnetIds: ['subnet-a', 'subnet-b'],
      subnetTags: { a: '1' },
      securityGroups: ['sg-1'],
      securityGroupTags: { sg: 'x' },
      excludeInterfaceTags: { skip: 'yes' },
      usePrimaryAddress: true,
      disablePrefixDelegation: true,
      deleteOnTermination: false,
    });
  });

  it.each([
    {
      case: 'unset delete-on-termination is true (cilium nil handling), whatever the default',
      eni: {},
      key: 'deleteOnTermination',
      expected: true,
    },
    { case: 'unset pre-allocate takes the stack default', eni: {}, key: 'preAllocate', expected: 8 },
    {
      case: 'unset subnet-tags take the stack default',
      eni: {},
      key: 'subnetTags',
      expected: { tier: 'pods' },
    },
    {
      case: 'explicit first-interface-index 0 is kept',
      eni: { 'first-interface-index': 0 },
      key: 'firstInterfaceIndex',
      expected: 0,
    },
  ] as const)('$case', ({ eni, key, expected }) => {
    const cn = node({ eni: eni as CiliumEniSpec });
    expect(knobsFromCiliumNode(cn, stackDefaults)[key]).toEqual(expected);
  });

  it.each([
    {
      case: 'a negative first-interface-index',
      spec: { eni: { 'first-interface-index': -1 } },
      malformed: 'spec.eni.first-interface-index: expected a non-negative integer, got -1',
    },
    {
      case: 'a fractional pre-allocate',
      spec: { ipam: { 'pre-allocate': 1.5 } },
      malformed: 'spec.ipam.pre-allocate: expected a non-negative integer, got 1.5',
    },
    {
      case: 'a non-boolean use-primary-address',
      spec: { eni: { 'use-primary-address': 'yes' } },
      malformed: 'spec.eni.use-primary-address: expected true or false, got "yes"',
    },
    {
      case: 'subnet-tags as a string, not a map',
      spec: { eni: { 'subnet-tags': 'tier=pods' } },
      malformed:
        'spec.eni.subnet-tags: expected a map of non-empty tag keys to string values, got "tier=pods"',
    },
    {
      case: 'a tag filter with a non-string value (dropping it would widen the filter)',
      spec: { eni: { 'exclude-interface-tags': { a: '1', b: 2 } } },
      malformed:
        'spec.eni.exclude-interface-tags: expected a map of non-empty tag keys to string values, got {"a":"1","b":2}',
    },
    {
      case: 'a tag filter with an empty key',
      spec: { eni: { 'security-group-tags': { '': 'pods' } } },
      malformed:
        'spec.eni.security-group-tags: expected a map of non-empty tag keys to string values, got {"":"pods"}',
    },
    {
      case: 'subnet-ids holding a number',
      spec: { eni: { 'subnet-ids': ['subnet-a', 7] } },
      malformed: 'spec.eni.subnet-ids: expected a list of non-empty strings, got ["subnet-a",7]',
    },
    {
      case: 'security-groups as one string',
      spec: { eni: { 'security-groups': 'sg-1' } },
      malformed: 'spec.eni.security-groups: expected a list of non-empty strings, got "sg-1"',
    },
  ])('reads $case as the default and names it in malformed', ({ spec, malformed }) => {
    const knobs = knobsFromCiliumNode(node(spec as CiliumNode['spec']), stackDefaults);
    expect(knobs.malformed).toEqual([malformed]);
    expect({ ...knobs, malformed: undefined }).toEqual({
      ...stackDefaults,
      deleteOnTermination: true,
      malformed: undefined,
    });
  });

  it('names nothing malformed when every knob is unset or null', () => {
    const knobs = knobsFromCiliumNode(
      node({ eni: { 'subnet-ids': null } as unknown as CiliumEniSpec }),
      stackDefaults,
    );
    expect(knobs).not.toHaveProperty('malformed');
  });

  it('keeps an explicit pre-allocate 0 (the allocator resolves it to cilium default)', () => {
    expect(knobsFromCiliumNode(node({ ipam: { 'pre-allocate': 0 } }), stackDefaults).preAllocate).toBe(0);
  });
});

describe('instanceIdOfCiliumNode', () => {
  it.each([
    {
      case: 'spec.instance-id',
      spec: { 'instance-id': 'i-1', eni: { 'instance-id': 'i-2' } },
      expected: 'i-1',
    },
    {
      case: 'falls back to obsolete spec.eni.instance-id',
      spec: { eni: { 'instance-id': 'i-2' } },
      expected: 'i-2',
    },
    {
      case: 'empty spec.instance-id falls back',
      spec: { 'instance-id': '', eni: { 'instance-id': 'i-2' } },
      expected: 'i-2',
    },
    { case: 'neither set', spec: { eni: {} }, expected: undefined },
    { case: 'no spec', spec: undefined, expected: undefined },
  ])('$case', ({ spec, expected }) => {
    expect(instanceIdOfCiliumNode(node(spec))).toBe(expected);
  });
});

describe('usedIps', () => {
  it('lists status.ipam.used IPv4 keys numerically; nothing without a CiliumNode or status', () => {
    const cn = node(
      {},
      {
        ipam: {
          used: {
            '10.0.0.10': { owner: 'a', resource: 'eni-1' },
            '10.0.0.9': { owner: 'router', resource: 'eni-1' },
            'not-an-ip': { owner: 'x' },
          },
        },
      },
    );
    expect(usedIps(cn)).toEqual(['10.0.0.9', '10.0.0.10']);
    expect(usedIps(node({}))).toEqual([]);
    expect(usedIps(undefined)).toEqual([]);
  });
});
