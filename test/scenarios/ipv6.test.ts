import { afterEach, describe, expect, it } from 'vitest';
import { ipv6CidrContains } from '../../functions/core/ipv6-math.ts';
import { allocationMetrics } from '../../functions/runtime/metrics.ts';
import { allocateNode } from '../../functions/services/allocate-node.ts';
import { sweep } from '../../functions/services/sweep.ts';
import { syncNode } from '../../functions/services/sync-node.ts';
import type { InstanceRecord } from '../emulators/ec2/index.ts';
import { CRD_OF_MULTI_POOL_CLUSTERS } from '../emulators/k8s/index.ts';
import { type AllocationHarness, startAllocationHarness } from '../support/allocation-harness.ts';
import { CrdAgentDriver, observeAsAgent } from '../support/cilium-agent-model.ts';
import { ipv6PrefixesOf } from '../support/cilium-multipool-agent-model.ts';
import {
  expectMultiPoolInvariants,
  type MultiPoolAgent,
  startMultiPoolAgent,
  syncDependencies,
} from '../support/multi-pool-scenario.ts';

/**
 * An IPv6 node: a cilium 1.20 agent with IPv6 on (the 1.20 "ENI IPAM mode with IPv6";
 * functions/README.md, *Agent protocols*) asks for `ipv6-addrs` in `spec.ipam.pools.requested`; the
 * allocator assigns exactly one /80 on an ENI in a dual-stack subnet, publishes it in
 * `status.eni.enis[*].ipv6-prefixes` once EC2 confirmed it, and never releases it. The cluster
 * runs the CiliumNode CRD of its 1.20 agents (`CRD_OF_MULTI_POOL_CLUSTERS`, which declares
 * `ipv6-prefixes`); every version the Kubernetes emulator stores validated against all four CRDs.
 */

const RELEASE_DELAY_MS = 180_000;

let harness: AllocationHarness | undefined;

afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

async function start(options: { dualStack: boolean }): Promise<AllocationHarness> {
  harness = await startAllocationHarness({ ...options, crdSchemas: CRD_OF_MULTI_POOL_CLUSTERS });
  return harness;
}

/** One minute: the agent's pass, the sweep (release on), the sync, the agent's watch event. */
async function sweepCycle(h: AllocationHarness, instance: InstanceRecord, agent: MultiPoolAgent) {
  h.clock.advance(60_000);
  await agent.driver.tick(h.clock.now());
  const summary = await sweep({
    ...h.sweepDependencies(),
    release: { enabled: true, delayMs: RELEASE_DELAY_MS },
  });
  expect(summary.failed).toEqual([]);
  await syncNode(instance.instanceId, syncDependencies(h));
  await agent.driver.observe();
}

/** The /80s EC2 holds on the instance's ENIs, with the ENI that holds each. */
function ec2Prefixes(h: AllocationHarness, instance: InstanceRecord): { eniId: string; prefix: string }[] {
  return h.ec2.state
    .networkInterfaces({ instanceId: instance.instanceId })
    .flatMap((eni) => eni.ipv6Prefixes.map((prefix) => ({ eniId: eni.networkInterfaceId, prefix })));
}

async function publishedPrefixes(h: AllocationHarness, instance: InstanceRecord) {
  const node = await h.ciliumNodes.get(instance.privateDnsName);
  return Object.values(node?.status?.eni?.enis ?? {}).flatMap((eni) =>
    ipv6PrefixesOf(eni).map((prefix) => ({ eniId: eni.id, prefix })),
  );
}

/** Pods start with an address of each family; failed ones retry on the next cycles. */
async function runDualStackPods(
  h: AllocationHarness,
  instance: InstanceRecord,
  agent: MultiPoolAgent,
  pods: readonly string[],
  maxCycles: number,
): Promise<void> {
  const waiting = pods.flatMap((pod) => [`ipv4 ${pod}`, `ipv6 ${pod}`]);
  for (let cycles = 0; waiting.length > 0 && cycles < maxCycles; cycles++) {
    for (const entry of [...waiting]) {
      const [family, pod] = entry.split(' ') as ['ipv4' | 'ipv6', string];
      if ('ip' in agent.model.allocate(pod, family, h.clock.now())) waiting.splice(waiting.indexOf(entry), 1);
    }
    await sweepCycle(h, instance, agent);
  }
  expect(waiting, 'pod addresses not handed out').toEqual([]);
}

/** Every address the agent handed out is on EC2: IPv4 as a secondary IP, IPv6 inside the node's /80. */
function expectInUseOnEc2(h: AllocationHarness, instance: InstanceRecord, agent: MultiPoolAgent): void {
  const enis = h.ec2.state.networkInterfaces({ instanceId: instance.instanceId });
  const ipv4 = new Set(enis.flatMap((eni) => eni.secondaryPrivateIpAddresses));
  const prefixes = enis.flatMap((eni) => eni.ipv6Prefixes);
  for (const ip of agent.model.inUseIps()) {
    const onEc2 = ip.includes(':') ? prefixes.some((prefix) => ipv6CidrContains(prefix, ip)) : ipv4.has(ip);
    expect(onEc2, `${ip} assigned in EC2`).toBe(true);
  }
}

