import { describe, expect, it } from 'vitest';
import type { CiliumEni, CiliumNode } from '../../../functions/core/ciliumnode.ts';
import { derivedCidrs, MultiPoolAgentModel } from '../../support/cilium-multipool-agent-model.ts';

/**
 * The 1.20 agent model with IPv6 on (test/support/cilium-multipool-agent-model.ts): what
 * the scenarios rely on when they say "its pods get IPv6". The /80 below is written the way RFC
 * 5952 compresses it (`2600::1234:0:0:0`), so addresses are computed, not pasted onto the text.
 */

const PREFIX = '2600::1234:0:0:0/80';

function eni(id: string, number: number, extra: Partial<CiliumEni> = {}): CiliumEni {
  return {
    id,
    ip: `10.0.${number}.4`,
    mac: `02:00:00:00:00:0${number}`,
    ...(number === 0 ? {} : { number }),
    subnet: { id: 'subnet-1', cidr: '10.0.0.0/16' },
    vpc: { id: 'vpc-1', 'primary-cidr': '10.0.0.0/16' },
    ...extra,
  };
}

function node(enis: CiliumEni[], spec: CiliumNode['spec'] = {}): CiliumNode {
  return {
    metadata: { name: 'node-a', resourceVersion: '1' },
    spec,
    status: { eni: { enis: Object.fromEntries(enis.map((entry) => [entry.id as string, entry])) } },
  };
}

const ipv4Only = eni('eni-1', 1, { addresses: ['10.0.1.10', '10.0.1.11'] });
const dualStack = eni('eni-1', 1, { addresses: ['10.0.1.10', '10.0.1.11'], 'ipv6-prefixes': [PREFIX] });

describe('the multi-pool agent model with IPv6', () => {
  it('waits at startup for an allocatable IPv6 address as well as an IPv4 one', () => {
    const agent = new MultiPoolAgentModel({ ipv6: true });
    agent.observe(node([eni('eni-0', 0), ipv4Only]));
    expect(agent.startup(0)).toBe('waiting-for-pool');
    agent.observe(node([eni('eni-0', 0), dualStack]));
    expect(agent.startup(0)).toBe('waiting-for-first-write');
    agent.wrote(0);
    expect(agent.startup(0)).toBe('ready');

    const ipv4Agent = new MultiPoolAgentModel();
    ipv4Agent.observe(node([eni('eni-0', 0), ipv4Only]));
    ipv4Agent.wrote(0);
    expect(ipv4Agent.startup(0)).toBe('ready');
  });

  it('derives the /80 from ipv6-prefixes of ENIs it does not exclude, after the IPv4 CIDRs', () => {
    const excludedTooLow = eni('eni-0', 0, { 'ipv6-prefixes': ['2600::9999:0:0:0/80'] });
    expect(derivedCidrs(node([excludedTooLow, dualStack], { eni: { 'first-interface-index': 1 } }))).toEqual([
      PREFIX,
      '10.0.1.10/32',
      '10.0.1.11/32',
    ]);
    const agent = new MultiPoolAgentModel({ ipv6: true });
    const cn = node([eni('eni-0', 0), dualStack]);
    agent.observe(cn);
    const pools = agent.plannedPools(cn, 0) as { allocated: { cidrs: string[] }[] };
    expect(pools.allocated[0]?.cidrs).toEqual(['10.0.1.10/32', '10.0.1.11/32', PREFIX]);
  });

  it('gives a pod one address of each family, IPv6 ones from the /80 in canonical text, and frees both on release', () => {
    const agent = new MultiPoolAgentModel({ ipv6: true });
    agent.observe(node([eni('eni-0', 0), dualStack]));
    expect(agent.allocate('pod-a', 'ipv4', 0)).toEqual({ ip: '10.0.1.10' });
    expect(agent.allocate('pod-a', 'ipv6', 0)).toEqual({ ip: '2600::1234:0:0:0' });
    expect(agent.allocate('pod-b', 'ipv6', 0)).toEqual({ ip: '2600::1234:0:0:1' });
    expect([agent.ipOf('pod-a'), agent.ipOf('pod-a', 'ipv6')]).toEqual(['10.0.1.10', '2600::1234:0:0:0']);
    agent.release('pod-a');
    expect(agent.inUseIps()).toEqual(['2600::1234:0:0:1']);
    expect(agent.allocate('pod-c', 'ipv6', 0)).toEqual({ ip: '2600::1234:0:0:0' });
    expect(agent.problems).toEqual([]);
  });

  it('asks for ipv6-addrs = in use + pending + pre-allocation, IPv4 on its own count', () => {
    const agent = new MultiPoolAgentModel({ ipv6: true });
    const waiting = node([eni('eni-0', 0), ipv4Only]);
    agent.observe(waiting);
    agent.allocate('pod-a', 'ipv4', 0);
    // No IPv6 pool yet: the pod's IPv6 allocation fails and counts as pending.
    expect(agent.allocate('pod-a', 'ipv6', 0)).toEqual({
      error: 'unable to allocate from pool "default" (family ipv6): pool not (yet) available',
    });
    expect((agent.plannedPools(waiting, 1) as { requested: unknown }).requested).toEqual([
      { pool: 'default', needed: { 'ipv4-addrs': 9, 'ipv6-addrs': 9 } },
    ]);
    const served = node([eni('eni-0', 0), dualStack]);
    agent.observe(served);
    expect(agent.allocate('pod-a', 'ipv6', 2)).toEqual({ ip: '2600::1234:0:0:0' });
    expect((agent.plannedPools(served, 3) as { requested: unknown }).requested).toEqual([
      { pool: 'default', needed: { 'ipv4-addrs': 9, 'ipv6-addrs': 9 } },
    ]);
  });

  it('restores an IPv6 endpoint inside the /80, and reports one outside every CIDR', () => {
    const agent = new MultiPoolAgentModel({ ipv6: true });
    agent.observe(node([eni('eni-0', 0), dualStack]));
    agent.restore('pod-a', '2600::1234:0:0:7');
    expect(agent.ipOf('pod-a', 'ipv6')).toBe('2600::1234:0:0:7');
    agent.restore('pod-b', '2600::1235:0:0:7');
    expect(agent.problems).toEqual([
      'Failed to re-allocate IP of endpoint pod-b: IP 2600::1235:0:0:7 not in range of any CIDR',
    ]);
  });
});
