import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { tableGenerationOf } from '../../functions/aws/table-generation.ts';
import { agentProtocolOf } from '../../functions/core/agent-protocol.ts';
import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import { ownershipTags } from '../../functions/core/eni-ownership.ts';
import { appliedRecordVersion } from '../../functions/core/table-generation.ts';
import { allocateNode } from '../../functions/services/allocate-node.ts';
import { releaseExcess } from '../../functions/services/release-excess.ts';
import { sweep } from '../../functions/services/sweep.ts';
import { syncNode } from '../../functions/services/sync-node.ts';
import type { InstanceRecord } from '../emulators/ec2/index.ts';
import {
  type AllocationHarness,
  CLUSTER_NAME,
  startAllocationHarness,
} from '../support/allocation-harness.ts';
import { CrdAgentDriver, observeAsAgent } from '../support/cilium-agent-model.ts';
import {
  checkAllocatedNotWithdrawn,
  checkPoolRemovalsHandshaken,
  checkStatusCoversSpec,
} from '../support/invariants.ts';
import {
  expectMultiPoolInvariants,
  type MultiPoolAgent,
  startMultiPoolAgent,
  syncDependencies,
} from '../support/multi-pool-scenario.ts';

/**
 * Nodes whose agent speaks the multi-pool protocol (cilium 1.20, 1.21), end to end: the agent
 * model writes its demand to `spec.ipam.pools.requested` and its CIDRs to `allocated`, the
 * allocator (DynamoDB Local, the EC2 emulator) reads the demand from there, the sync publishes
 * `status.eni.enis`, and the agent allocates pods from what it derives from that status. One
 * `cycle` is one agent pass (its 15 s debounce), the allocation its CiliumNode change triggers,
 * the sync the record write triggers, and the agent's watch event.
 */

const AGENT_PASS_MS = 15_000;

let harness: AllocationHarness;

beforeEach(async () => {
  harness = await startAllocationHarness();
});
afterEach(async () => {
  await harness.close();
});

async function cycle(instance: InstanceRecord, agent: MultiPoolAgent): Promise<void> {
  harness.clock.advance(AGENT_PASS_MS);
  await agent.driver.tick(harness.clock.now());
  const outcome = await allocateNode(instance.instanceId, harness.dependencies());
  expect(outcome.kind).toBe('reconciled');
  await syncNode(instance.instanceId, syncDependencies(harness));
  await agent.driver.observe();
}

async function ciliumNodeOf(instance: InstanceRecord): Promise<CiliumNode> {
  const node = await harness.ciliumNodes.get(instance.privateDnsName);
  if (!node) throw new Error('no CiliumNode');
  return node;
}

/** Every in-use IP of the agent is assigned in EC2 to an ENI of the instance (invariant 7). */
function expectInUseIpsOnEc2(instance: InstanceRecord, agent: MultiPoolAgent): void {
  const assigned = new Set(
    harness.ec2.state
      .networkInterfaces({ instanceId: instance.instanceId })
      .flatMap((eni) => [
        ...eni.secondaryPrivateIpAddresses,
        ...eni.ipv4Prefixes.flatMap((prefix) => expandPrefix(prefix)),
      ]),
  );
  for (const ip of agent.model.inUseIps()) expect(assigned.has(ip), `${ip} assigned in EC2`).toBe(true);
}

function expandPrefix(prefix: string): string[] {
  const [address = '', length = '32'] = prefix.split('/');
  const base = address.split('.').reduce((value, octet) => value * 256 + Number(octet), 0);
  return Array.from({ length: 2 ** (32 - Number(length)) }, (_, offset) => {
    const value = base + offset;
    return [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255].join('.');
  });
}

/** Starts pods `first..last`, retrying failed ones each cycle; returns the cycles it took. */
async function runPods(
  instance: InstanceRecord,
  agent: MultiPoolAgent,
  pods: readonly string[],
  maxCycles: number,
  next: (instance: InstanceRecord, agent: MultiPoolAgent) => Promise<void> = cycle,
): Promise<{ cycles: number; failures: string[] }> {
  const waiting = [...pods];
  const failures: string[] = [];
  let cycles = 0;
  while (waiting.length > 0 && cycles < maxCycles) {
    for (const pod of [...waiting]) {
      const result = agent.model.allocate(pod, 'ipv4', harness.clock.now());
      if ('ip' in result) waiting.splice(waiting.indexOf(pod), 1);
      else failures.push(result.error);
    }
    await next(instance, agent);
    cycles++;
  }
  expect(waiting, 'pods without an IP').toEqual([]);
  return { cycles, failures };
}

