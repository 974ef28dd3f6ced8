import { describe, expect, it } from 'vitest';
import type { CiliumEni, CiliumNode } from '../../../functions/core/ciliumnode.ts';
import { checkRightNode, checkStatusCoversSpec } from '../../support/invariants.ts';

const vpc = { id: 'vpc-1', 'primary-cidr': '10.0.0.0/16' };

function node(pool: Record<string, string>, enis: Record<string, CiliumEni>): CiliumNode {
  return {
    metadata: { name: 'n' },
    spec: {
      ipam: { pool: Object.fromEntries(Object.entries(pool).map(([ip, eni]) => [ip, { resource: eni }])) },
    },
    status: { eni: { enis } },
  };
}

describe('checkStatusCoversSpec', () => {
  it.each([
    {
      case: 'covered by addresses',
      cn: node({ '10.0.1.5': 'eni-a' }, { 'eni-a': { id: 'eni-a', vpc, addresses: ['10.0.1.5'] } }),
      expected: [],
    },
    {
      case: 'covered by a prefix only',
      cn: node({ '10.0.1.20': 'eni-a' }, { 'eni-a': { id: 'eni-a', vpc, prefixes: ['10.0.1.16/28'] } }),
      expected: [],
    },
    {
      case: 'ENI missing from status (the cilium #19923 failure)',
      cn: node({ '10.0.1.5': 'eni-b' }, { 'eni-a': { id: 'eni-a', vpc, addresses: ['10.0.1.5'] } }),
      expected: [{ invariant: 'status-covers-spec', ip: '10.0.1.5', eniId: 'eni-b' }],
    },
    {
      case: 'ENI present but lacking the IP',
      cn: node({ '10.0.1.6': 'eni-a' }, { 'eni-a': { id: 'eni-a', vpc, addresses: ['10.0.1.5'] } }),
      expected: [{ invariant: 'status-covers-spec', ip: '10.0.1.6', eniId: 'eni-a' }],
    },
    {
      case: 'a resource that is not an ENI id is not judged',
      cn: node({ '10.0.1.6': 'node-local' }, {}),
      expected: [],
    },
    {
      case: 'an ENI without primary CIDR and with an empty cidrs item',
      cn: node({}, { 'eni-a': { id: 'eni-a', vpc: { id: 'vpc-1', cidrs: [''] } } }),
      expected: [
        { invariant: 'eni-status-complete', eniId: 'eni-a' },
        { invariant: 'eni-status-complete', eniId: 'eni-a' },
      ],
    },
  ])('$case', ({ cn, expected }) => {
    const violations = checkStatusCoversSpec(cn);
    expect(violations.map(({ message: _message, ...rest }) => rest)).toEqual(expected);
    for (const violation of violations) expect(violation.message).not.toBe('');
  });

  it('accepts a CiliumNode without spec or status', () => {
    expect(checkStatusCoversSpec({ metadata: { name: 'n' } })).toEqual([]);
  });
});

describe('checkRightNode', () => {
  it.each([
    { case: 'same instance', spec: { 'instance-id': 'i-1' }, violations: 0 },
    { case: 'no instance named', spec: {}, violations: 0 },
    { case: 'another instance', spec: { 'instance-id': 'i-2' }, violations: 1 },
    {
      case: 'another instance in the obsolete field',
      spec: { eni: { 'instance-id': 'i-2' } },
      violations: 1,
    },
  ])('$case', ({ spec, violations }) => {
    expect(checkRightNode({ metadata: { name: 'n' }, spec }, 'i-1')).toHaveLength(violations);
  });
});