describe('an IPv6 node (a 1.20 agent with IPv6 on a dual-stack subnet)', () => {
  it('comes up with exactly one /80, its pods get IPv4 and IPv6, more demand never adds a /80 and release never takes it', async () => {
    const h = await start({ dualStack: true });
    const instance = h.launch('m5.xlarge');
    await h.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    const agent = startMultiPoolAgent(h, instance, { ipv6: true });
    await agent.driver.tick(h.clock.now());
    expect(agent.model.startup(h.clock.now())).toBe('waiting-for-pool');
    expect((await h.ciliumNodes.get(instance.privateDnsName))?.spec?.ipam?.pools).toMatchObject({
      requested: [{ pool: 'default', needed: { 'ipv4-addrs': 8, 'ipv6-addrs': 8 } }],
    });

    // One invocation: the new ENI is created with its IPv4 addresses and the /80 in one call.
    const outcome = await allocateNode(instance.instanceId, h.dependencies());
    expect(outcome).toMatchObject({ kind: 'reconciled', agentProtocol: 'multi-pool' });
    expect(outcome.kind === 'reconciled' ? outcome.blocked : 'not reconciled').toBeUndefined();
    await syncNode(instance.instanceId, syncDependencies(h));
    await sweepCycle(h, instance, agent);
    expect(agent.model.startup(h.clock.now())).toBe('ready');

    const [onEc2, ...moreOnEc2] = ec2Prefixes(h, instance);
    expect(moreOnEc2, 'exactly one /80 on EC2').toEqual([]);
    expect(onEc2?.prefix).toMatch(/^2600:1f18:4a01:ab01:[0-9a-f]+::\/80$/);
    expect(await publishedPrefixes(h, instance)).toEqual([onEc2]);
    expect(h.ec2.calls.count('AssignIpv6Addresses')).toBe(0);
    // The record carries the /80 (the layout that holds it is stamped on the item).
    const record = await h.table.store.get(instance.instanceId);
    expect(record?.enis.flatMap((eni) => eni.ipv6Prefixes ?? [])).toEqual([onEc2?.prefix]);

    const pods = Array.from({ length: 12 }, (_, index) => `pod-${index + 1}`);
    await runDualStackPods(h, instance, agent, pods.slice(0, 6), 4);
    // A second rise of demand (more pods, `ipv6-addrs` up): more IPv4, never a second /80.
    await runDualStackPods(h, instance, agent, pods.slice(6), 6);
    expect(agent.model.inUseIps()).toHaveLength(24);
    expectInUseOnEc2(h, instance, agent);
    expect(ec2Prefixes(h, instance)).toEqual([onEc2]);
    const node = await h.ciliumNodes.get(instance.privateDnsName);
    expect(node?.spec?.ipam?.pools).toMatchObject({
      requested: [{ pool: 'default', needed: { 'ipv4-addrs': 20, 'ipv6-addrs': 20 } }],
    });

    // Demand falls: the sweep releases IPv4 the agent dropped from `allocated`, never the /80.
    for (const pod of pods.slice(2)) agent.model.release(pod);
    for (let round = 0; round < 8; round++) await sweepCycle(h, instance, agent);
    expect(h.ec2.calls.count('UnassignPrivateIpAddresses')).toBeGreaterThan(0);
    expect(h.ec2.calls.count('UnassignIpv6Addresses')).toBe(0);
    expect(ec2Prefixes(h, instance)).toEqual([onEc2]);
    expect(await publishedPrefixes(h, instance)).toEqual([onEc2]);
    expect(h.ec2.calls.count('AssignIpv6Addresses')).toBe(0);
    expectInUseOnEc2(h, instance, agent);
    expect(agent.model.problems).toEqual([]);
    await expectMultiPoolInvariants(h, instance, agent.writtenVersions);
  });

  it('an agent that turns IPv6 on later, IPv4 satisfied: the /80 alone on the ENI it already has', async () => {
    const h = await start({ dualStack: true });
    const instance = h.launch('m5.large');
    await h.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    const ipv4Agent = startMultiPoolAgent(h, instance);
    await sweepCycle(h, instance, ipv4Agent);
    await sweepCycle(h, instance, ipv4Agent);
    expect(ipv4Agent.model.startup(h.clock.now())).toBe('ready');
    expect(ec2Prefixes(h, instance)).toEqual([]);

    // The agent restarts with IPv6 enabled.
    const agent = startMultiPoolAgent(h, instance, { ipv6: true });
    await sweepCycle(h, instance, agent);
    await sweepCycle(h, instance, agent);
    expect(agent.model.startup(h.clock.now())).toBe('ready');
    const [secondary] = h.secondaryEnis(instance.instanceId);
    expect(h.secondaryEnis(instance.instanceId)).toHaveLength(1);
    expect(ec2Prefixes(h, instance)).toEqual([
      { eniId: secondary?.networkInterfaceId, prefix: expect.stringMatching(/\/80$/) },
    ]);
    expect(h.ec2.calls.count('AssignIpv6Addresses')).toBe(1);
    expect('ip' in agent.model.allocate('pod-a', 'ipv6', h.clock.now())).toBe(true);
    expect(agent.model.problems).toEqual([]);
    await expectMultiPoolInvariants(
      h,
      instance,
      new Set([...ipv4Agent.writtenVersions, ...agent.writtenVersions]),
    );
  });
});