describe('a 1.20 (multi-pool) node', () => {
  it('comes up: the agent finds an allocatable IP and its VPC CIDR, and the node is recorded as multi-pool', async () => {
    const instance = harness.launch('m5.xlarge');
    await harness.createCiliumNode(instance);
    const agent = startMultiPoolAgent(harness, instance);
    expect(agent.model.startup(harness.clock.now())).toBe('waiting-for-pool');
    await allocateNode(instance.instanceId, harness.dependencies());
    await syncNode(instance.instanceId, syncDependencies(harness));
    await cycle(instance, agent);

    expect(agent.model.startup(harness.clock.now())).toBe('ready');
    const node = await ciliumNodeOf(instance);
    expect(agentProtocolOf(node)).toBe('multi-pool');
    expect(node.spec?.ipam?.pools).toMatchObject({
      requested: [{ pool: 'default', needed: { 'ipv4-addrs': 8 } }],
    });
    const record = await harness.table.store.get(instance.instanceId);
    expect(record?.agentProtocol).toBe('multi-pool');
    expect(harness.logs).toContainEqual(
      expect.objectContaining({
        message: 'agent IPAM protocol changed',
        fields: expect.objectContaining({ from: 'crd', to: 'multi-pool' }),
      }),
    );
    // The dual-written pool still names every published IP (a downgraded 1.19 agent needs it).
    expect(Object.keys(node.spec?.ipam?.pool ?? {})).toHaveLength(8);
    expect(agent.model.problems).toEqual([]);
    await expectMultiPoolInvariants(harness, instance, agent.writtenVersions);
  });

  it('grows with its requested demand to 20 pods on an m5.xlarge with pre-allocate 4, every pod gets an IP', async () => {
    const instance = harness.launch('m5.xlarge');
    await harness.createCiliumNode(instance, { ipam: { 'pre-allocate': 4 } });
    const agent = startMultiPoolAgent(harness, instance);
    await allocateNode(instance.instanceId, harness.dependencies());
    await syncNode(instance.instanceId, syncDependencies(harness));
    await cycle(instance, agent);
    expect(agent.model.startup(harness.clock.now())).toBe('ready');

    const pods = Array.from({ length: 20 }, (_, index) => `pod-${index + 1}`);
    // Pods arrive five at a time; the agent may run out between passes (as the real one does)
    // and retries them on the next pass, its failed owners raising `requested` meanwhile.
    for (let batch = 0; batch < 4; batch++) {
      await runPods(instance, agent, pods.slice(batch * 5, batch * 5 + 5), 4);
    }
    expect(agent.model.inUseIps()).toHaveLength(20);
    expectInUseIpsOnEc2(instance, agent);

    const node = await ciliumNodeOf(instance);
    expect(node.spec?.ipam?.pools).toMatchObject({
      requested: [{ pool: 'default', needed: { 'ipv4-addrs': 24 } }],
    });
    // used = requested - pre-allocate = 20; needed = 4 + 20 - available = 0 at steady state.
    const outcome = await allocateNode(instance.instanceId, harness.dependencies());
    expect(outcome).toMatchObject({ kind: 'reconciled', neededIps: 0, agentProtocol: 'multi-pool' });
    const available = harness.ec2.state
      .networkInterfaces({ instanceId: instance.instanceId })
      .reduce((sum, eni) => sum + eni.secondaryPrivateIpAddresses.length, 0);
    expect(available).toBeGreaterThanOrEqual(24);
    expect(agent.model.problems).toEqual([]);
    await expectMultiPoolInvariants(harness, instance, agent.writtenVersions);
  });
});

