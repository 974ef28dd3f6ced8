import { describe, expect, it } from 'vitest';
import type { CiliumNode } from '../../../functions/core/ciliumnode.ts';
import {
  desiredOperatorError,
  desiredPool,
  desiredStatusEnis,
  eniAddresses,
  unpublishableRecordProblems,
} from '../../../functions/core/ciliumnode-render.ts';
import type { NodeRecord } from '../../../functions/core/model.ts';
import { defaultKnobs, eniFixture, nodeRecordFixture } from '../../fixtures/node-records.ts';
import { checkStatusCoversSpec } from '../../support/invariants.ts';
import { crdProblems } from './support.ts';

const eth0 = eniFixture(0, 0);
const eth1 = eniFixture(1, 2);

describe('desiredStatusEnis', () => {
  it('renders cilium ENI JSON exactly: number omitted at 0, empty lists/maps/strings omitted', () => {
    const record = nodeRecordFixture({ enis: [eth0, eth1] });
    expect(desiredStatusEnis(record)).toEqual({
      [eth0.id]: {
        id: eth0.id,
        ip: '10.0.16.10',
        mac: '02:00:00:00:00:00',
        description: 'primary',
        subnet: { id: 'subnet-00000001', cidr: '10.0.0.0/16' },
        vpc: { id: 'vpc-00000001', 'primary-cidr': '10.0.0.0/16', cidrs: ['100.64.0.0/16'] },
        'security-groups': ['sg-00000001'],
      },
      [eth1.id]: {
        id: eth1.id,
        ip: '10.0.17.10',
        mac: '02:00:00:00:00:01',
        description: 'Cilium-CNI (i-0123456789abcdef0)',
        number: 1,
        subnet: { id: 'subnet-00000001', cidr: '10.0.0.0/16' },
        vpc: { id: 'vpc-00000001', 'primary-cidr': '10.0.0.0/16', cidrs: ['100.64.0.0/16'] },
        addresses: ['10.0.17.11', '10.0.17.12'],
        'security-groups': ['sg-00000001'],
      },
    });
    expect(Object.hasOwn(desiredStatusEnis(record)[eth0.id] ?? {}, 'number')).toBe(false);
  });

  it.each([
    { case: 'no secondary CIDRs: cidrs omitted', secondaryCidrs: [], expected: undefined },
    { case: 'empty items dropped', secondaryCidrs: ['', '100.64.0.0/16', ' '], expected: ['100.64.0.0/16'] },
    {
      case: 'the primary is never repeated',
      secondaryCidrs: ['10.0.0.0/16', '100.64.0.0/16'],
      expected: ['100.64.0.0/16'],
    },
  ])('vpc.cidrs: $case', ({ secondaryCidrs, expected }) => {
    const record = nodeRecordFixture({
      enis: [eth1],
      vpc: { id: 'vpc-00000001', primaryCidr: '10.0.0.0/16', secondaryCidrs },
    });
    expect(desiredStatusEnis(record)[eth1.id]?.vpc).toEqual({
      id: 'vpc-00000001',
      'primary-cidr': '10.0.0.0/16',
      ...(expected ? { cidrs: expected } : {}),
    });
  });

  it('expands every /28 prefix into its 16 addresses, merged and sorted with the secondary IPs', () => {
    const eni = eniFixture(1, 1, { prefixes: ['10.0.17.32/28', '10.0.17.16/28'] });
    const rendered = desiredStatusEnis(nodeRecordFixture({ enis: [eni] }))[eni.id];
    expect(rendered?.prefixes).toEqual(['10.0.17.16/28', '10.0.17.32/28']);
    expect(rendered?.addresses).toHaveLength(33);
    expect(rendered?.addresses?.slice(0, 3)).toEqual(['10.0.17.11', '10.0.17.16', '10.0.17.17']);
    expect(rendered?.addresses?.at(-1)).toBe('10.0.17.47');
  });

  it('includes the primary IP in addresses only with use-primary-address', () => {
    expect(eniAddresses(eth1, false)).toEqual(['10.0.17.11', '10.0.17.12']);
    expect(eniAddresses(eth1, true)).toEqual(['10.0.17.10', '10.0.17.11', '10.0.17.12']);
  });

  it('publishes excluded ENIs (below first-interface-index, or tag-excluded) in status', () => {
    const tagged = eniFixture(2, 2, { tags: { 'no-cilium': 'true', team: 'x' } });
    const record = nodeRecordFixture({
      enis: [eth0, eth1, tagged],
      knobs: { ...defaultKnobs, firstInterfaceIndex: 2, excludeInterfaceTags: { 'no-cilium': 'true' } },
    });
    expect(Object.keys(desiredStatusEnis(record))).toEqual([eth0.id, eth1.id, tagged.id]);
    expect(desiredStatusEnis(record)[tagged.id]?.tags).toEqual({ 'no-cilium': 'true', team: 'x' });
  });
});

