import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { poolRequest } from '../../functions/core/agent-protocol.ts';
import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import { sweep } from '../../functions/services/sweep.ts';
import { syncNode } from '../../functions/services/sync-node.ts';
import type { InstanceRecord } from '../emulators/ec2/index.ts';
import { type AgentEvent, AgentPeer, type AgentRelease } from '../support/agent-peer.ts';
import { type AllocationHarness, startAllocationHarness } from '../support/allocation-harness.ts';
import { checkStatusCoversSpec } from '../support/invariants.ts';
import { silentLog } from '../support/multi-pool-scenario.ts';

/**
 * cilium's own agent IPAM as the consumer of what the stack publishes: the real kube-apiserver, the
 * stack's sweep and sync (DynamoDB Local, the EC2 emulator) serving the node as the deployed
 * functions would, and a real cilium agent allocator per node (test/peers/cilium-<release>/cmd/agent-peer:
 * ipam.NewIPAM in ENI mode on the node's CiliumNode) allocating the router, health and pod IPs and
 * reporting every allocation error. On nodes the stack serves the agent allocates without one error,
 * through growth and an excess release. On a CiliumNode made pool-ahead on purpose (a pool IP whose
 * ENI is missing from status.eni.enis, the state cilium-operator 1.11.5 could publish), cilium 1.11.5
 * fails the allocation with "unable to find ENI", and 1.20.2 refuses the update ("ENI state is not
 * consistent yet") and hands out nothing until the status covers its pool.
 */

const RELEASE_DELAY_MS = 180_000;
/**
 * The 1.20 agent's `--ipam-cilium-node-update-rate`. Its default, 15 s, is a debounce that drops a
 * demand change made within 15 s of its last write and leaves it to its 1-minute refresh: the growth
 * below would take minutes. 0 writes every change as it comes (one write at a time, folded).
 */
const UPDATE_RATE_MS = 0;
/** The 1.20 agent's pre-allocation when the CiliumNode names none (cilium `defaults.IPAMPreAllocation`). */
const AGENT_PRE_ALLOCATE = 8;

let harness: AllocationHarness;
const agents: AgentPeer[] = [];

beforeEach(async () => {
  harness = await startAllocationHarness();
});
afterEach(async () => {
  await Promise.all(agents.splice(0).map((agent) => agent.stop()));
  await harness.close();
});

function startAgent(release: AgentRelease, instance: InstanceRecord, pods: number): AgentPeer {
  const agent = new AgentPeer({
    release,
    kubeconfigPath: harness.k8s.writeKubeconfig(undefined, harness.k8s.token),
    node: instance.privateDnsName,
    pods,
    ...(release === '1.20.2' ? { updateRateMs: UPDATE_RATE_MS } : {}),
  });
  agents.push(agent);
  return agent;
}

/** One pass of the stack: a scheduled sweep (allocation and excess release), then the sync of each node. */
async function serveOnce(instances: readonly InstanceRecord[]): Promise<void> {
  harness.clock.advance(60_000);
  const summary = await sweep({
    ...harness.sweepDependencies(),
    release: { enabled: true, delayMs: RELEASE_DELAY_MS },
  });
  expect(summary.failed).toEqual([]);
  for (const instance of instances) {
    await syncNode(instance.instanceId, {
      store: harness.table.store,
      ciliumNodes: harness.ciliumNodes,
      log: silentLog,
    });
  }
}