describe('a 1.19 and a 1.20 node side by side', () => {
  it('are each served their own protocol by the same sweep', async () => {
    const old = harness.launch('m5.large');
    const current = harness.launch('m5.large');
    await harness.createCiliumNode(old);
    await harness.createCiliumNode(current);
    const agent = startMultiPoolAgent(harness, current);
    const deps = harness.sweepDependencies();
    await sweep(deps);
    for (const instance of [old, current]) await syncNode(instance.instanceId, syncDependencies(harness));
    await agent.driver.tick(harness.clock.now());

    // The 1.19 agent reports 6 pool IPs in use in status.ipam.used.
    const oldNode = await ciliumNodeOf(old);
    const observed = observeAsAgent(oldNode);
    if (!observed.accepted) throw new Error(observed.reason);
    const used = Object.fromEntries(
      observed.allocations
        .slice(0, 6)
        .map((allocation) => [allocation.ip, { owner: `pod-${allocation.ip}`, resource: allocation.eniId }]),
    );
    await harness.ciliumNodes.patchStatus(old.privateDnsName, [
      { op: 'test', path: '/metadata/resourceVersion', value: oldNode.metadata.resourceVersion },
      { op: 'add', path: '/status/ipam', value: { ...(oldNode.status?.ipam ?? {}), used } },
    ]);
    for (let pod = 1; pod <= 6; pod++) agent.model.allocate(`pod-${pod}`, 'ipv4', harness.clock.now());
    harness.clock.advance(AGENT_PASS_MS);
    await agent.driver.tick(harness.clock.now());

    harness.clock.advance(60_000);
    const summary = await sweep(deps);
    expect(summary.agentProtocols).toEqual({ crd: 1, 'multi-pool': 1 });
    expect(summary.reconciled['needs-ips']).toBe(2);
    for (const instance of [old, current]) await syncNode(instance.instanceId, syncDependencies(harness));
    await agent.driver.observe();

    for (const instance of [old, current]) {
      const record = await harness.table.store.get(instance.instanceId);
      expect(record?.agentProtocol).toBe(instance === old ? 'crd' : 'multi-pool');
      // 6 used + pre-allocate 8 on each, whichever protocol told us about the 6.
      const ips = harness.ec2.state
        .networkInterfaces({ instanceId: instance.instanceId })
        .reduce((sum, eni) => sum + eni.secondaryPrivateIpAddresses.length, 0);
      expect(ips, instance === old ? '1.19 node' : '1.20 node').toBe(14);
    }
    expect(observeAsAgent(await ciliumNodeOf(old)).accepted).toBe(true);
    expect(agent.model.problems).toEqual([]);
    expectInUseIpsOnEc2(current, agent);
    await expectMultiPoolInvariants(harness, current, agent.writtenVersions);
  });
});