describe('desiredPool', () => {
  it.each([
    {
      case: 'all addresses of non-excluded ENIs, resource = ENI id; eth0 (no secondaries) adds none',
      record: nodeRecordFixture({ enis: [eth0, eth1] }),
      expected: { '10.0.17.11': { resource: eth1.id }, '10.0.17.12': { resource: eth1.id } },
    },
    {
      case: 'ENIs below first-interface-index stay out',
      record: nodeRecordFixture({
        enis: [eniFixture(0, 1), eth1],
        knobs: { ...defaultKnobs, firstInterfaceIndex: 1 },
      }),
      expected: { '10.0.17.11': { resource: eth1.id }, '10.0.17.12': { resource: eth1.id } },
    },
    {
      case: 'ENIs matching ALL exclude-interface-tags stay out, a partial match stays in',
      record: nodeRecordFixture({
        enis: [eniFixture(1, 1, { tags: { a: '1', b: '2' } }), eniFixture(2, 1, { tags: { a: '1' } })],
        knobs: { ...defaultKnobs, excludeInterfaceTags: { a: '1', b: '2' } },
      }),
      expected: { '10.0.18.11': { resource: eniFixture(2, 0).id } },
    },
    {
      case: 'ready-for-release and released IPs leave; marked-for-release and unmarked-state stay',
      record: nodeRecordFixture({
        enis: [eniFixture(1, 4)],
        excessMarks: {
          '10.0.17.11': { sinceEpochMs: 1, state: 'ready-for-release' },
          '10.0.17.12': { sinceEpochMs: 1, state: 'released' },
          '10.0.17.13': { sinceEpochMs: 1, state: 'marked-for-release' },
          '10.0.17.14': { sinceEpochMs: 1 },
        },
      }),
      expected: { '10.0.17.13': { resource: eth1.id }, '10.0.17.14': { resource: eth1.id } },
    },
    {
      case: 'the primary joins the pool with use-primary-address',
      record: nodeRecordFixture({
        enis: [eniFixture(1, 1)],
        knobs: { ...defaultKnobs, usePrimaryAddress: true },
      }),
      expected: { '10.0.17.10': { resource: eth1.id }, '10.0.17.11': { resource: eth1.id } },
    },
  ])('$case', ({ record, expected }) => {
    expect(desiredPool(record)).toEqual(expected);
  });

  it('keeps the in-use addresses of an ENI excluded after they were handed out (invariant 5), no others', () => {
    const record = nodeRecordFixture({
      enis: [eniFixture(0, 2), eth1],
      knobs: { ...defaultKnobs, firstInterfaceIndex: 1 },
    });
    const eth0 = eniFixture(0, 0);
    expect(desiredPool(record, ['10.0.16.11', '10.0.17.12', '10.0.99.1'])).toEqual({
      '10.0.16.11': { resource: eth0.id },
      '10.0.17.11': { resource: eth1.id },
      '10.0.17.12': { resource: eth1.id },
    });
  });

  it('puts every prefix address in the pool', () => {
    const eni = eniFixture(1, 0, { prefixes: ['10.0.17.16/28'] });
    const pool = desiredPool(nodeRecordFixture({ enis: [eni] }));
    expect(Object.keys(pool)).toHaveLength(16);
    expect(pool['10.0.17.31']).toEqual({ resource: eni.id });
  });
});

