import { describe, expect, it } from 'vitest';
import {
  agentDemandOf,
  agentProtocolOf,
  allocatedCidrs,
  poolRequest,
} from '../../../functions/core/agent-protocol.ts';
import type { CiliumNode } from '../../../functions/core/ciliumnode.ts';

function node(ipam: Record<string, unknown> = {}, used?: Record<string, unknown>): CiliumNode {
  return {
    metadata: { name: 'n1' },
    spec: { ipam },
    ...(used ? { status: { ipam: { used } } } : {}),
  } as CiliumNode;
}

describe('poolRequest (cilium TestPoolRequestedIPv4, operator/pkg/ipam/nodemanager/node_test.go)', () => {
  it.each([
    {
      case: 'default ipv4 24',
      requested: [{ pool: 'default', needed: { 'ipv4-addrs': 24 } }],
      expected: { found: true, ipv4Addresses: 24, ipv6Addresses: 0 },
    },
    {
      case: 'default ipv6 48',
      requested: [{ pool: 'default', needed: { 'ipv6-addrs': 48 } }],
      expected: { found: true, ipv4Addresses: 0, ipv6Addresses: 48 },
    },
    {
      case: 'default both',
      requested: [{ pool: 'default', needed: { 'ipv4-addrs': 24, 'ipv6-addrs': 48 } }],
      expected: { found: true, ipv4Addresses: 24, ipv6Addresses: 48 },
    },
    { case: 'none', requested: undefined, expected: { found: false, ipv4Addresses: 0, ipv6Addresses: 0 } },
    {
      case: 'other pool only',
      requested: [{ pool: 'other-pool', needed: { 'ipv4-addrs': 10 } }],
      expected: { found: false, ipv4Addresses: 0, ipv6Addresses: 0 },
    },
    {
      case: 'default with zero demand',
      requested: [{ pool: 'default', needed: { 'ipv4-addrs': 0, 'ipv6-addrs': 0 } }],
      expected: { found: true, ipv4Addresses: 0, ipv6Addresses: 0 },
    },
    {
      case: 'malformed needed',
      requested: [{ pool: 'default', needed: { 'ipv4-addrs': '24' } }],
      expected: { found: true, ipv4Addresses: 0, ipv6Addresses: 0 },
    },
  ])('$case', ({ requested, expected }) => {
    expect(poolRequest(node(requested ? { pools: { requested } } : {}))).toEqual(expected);
  });
});

describe('agentProtocolOf and agentDemandOf (cilium isMultiPoolNodeLocked, recalculate)', () => {
  const requested = (v4: number) => ({ requested: [{ pool: 'default', needed: { 'ipv4-addrs': v4 } }] });
  it.each([
    { case: 'no CiliumNode', cn: undefined, protocol: 'crd', used: 0 },
    {
      case: '1.19: used reported, no requested',
      cn: node({}, { '10.0.0.5': {}, '10.0.0.6': {} }),
      protocol: 'crd',
      used: 2,
    },
    {
      case: '1.20 mid-upgrade: requested written, used not yet cleared',
      cn: node({ pools: requested(18) }, { '10.0.0.5': {} }),
      protocol: 'crd',
      used: 1,
    },
    {
      case: '1.20: requested 18, pre-allocate unset (8)',
      cn: node({ pools: requested(18) }),
      protocol: 'multi-pool',
      used: 10,
    },
    {
      case: '1.20: requested 24, pre-allocate 4',
      cn: node({ 'pre-allocate': 4, pools: requested(24) }),
      protocol: 'multi-pool',
      used: 20,
    },
    {
      case: '1.20: requested below pre-allocate',
      cn: node({ 'pre-allocate': 16, pools: requested(8) }),
      protocol: 'multi-pool',
      used: 0,
    },
    {
      case: '1.20 IPv6-only agent: no ipv4 demand',
      cn: node({ pools: { requested: [{ pool: 'default', needed: { 'ipv6-addrs': 9 } }] } }),
      protocol: 'multi-pool',
      used: 0,
    },
  ])('$case', ({ cn, protocol, used }) => {
    expect(agentProtocolOf(cn)).toBe(protocol);
    expect(agentDemandOf(cn)).toMatchObject({ protocol, usedIpCount: used });
  });

  it('asks for IPv6 only on a multi-pool node requesting ipv6-addrs', () => {
    const dual = node({
      pools: { requested: [{ pool: 'default', needed: { 'ipv4-addrs': 8, 'ipv6-addrs': 8 } }] },
    });
    expect(agentDemandOf(dual).wantsIpv6).toBe(true);
    expect(
      agentDemandOf(node({ pools: { requested: [{ pool: 'default', needed: { 'ipv4-addrs': 8 } }] } }))
        .wantsIpv6,
    ).toBe(false);
  });
});

describe('allocatedCidrs', () => {
  it('collects every pool and family, /32 implied for bare IPv4 addresses', () => {
    const cn = node({
      pools: {
        allocated: [
          { pool: 'default', cidrs: ['10.0.2.16/28', '10.0.1.20/32', '2001:db8::/80'] },
          { pool: 'other', cidrs: ['10.0.9.9'] },
        ],
      },
    });
    expect([...allocatedCidrs(cn)].sort()).toEqual([
      '10.0.1.20/32',
      '10.0.2.16/28',
      '10.0.9.9/32',
      '2001:db8::/80',
    ]);
  });
});