describe('release after demand falls (excess release on)', () => {
  const RELEASE_DELAY_MS = 180_000;

  async function sweepCycle(instance: InstanceRecord, agent: MultiPoolAgent): Promise<void> {
    harness.clock.advance(60_000);
    await agent.driver.tick(harness.clock.now());
    const summary = await sweep({
      ...harness.sweepDependencies(),
      release: { enabled: true, delayMs: RELEASE_DELAY_MS },
    });
    expect(summary.failed).toEqual([]);
    await syncNode(instance.instanceId, syncDependencies(harness));
    await agent.driver.observe();
    expectInUseIpsOnEc2(instance, agent);
  }

  function ec2AssignedIps(instance: InstanceRecord): string[] {
    return harness.ec2.state
      .networkInterfaces({ instanceId: instance.instanceId })
      .flatMap((eni) => [eni.privateIpAddress, ...eni.secondaryPrivateIpAddresses]);
  }

  function ec2SecondaryIps(instance: InstanceRecord): number {
    return harness.ec2.state
      .networkInterfaces({ instanceId: instance.instanceId })
      .reduce((sum, eni) => sum + eni.secondaryPrivateIpAddresses.length, 0);
  }

  /** An m5.xlarge with pre-allocate 4 whose 1.20 agent runs 20 pods, started five at a time. */
  async function nodeWithTwentyPods() {
    const instance = harness.launch('m5.xlarge');
    await harness.createCiliumNode(instance, { ipam: { 'pre-allocate': 4 } });
    const agent = startMultiPoolAgent(harness, instance);
    await sweepCycle(instance, agent);
    const pods = Array.from({ length: 20 }, (_, index) => `pod-${index + 1}`);
    for (let batch = 0; batch < 4; batch++) {
      await runPods(instance, agent, pods.slice(batch * 5, batch * 5 + 5), 4, sweepCycle);
    }
    await sweepCycle(instance, agent);
    return { instance, agent, pods };
  }

  it('releases what the agent dropped from allocated, after the delay, withdrawn from status first; never a CIDR in allocated', async () => {
    const { instance, agent, pods } = await nodeWithTwentyPods();
    expect(agent.model.inUseIps()).toHaveLength(20);
    expect(ec2SecondaryIps(instance)).toBe(24);

    // 15 pods go: the agent keeps pending + P = 4 free and drops the rest from `allocated`.
    for (const pod of pods.slice(5)) agent.model.release(pod);
    const unassignsBefore = harness.ec2.calls.count('UnassignPrivateIpAddresses');
    await sweepCycle(instance, agent);
    await sweepCycle(instance, agent);
    expect(harness.ec2.calls.count('UnassignPrivateIpAddresses'), 'nothing before the delay').toBe(
      unassignsBefore,
    );
    for (let round = 0; round < 5; round++) await sweepCycle(instance, agent);

    expect(ec2SecondaryIps(instance)).toBe(5 + 4);
    const node = await ciliumNodeOf(instance);
    expect(node.status?.ipam?.['release-ips'] ?? {}).toEqual({});
    const record = await harness.table.store.get(instance.instanceId);
    expect(Object.values(record?.cidrReleases ?? {}).every((entry) => entry.state === 'released')).toBe(true);
    expect(Object.keys(record?.cidrReleases ?? {})).toHaveLength(15);
    // Pods come back: the allocator assigns again, the agent allocates from what it is given.
    await runPods(instance, agent, pods.slice(5), 4, sweepCycle);
    expect(agent.model.inUseIps()).toHaveLength(20);
    expect(agent.model.problems).toEqual([]);
    await expectMultiPoolInvariants(harness, instance, agent.writtenVersions);
  });

  it('does not publish a released CIDR again while EC2 Describe still lists it (tombstones against eventual consistency)', async () => {
    const { instance, agent, pods } = await nodeWithTwentyPods();
    // From now on Describe lags every unassign by two and a half sweep periods (the tombstones
    // last five consistency windows, 300 s).
    harness.ec2.setEventualConsistencyMs(150_000);
    for (const pod of pods.slice(5)) agent.model.release(pod);
    const listedAfterUnassign = new Set<string>();
    for (let round = 0; round < 10; round++) {
      await sweepCycle(instance, agent);
      const described = await harness
        .dependencies()
        .ec2.describeAttachedEnis(
          instance.instanceId,
          harness.ec2.state.instance(instance.instanceId)?.vpcId ?? '',
        );
      const assigned = new Set(ec2AssignedIps(instance));
      for (const ip of described.flatMap((eni) => eni.secondaryIps))
        if (!assigned.has(ip)) listedAfterUnassign.add(ip);
      // Whatever Describe still lists, status lists only what EC2 assigns.
      const published = Object.values((await ciliumNodeOf(instance)).status?.eni?.enis ?? {}).flatMap(
        (eni) => eni?.addresses ?? [],
      );
      expect(published.filter((ip) => !assigned.has(ip))).toEqual([]);
    }

    expect(listedAfterUnassign.size, 'Describe listed unassigned addresses for a while').toBeGreaterThan(0);
    expect(ec2SecondaryIps(instance)).toBe(5 + 4);
    expect(agent.model.problems).toEqual([]);
    await expectMultiPoolInvariants(harness, instance, agent.writtenVersions);
  });
});