describe('a node that cannot have IPv6, or does not ask for it', () => {
  it('on an IPv4-only subnet: IPv4 is served, no /80, and the CiliumNode and the metrics say why', async () => {
    const h = await start({ dualStack: false });
    const instance = h.launch('m5.large');
    await h.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    const agent = startMultiPoolAgent(h, instance, { ipv6: true });
    await agent.driver.tick(h.clock.now());
    const outcome = await allocateNode(instance.instanceId, h.dependencies());
    await syncNode(instance.instanceId, syncDependencies(h));
    await agent.driver.observe();

    expect(outcome).toMatchObject({ kind: 'reconciled', blocked: { code: 'NoDualStackSubnet' } });
    expect(outcome.kind === 'reconciled' && outcome.results.some((result) => result.kind === 'created')).toBe(
      true,
    );
    expect(allocationMetrics(outcome)).toContainEqual({
      name: 'ipam_allocation_blocked',
      value: 1,
      unit: 'Count',
    });
    const node = await h.ciliumNodes.get(instance.privateDnsName);
    expect(node?.status?.ipam?.['operator-status']?.error).toMatch(
      /^NoDualStackSubnet: the agent of instance i-\w+ asks for IPv6, .*IPv4 is still served$/,
    );
    // IPv4 is there for its pods; the agent itself waits for an IPv6 pool, as cilium 1.20 does.
    expect(agent.model.allocate('pod-a', 'ipv4', h.clock.now())).toHaveProperty('ip');
    expect(agent.model.startup(h.clock.now())).toBe('waiting-for-pool');
    expect(ec2Prefixes(h, instance)).toEqual([]);
    expect(await publishedPrefixes(h, instance)).toEqual([]);
    expect(h.ec2.calls.count('AssignIpv6Addresses')).toBe(0);
    // The sweep keeps looking (the subnet may gain an IPv6 block), still without any IPv6 call.
    await sweepCycle(h, instance, agent);
    expect(h.ec2.calls.count('AssignIpv6Addresses')).toBe(0);
    expect(
      (await h.ciliumNodes.get(instance.privateDnsName))?.status?.ipam?.['operator-status']?.error,
    ).toMatch(/^NoDualStackSubnet/);
    expect(agent.model.problems).toEqual([]);
    await expectMultiPoolInvariants(h, instance, agent.writtenVersions);
  });

  it('a 1.19 node and an IPv4-only 1.20 node on dual-stack subnets are served exactly as before: no /80', async () => {
    const h = await start({ dualStack: true });
    const old = h.launch('m5.large');
    const current = h.launch('m5.large');
    for (const instance of [old, current]) {
      await h.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    }
    const crdAgent = new CrdAgentDriver(h.ciliumNodes, old.privateDnsName);
    const agent = startMultiPoolAgent(h, current);
    await agent.driver.tick(h.clock.now());
    for (let round = 0; round < 3; round++) {
      h.clock.advance(60_000);
      const summary = await sweep(h.sweepDependencies());
      expect(summary.failed).toEqual([]);
      for (const instance of [old, current]) await syncNode(instance.instanceId, syncDependencies(h));
      await agent.driver.tick(h.clock.now());
      await crdAgent.refresh();
    }
    expect(await crdAgent.allocate('pod-a')).toBeDefined();
    expect(agent.model.startup(h.clock.now())).toBe('ready');
    expect(h.ec2.calls.count('AssignIpv6Addresses')).toBe(0);
    for (const instance of [old, current]) {
      expect(ec2Prefixes(h, instance)).toEqual([]);
      expect(await publishedPrefixes(h, instance)).toEqual([]);
      const record = await h.table.store.get(instance.instanceId);
      expect(record?.enis.every((eni) => eni.ipv6Prefixes === undefined)).toBe(true);
      expect(record?.lastError).toBeUndefined();
    }
    const oldNode = await h.ciliumNodes.get(old.privateDnsName);
    expect(oldNode && observeAsAgent(oldNode).accepted).toBe(true);
    expect(agent.model.problems).toEqual([]);
    await expectMultiPoolInvariants(h, current, agent.writtenVersions);
  });
});