/** Serves the nodes, pass after pass in real time, while `body` runs (the agent acts on its own clock). */
async function whileServing<T>(instances: readonly InstanceRecord[], body: () => Promise<T>): Promise<T> {
  let serving = true;
  const loop = (async () => {
    while (serving) {
      await serveOnce(instances);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  try {
    return await body();
  } finally {
    serving = false;
    await loop;
  }
}

async function ciliumNodeOf(instance: InstanceRecord): Promise<CiliumNode> {
  const node = await harness.ciliumNodes.get(instance.privateDnsName);
  if (node === undefined) throw new Error(`no CiliumNode ${instance.privateDnsName}`);
  return node;
}

/** The IPv4 addresses status.eni.enis publishes (what a 1.20 agent derives its pool from). */
function publishedAddresses(node: CiliumNode): number {
  return Object.values(node.status?.eni?.enis ?? {}).reduce(
    (sum, eni) => sum + (eni.addresses ?? []).length,
    0,
  );
}

/**
 * Resolves once the 1.20 agent's demand covers what it holds plus its pre-allocation and the status
 * publishes exactly that many addresses: the stack has caught up (grown or released) with the agent.
 */
async function untilSettled(instance: InstanceRecord, agent: AgentPeer, what: string): Promise<void> {
  const deadline = Date.now() + 40_000;
  for (;;) {
    const node = await ciliumNodeOf(instance);
    const requested = poolRequest(node).ipv4Addresses;
    const wanted = agent.holdings().size + AGENT_PRE_ALLOCATE;
    if (requested === wanted && publishedAddresses(node) === wanted) return;
    if (Date.now() > deadline) {
      throw new Error(
        `${what}: requested ${requested}, published ${publishedAddresses(node)}, wanted ${wanted}; see ${agent.logPath}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * Resolves once the agent's demand (`spec.ipam.pools.requested`) counts what it holds now plus its
 * pre-allocation: it has written what the last allocation or release changed. The agent drops a
 * write that conflicts with the stack's own ("will retry") and retries only on its next change or
 * its 1-minute refresh; as on a busy node, a short-lived pod (an allocation and its release) is
 * that next change.
 */
async function untilRequested(instance: InstanceRecord, agent: AgentPeer): Promise<void> {
  const deadline = Date.now() + 30_000;
  let nudgeAt = Date.now() + 2_000;
  for (let nudges = 0; ; ) {
    const wanted = agent.holdings().size + AGENT_PRE_ALLOCATE;
    if (poolRequest(await ciliumNodeOf(instance)).ipv4Addresses === wanted) return;
    if (Date.now() > deadline) throw new Error(`the agent never requested ${wanted}; see ${agent.logPath}`);
    if (Date.now() > nudgeAt) {
      nudges++;
      await answer(agent, `allocate short-lived-${nudges}`, `short-lived-${nudges}`);
      await answer(agent, `release short-lived-${nudges}`, `short-lived-${nudges}`);
      nudgeAt = Date.now() + 2_000;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Sends `command` and waits for the agent's answer about `owner`. */
async function answer(agent: AgentPeer, command: string, owner: string): Promise<void> {
  const from = agent.events.length;
  agent.send(command);
  await agent.waitFor(`the answer to ${command}`, (event) => 'owner' in event && event.owner === owner, {
    from,
  });
}

/** Allocates for `owners` one at a time, as pods start, each once the agent has written the last one's demand. */
async function allocate(
  instance: InstanceRecord,
  agent: AgentPeer,
  owners: readonly string[],
): Promise<void> {
  for (const owner of owners) {
    await answer(agent, `allocate ${owner}`, owner);
    await untilRequested(instance, agent);
  }
}

/** Releases the IPs of `owners` one at a time, as pods end, each once the agent has written the last one's demand. */
async function release(instance: InstanceRecord, agent: AgentPeer, owners: readonly string[]): Promise<void> {
  for (const owner of owners) {
    await answer(agent, `release ${owner}`, owner);
    await untilRequested(instance, agent);
  }
}

function podNames(first: number, last: number): string[] {
  return Array.from({ length: last - first + 1 }, (_, index) => `pod-${first + index}`);
}

/** Every IP the agent holds is assigned in EC2 to an ENI of its instance. */
function expectHeldIpsOnEc2(instance: InstanceRecord, agent: AgentPeer): void {
  const assigned = new Set(
    harness.ec2.state
      .networkInterfaces({ instanceId: instance.instanceId })
      .flatMap((eni) => eni.secondaryPrivateIpAddresses),
  );
  for (const [owner, ip] of agent.holdings())
    expect(assigned.has(ip), `${owner}'s ${ip} assigned in EC2`).toBe(true);
}

/**
 * The node served once, then stored as cilium-operator 1.11.5 could publish it: the pool (IPs of the
 * ENIs from device index 1) as the stack wrote it, status.eni.enis with eth0 only. Returns the ENI
 * ids the pool references that the status now lacks.
 */
async function poolAheadNode(instance: InstanceRecord): Promise<string[]> {
  await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
  await serveOnce([instance]);
  const served = await ciliumNodeOf(instance);
  const enis = served.status?.eni?.enis ?? {};
  const missing = Object.keys(enis).filter((id) => (enis[id]?.number ?? 0) > 0);
  expect(missing.length, 'a secondary ENI serves the pool').toBeGreaterThan(0);
  const poolAhead = structuredClone(served);
  for (const id of missing) delete poolAhead.status?.eni?.enis?.[id];
  await harness.k8s.putCiliumNode(poolAhead);
  const stored = await ciliumNodeOf(instance);
  expect(checkStatusCoversSpec(stored).length, 'the stored version is pool-ahead').toBeGreaterThan(0);
  return missing;
}

function allocationErrors(agent: AgentPeer): AgentEvent[] {
  return agent.events.filter(
    (event) => event.event === 'allocation-error' || event.event === 'release-error',
  );
}

describe('cilium-agent 1.20.2 (ENI multi-pool IPAM) as the consumer', () => {
  it('allocates the router, health and pod IPs on a node the stack serves, through growth and an excess release, without one error', async () => {
    const instance = harness.launch('m5.xlarge');
    await harness.createCiliumNode(instance);
    await serveOnce([instance]);
    const agent = startAgent('1.20.2', instance, 4);
    // The stack serves again once the agent has started: its first CiliumNode write, which it
    // retries only at its 1-minute refresh if it conflicts, is what it waits for before allocating.
    await agent.waitFor('pod-4', (event) => event.event === 'allocated' && event.owner === 'pod-4');
    await whileServing([instance], async () => {
      agent.send('restore-finished');
      await untilRequested(instance, agent);
      await untilSettled(instance, agent, 'start');
      // Growth: six pods at a time (within the pre-allocation), the stack topping up in between,
      // to 30 pods and a second and third ENI.
      for (let first = 5; first <= 30; first += 6) {
        await allocate(instance, agent, podNames(first, Math.min(first + 5, 30)));
        await untilSettled(instance, agent, `growth to pod-${Math.min(first + 5, 30)}`);
      }
      expect(agent.holdings().size).toBe(32);
      expectHeldIpsOnEc2(instance, agent);
      // Excess release: 20 pods go; the agent drops what exceeds its pre-allocation, the stack
      // unassigns it after the delay and withdraws it from the status.
      await release(instance, agent, podNames(11, 30));
      await untilSettled(instance, agent, 'excess release');
      await allocate(instance, agent, podNames(31, 36));
      await untilSettled(instance, agent, 'after the release');
    });
    expect(allocationErrors(agent)).toEqual([]);
    expect(agent.holdings().size).toBe(18);
    expectHeldIpsOnEc2(instance, agent);
  });

  it('refuses a pool-ahead CiliumNode ("ENI state is not consistent yet"), hands out nothing from it, and starts once the stack publishes the status again', async () => {
    const instance = harness.launch('m5.xlarge');
    const missing = await poolAheadNode(instance);
    const agent = startAgent('1.20.2', instance, 2);
    const refusal = await agent.waitFor(
      'the refusal',
      (event) => event.event === 'log' && event.msg === 'ENI state is not consistent yet',
    );
    expect(missing.some((id) => String(refusal.event === 'log' && refusal.error).includes(id))).toBe(true);
    expect(agent.events.some((event) => event.event === 'ready')).toBe(false);

    // The agent writes its demand on the version it refused, then waits for a pool; one pass of the
    // stack after that write publishes the status again (a write racing the agent's first one would
    // hold it back until its 1-minute refresh, as in the test above).
    const deadline = Date.now() + 30_000;
    while (!poolRequest(await ciliumNodeOf(instance)).found) {
      if (Date.now() > deadline) throw new Error(`the agent never wrote its demand; see ${agent.logPath}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await serveOnce([instance]);
    await agent.waitFor('pod-2', (event) => event.event === 'allocated' && event.owner === 'pod-2');
    expect(allocationErrors(agent)).toEqual([]);
    expectHeldIpsOnEc2(instance, agent);
  });
});

describe('cilium-agent 1.11.5 (CRD IPAM) as the consumer', () => {
  it('allocates the router, health and pod IPs on a node the stack serves, without one error', async () => {
    const instance = harness.launch('m5.xlarge');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    await serveOnce([instance]);
    const agent = startAgent('1.11.5', instance, 4);
    await agent.waitFor('pod-4', (event) => event.event === 'allocated' && event.owner === 'pod-4');
    expect(allocationErrors(agent)).toEqual([]);
    expect(agent.holdings().size).toBe(6);
    expectHeldIpsOnEc2(instance, agent);
  });

  it('fails with "unable to find ENI" on a pool-ahead CiliumNode: the consequence of the bug of cilium-operator 1.11.5', async () => {
    const instance = harness.launch('m5.xlarge');
    const missing = await poolAheadNode(instance);
    const agent = startAgent('1.11.5', instance, 2);
    await agent.waitFor('the answer for pod-2', (event) => 'owner' in event && event.owner === 'pod-2');
    const errors = allocationErrors(agent);
    expect(errors.map((event) => ('owner' in event ? event.owner : ''))).toEqual([
      'router',
      'health',
      'pod-1',
      'pod-2',
    ]);
    for (const event of errors) {
      expect(event).toMatchObject({
        error: expect.stringMatching(
          /^failed to associate IP \S+ inside CiliumNode: unable to find ENI eni-/,
        ),
      });
      expect(missing.some((id) => 'error' in event && String(event.error).endsWith(id))).toBe(true);
    }
  });
});