describe('a slow sync next to the CIDR release (a CIDR assigned but not yet published)', () => {
  const RELEASE_DELAY_MS = 180_000;

  /** Addresses of `status.eni.enis` that EC2 does not assign to that ENI: a 1.20 agent would derive them. */
  function derivableButUnassigned(node: CiliumNode): string[] {
    const assigned = new Map(
      harness.ec2.state
        .networkInterfaces({})
        .map((eni) => [
          eni.networkInterfaceId,
          new Set([...eni.secondaryPrivateIpAddresses, ...eni.ipv4Prefixes.flatMap(expandPrefix)]),
        ]),
    );
    return Object.entries(node.status?.eni?.enis ?? {}).flatMap(([eniId, eni]) =>
      [...(eni?.addresses ?? []), ...(eni?.prefixes ?? []).flatMap(expandPrefix)].filter(
        (address) => !assigned.get(eniId)?.has(address),
      ),
    );
  }

  function ec2Ips(instance: InstanceRecord): string[] {
    return harness.ec2.state
      .networkInterfaces({ instanceId: instance.instanceId })
      .flatMap((eni) => eni.secondaryPrivateIpAddresses);
  }

  it('does not unassign a withdrawn CIDR before the CiliumNode carries the record version that withdrew it, so the slow sync publishes nothing EC2 lacks', async () => {
    // Everything in one node-table generation, as deployed: the sync annotates the CiliumNode
    // with it, and the release compares the annotation within it.
    const tableGeneration = tableGenerationOf(harness.table.client, harness.table.tableName);
    const allocateDeps = () => harness.dependencies({ tableGeneration });
    const releaseDeps = () => ({
      ...harness.dependencies({ tableGeneration }),
      release: { enabled: true, delayMs: RELEASE_DELAY_MS },
    });
    const syncDeps = { ...syncDependencies(harness), tableGeneration };
    const table = await tableGeneration();
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance);
    const agent = startMultiPoolAgent(harness, instance);
    const record = async () => {
      const current = await harness.table.store.get(instance.instanceId);
      if (!current) throw new Error('no record');
      return current;
    };
    const carried = async () => appliedRecordVersion(await ciliumNodeOf(instance), table);
    const unassigns = () => harness.ec2.calls.count('UnassignPrivateIpAddresses');
    const releasePass = async () => {
      harness.clock.advance(60_000);
      const outcome = await releaseExcess(instance.instanceId, releaseDeps());
      expect(outcome.kind).toBe('reconciled');
    };

    await allocateNode(instance.instanceId, allocateDeps());
    await syncNode(instance.instanceId, syncDeps);
    harness.clock.advance(15_000);
    await agent.driver.tick(harness.clock.now());
    expect(agent.model.startup(harness.clock.now())).toBe('ready');
    const published = ec2Ips(instance);

    // Demand rises for a moment: the allocator assigns more IPs (record version N); the sync the
    // write triggers reads the CiliumNode, then record N, and stalls before writing.
    for (const pod of ['pod-1', 'pod-2', 'pod-3', 'pod-4']) {
      expect(agent.model.allocate(pod, 'ipv4', harness.clock.now())).toHaveProperty('ip');
    }
    harness.clock.advance(15_000);
    await agent.driver.tick(harness.clock.now());
    await allocateNode(instance.instanceId, allocateDeps());
    const added = ec2Ips(instance).filter((ip) => !published.includes(ip));
    expect(added.length).toBeGreaterThan(0);
    for (const pod of ['pod-1', 'pod-2', 'pod-3', 'pod-4']) agent.model.release(pod);
    harness.clock.advance(15_000);
    await agent.driver.tick(harness.clock.now());
    const slowSync = {
      ciliumNode: await harness.ciliumNodes.get(instance.privateDnsName),
      record: await record(),
    };
    const addedCidrs = added.map((ip) => `${ip}/32`);
    expect(slowSync.record.enis.flatMap((eni) => eni.secondaryIps)).toEqual(expect.arrayContaining(added));

    // The new IPs were never in status, so the agent never listed them in allocated: the release
    // takes them for dropped. Pending, then withdrawing after the delay (record version W).
    await releasePass();
    expect(Object.keys((await record()).cidrReleases ?? {}).sort()).toEqual([...addedCidrs].sort());
    harness.clock.advance(RELEASE_DELAY_MS);
    await releasePass();
    const withdrawn = await record();
    const W = withdrawn.version;
    for (const cidr of addedCidrs) {
      expect(withdrawn.cidrReleases?.[cidr]).toMatchObject({ state: 'withdrawing', withdrawnInVersion: W });
    }

    // Not in status, not in allocated, but the CiliumNode is behind W: no EC2 call, no write.
    const unassignsBefore = unassigns();
    expect(await carried()).toBeLessThan(W);
    await releasePass();
    expect(unassigns(), 'no UnassignPrivateIpAddresses while the CiliumNode is behind W').toBe(
      unassignsBefore,
    );
    expect((await record()).version).toBe(W);

    // The stalled sync writes record N now: status lists the new IPs, which are still on EC2.
    expect((await syncNode(instance.instanceId, syncDeps, slowSync)).outcome).toBe('written');
    const afterSlowSync = await ciliumNodeOf(instance);
    expect(appliedRecordVersion(afterSlowSync, table)).toBe(slowSync.record.version);
    const statusIps = Object.values(afterSlowSync.status?.eni?.enis ?? {}).flatMap(
      (eni) => eni?.addresses ?? [],
    );
    expect(statusIps).toEqual(expect.arrayContaining(added));
    expect(derivableButUnassigned(afterSlowSync)).toEqual([]);
    await releasePass();
    expect(unassigns()).toBe(unassignsBefore);

    // The sync publishes W (the new IPs withdrawn); then the next pass unassigns them.
    await syncNode(instance.instanceId, syncDeps);
    expect(await carried()).toBe(W);
    await releasePass();
    expect(unassigns()).toBeGreaterThan(unassignsBefore);
    expect(ec2Ips(instance).filter((ip) => added.includes(ip))).toEqual([]);
    const released = await record();
    for (const cidr of addedCidrs) {
      expect(released.cidrReleases?.[cidr]).toMatchObject({ state: 'released', withdrawnInVersion: W });
    }

    // The stalled sync again: its CiliumNode read is stale, so it re-reads and writes nothing older.
    await syncNode(instance.instanceId, syncDeps, slowSync);
    const final = await ciliumNodeOf(instance);
    expect(appliedRecordVersion(final, table)).toBeGreaterThanOrEqual(W);
    expect(derivableButUnassigned(final)).toEqual([]);
    await agent.driver.observe();
    expect(agent.model.problems).toEqual([]);
    await expectMultiPoolInvariants(harness, instance, agent.writtenVersions);
  });
});