describe('a fully rendered CiliumNode', () => {
  const records: { case: string; record: NodeRecord }[] = [
    { case: 'plain secondary IPs', record: nodeRecordFixture() },
    {
      case: 'prefixes, excluded ENI, tags, error, handshake',
      record: nodeRecordFixture({
        enis: [eth0, eniFixture(1, 0, { prefixes: ['10.0.17.16/28'], tags: { k: 'v' } }), eniFixture(2, 3)],
        knobs: { ...defaultKnobs, firstInterfaceIndex: 1 },
        lastError: { code: 'NoSubnetWithFreeAddresses', message: 'no subnet', atEpochMs: 1 },
      }),
    },
  ];

  const rendered = (record: NodeRecord): CiliumNode => ({
    apiVersion: 'cilium.io/v2',
    kind: 'CiliumNode',
    metadata: { name: record.nodeName },
    spec: { 'instance-id': record.instanceId, ipam: { pool: desiredPool(record) } },
    status: {
      eni: { enis: desiredStatusEnis(record) },
      ipam: { 'operator-status': { error: desiredOperatorError(record) ?? '' } },
    },
  });

  it.each(records)('validates against every CRD generation and covers its pool: $case', ({ record }) => {
    const cn = rendered(record);
    expect(crdProblems(cn)).toEqual([]);
    expect(checkStatusCoversSpec(cn)).toEqual([]);
  });

  it('with a /80: validates against every generation; only the CRDs before cilium 1.20.0 lack ipv6-prefixes', () => {
    const record = nodeRecordFixture({
      enis: [eth0, eniFixture(1, 2, { ipv6Prefixes: ['2600:1f18:4a01:ab03:1::/80'] })],
    });
    const cn = rendered(record);
    expect(cn.status?.eni?.enis?.[eniFixture(1, 0).id]?.['ipv6-prefixes']).toEqual([
      '2600:1f18:4a01:ab03:1::/80',
    ]);
    // A /80 exists only for a 1.20+ agent, whose cluster runs the 1.20.0+ CRD (v1.21-dev here);
    // the older generations would prune the field, and they are the only problem.
    const pruned = `unknown field status.eni.enis.${eniFixture(1, 0).id}.ipv6-prefixes`;
    expect(crdProblems(cn)).toEqual([`v1.12: ${pruned}`, `v1.19-dev: ${pruned}`, `v1.20: ${pruned}`]);
    expect(checkStatusCoversSpec(cn)).toEqual([]);
  });
});

describe('desiredOperatorError', () => {
  it('is the code and message of the last error, or nothing', () => {
    expect(desiredOperatorError(nodeRecordFixture())).toBeUndefined();
    expect(
      desiredOperatorError(
        nodeRecordFixture({
          lastError: { code: 'InsufficientFreeAddressesInSubnet', message: 'full', atEpochMs: 5 },
        }),
      ),
    ).toBe('InsufficientFreeAddressesInSubnet: full');
  });
});

describe('unpublishableRecordProblems', () => {
  it.each([
    { case: 'complete record', overrides: {}, count: 0 },
    { case: 'no node name', overrides: { nodeName: '' }, count: 1 },
    {
      case: 'no VPC primary CIDR',
      overrides: { vpc: { id: 'vpc-1', primaryCidr: '', secondaryCidrs: [] } },
      count: 1,
    },
  ])('$case', ({ overrides, count }) => {
    expect(unpublishableRecordProblems(nodeRecordFixture(overrides))).toHaveLength(count);
  });
});