describe('a 1.19 node whose ENI becomes excluded (first-interface-index 0 → 1 after eth0 was filled)', () => {
  it('takes the unused IPs of eth0 out of the pool through the release handshake, keeps the used ones, and never unassigns them', async () => {
    // eth0 tagged as ours by the launch template, so the allocator may fill it.
    const instance = harness.launch('m5.large', {
      primaryNetworkInterfaceTags: ownershipTags(CLUSTER_NAME, 'launch-template'),
    });
    // No CiliumNode yet: the stack defaults (first-interface-index 0) fill eth0.
    await allocateNode(instance.instanceId, harness.dependencies());
    await syncNode(instance.instanceId, syncDependencies(harness));
    const agent = new CrdAgentDriver(harness.ciliumNodes, instance.privateDnsName);
    const eth0Ips = Object.keys((await ciliumNodeOf(instance)).spec?.ipam?.pool ?? {});
    expect(eth0Ips).toHaveLength(8);
    // The agent starts allocating from that pool, then registers its knobs.
    await agent.allocate('pod-a');
    await agent.allocate('pod-b');
    await agent.refresh();
    const registered = await ciliumNodeOf(instance);
    await harness.ciliumNodes.patchMain(instance.privateDnsName, [
      { op: 'test', path: '/metadata/resourceVersion', value: registered.metadata.resourceVersion },
      { op: 'add', path: '/spec/eni', value: { 'first-interface-index': 1 } },
    ]);

    const unassignsBefore = harness.ec2.calls.count('UnassignPrivateIpAddresses');
    for (let round = 0; round < 6; round++) {
      harness.clock.advance(60_000);
      const summary = await sweep(harness.sweepDependencies());
      expect(summary.failed).toEqual([]);
      await syncNode(instance.instanceId, syncDependencies(harness));
      await agent.refresh();
      // The agent keeps allocating throughout; it must never be handed an IP that is leaving.
      if (round === 1) await agent.allocate('pod-c');
    }
    await agent.refresh();

    const node = await ciliumNodeOf(instance);
    const pool = node.spec?.ipam?.pool ?? {};
    const eth0Left = eth0Ips.filter((ip) => pool[ip] !== undefined);
    expect(eth0Left.sort()).toEqual(
      agent
        .usedIps()
        .filter((ip) => eth0Ips.includes(ip))
        .sort(),
    );
    expect(node.status?.ipam?.['release-ips'] ?? {}).toEqual({});
    expect(harness.ec2.calls.count('UnassignPrivateIpAddresses'), 'excluded ENIs are never touched').toBe(
      unassignsBefore,
    );
    const record = await harness.table.store.get(instance.instanceId);
    expect(record?.excessMarks ?? {}).toEqual({});
    // Every pool removal went through the handshake, at every version.
    const history = (await harness.k8s.history(instance.privateDnsName)).map(
      (entry) => entry.object as unknown as CiliumNode,
    );
    for (let index = 1; index < history.length; index++) {
      expect(
        checkPoolRemovalsHandshaken(history[index - 1] as CiliumNode, history[index] as CiliumNode),
      ).toEqual([]);
      expect(checkStatusCoversSpec(history[index] as CiliumNode)).toEqual([]);
    }
    expect(observeAsAgent(node).accepted).toBe(true);
  });
});

describe('upgrade in place from 1.19 to 1.20, and the downgrade back', () => {
  it('keeps every pod IP through both transitions; the record, the logs and the sweep follow the protocol', async () => {
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    const crdAgent = new CrdAgentDriver(harness.ciliumNodes, instance.privateDnsName);
    const sweepRound = async () => {
      harness.clock.advance(60_000);
      const summary = await sweep({
        ...harness.sweepDependencies(),
        release: { enabled: true, delayMs: 180_000 },
      });
      expect(summary.failed).toEqual([]);
      await syncNode(instance.instanceId, syncDependencies(harness));
    };
    await sweepRound();
    for (const pod of ['pod-1', 'pod-2', 'pod-3']) expect(await crdAgent.allocate(pod)).toBeDefined();
    await crdAgent.refresh();
    await sweepRound();
    expect((await harness.table.store.get(instance.instanceId))?.agentProtocol).toBe('crd');
    const podIps = new Map(crdAgent.usedIps().map((ip, index) => [`pod-${index + 1}`, ip]));

    // Upgrade: the 1.20 agent restores the endpoints from what status lists, then takes over.
    const agent = startMultiPoolAgent(harness, instance);
    await agent.driver.observe();
    for (const [pod, ip] of podIps) agent.model.restore(pod, ip);
    await agent.driver.tick(harness.clock.now());
    expect(agentProtocolOf(await ciliumNodeOf(instance))).toBe('multi-pool');
    await sweepRound();
    await agent.driver.tick(harness.clock.now());
    expect((await harness.table.store.get(instance.instanceId))?.agentProtocol).toBe('multi-pool');
    await runPods(instance, agent, ['pod-4', 'pod-5'], 4, async () => {
      await agent.driver.tick(harness.clock.now());
      await sweepRound();
      await agent.driver.observe();
    });
    for (let round = 0; round < 5; round++) {
      await agent.driver.tick(harness.clock.now());
      await sweepRound();
      await agent.driver.observe();
      expectInUseIpsOnEc2(instance, agent);
    }
    expect(agent.model.problems).toEqual([]);

    // Downgrade: a 1.19 agent restores the same endpoints; it needs them in the dual-written pool.
    const endpoints = agent.model.endpoints();
    const pool = (await ciliumNodeOf(instance)).spec?.ipam?.pool ?? {};
    for (const [pod, ip] of endpoints) expect(pool[ip], `${pod}'s ${ip} in spec.ipam.pool`).toBeDefined();
    const downgraded = new CrdAgentDriver(harness.ciliumNodes, instance.privateDnsName);
    downgraded.restore(endpoints);
    await downgraded.refresh();
    expect(agentProtocolOf(await ciliumNodeOf(instance))).toBe('crd');
    for (let round = 0; round < 5; round++) {
      await sweepRound();
      await downgraded.refresh();
    }
    expect((await harness.table.store.get(instance.instanceId))?.agentProtocol).toBe('crd');
    const transitions = harness.logs
      .filter((entry) => entry.message === 'agent IPAM protocol changed')
      .map((entry) => `${entry.fields?.from}->${entry.fields?.to}`);
    expect(transitions).toEqual(['none->crd', 'crd->multi-pool', 'multi-pool->crd']);
    const assigned = new Set(
      harness.ec2.state
        .networkInterfaces({ instanceId: instance.instanceId })
        .flatMap((eni) => eni.secondaryPrivateIpAddresses),
    );
    const finalPool = (await ciliumNodeOf(instance)).spec?.ipam?.pool ?? {};
    for (const [pod, ip] of endpoints) {
      expect(assigned.has(ip), `${pod}'s ${ip} still on EC2`).toBe(true);
      expect(finalPool[ip], `${pod}'s ${ip} still in the pool`).toBeDefined();
    }
    const history = (await harness.k8s.history(instance.privateDnsName)).map(
      (entry) => entry.object as unknown as CiliumNode,
    );
    for (let index = 1; index < history.length; index++) {
      const [before, after] = [history[index - 1] as CiliumNode, history[index] as CiliumNode];
      expect(checkStatusCoversSpec(after)).toEqual([]);
      expect(checkAllocatedNotWithdrawn(before, after)).toEqual([]);
      expect(checkPoolRemovalsHandshaken(before, after)).toEqual([]);
    }
  });
});

describe('prefix delegation for a 1.20 node', () => {
  it('serves /28 prefixes the agent folds into whole CIDRs, and releases an unused /28 whole', async () => {
    await harness.close();
    harness = await startAllocationHarness({ settings: { prefixDelegationEnabled: true } });
    const instance = harness.launch('m5.xlarge');
    await harness.createCiliumNode(instance);
    const agent = startMultiPoolAgent(harness, instance);
    const prefixes = () =>
      harness.ec2.state
        .networkInterfaces({ instanceId: instance.instanceId })
        .flatMap((eni) => eni.ipv4Prefixes);
    const sweepCycle = async () => {
      harness.clock.advance(60_000);
      await agent.driver.tick(harness.clock.now());
      const summary = await sweep({
        ...harness.sweepDependencies(),
        release: { enabled: true, delayMs: 180_000 },
      });
      expect(summary.failed).toEqual([]);
      await syncNode(instance.instanceId, syncDependencies(harness));
      await agent.driver.observe();
      expectInUseIpsOnEc2(instance, agent);
    };
    await sweepCycle();
    expect(agent.model.startup(harness.clock.now())).toBe('ready');
    const pods = Array.from({ length: 20 }, (_, index) => `pod-${index + 1}`);
    await runPods(instance, agent, pods, 6, sweepCycle);
    // 20 in use + 8 pre-allocated = 28 addresses: two /28s, no single IPs.
    expect(prefixes()).toHaveLength(2);
    const node = await ciliumNodeOf(instance);
    const allocated = ((node.spec?.ipam?.pools ?? {}) as { allocated?: { cidrs: string[] }[] }).allocated?.[0]
      ?.cidrs;
    expect(allocated?.sort()).toEqual([...prefixes()].sort());

    for (const pod of pods.slice(2)) agent.model.release(pod);
    for (let round = 0; round < 8; round++) await sweepCycle();
    expect(prefixes()).toHaveLength(1);
    // Released as a whole prefix: EC2 refuses single addresses of a delegated /28.
    expect(harness.ec2.calls.count('UnassignPrivateIpAddresses')).toBeGreaterThan(0);
    expect(harness.ec2.calls.countWithOutcome('client-error', 'UnassignPrivateIpAddresses')).toBe(0);
    expect(agent.model.inUseIps()).toHaveLength(2);
    expect(agent.model.problems).toEqual([]);
    await expectMultiPoolInvariants(harness, instance, agent.writtenVersions);
  });
});
