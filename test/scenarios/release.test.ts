import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CiliumNode, JsonPatchOperation, ReleaseStatus } from '../../functions/core/ciliumnode.ts';
import { ResourceVersionConflictError } from '../../functions/core/ciliumnode.ts';
import { sortIpv4 } from '../../functions/core/ip-math.ts';
import type { Log } from '../../functions/core/ports.ts';
import { releaseExcess } from '../../functions/services/release-excess.ts';
import { type SweepSummary, sweep } from '../../functions/services/sweep.ts';
import { type SyncDependencies, syncNode } from '../../functions/services/sync-node.ts';
import type { InstanceRecord } from '../emulators/ec2/index.ts';
import { type AllocationHarness, startAllocationHarness } from '../support/allocation-harness.ts';
import { checkRightNode, checkStatusCoversSpec } from '../support/invariants.ts';

/**
 * The excess-IP release handshake end to end: the sweep (allocation and release) against DynamoDB
 * Local and the EC2 emulator, the sync writing the CiliumNode in the Kubernetes emulator, and a
 * simulated cilium agent answering in `status.ipam.release-ips`. Time is the harness's manual
 * clock; each `cycle` is one scheduled sweep followed by the sync the table stream would trigger
 * and the agent's next status refresh.
 */

const RELEASE_DELAY_MS = 180_000;
const SWEEP_INTERVAL_MS = 60_000;
/** cilium marks an IP once it has been excess for strictly longer than the delay. */
const PAST_DELAY_MS = RELEASE_DELAY_MS + 1;
/** The node's knobs: ENIs from device index 1 (eth0 stays out of the pool), pre-allocate 2. */
const NODE_SPEC = { eni: { 'first-interface-index': 1 }, ipam: { 'pre-allocate': 2 } };

const silentLog: Log = { debug() {}, info() {}, warn() {}, error() {} };

/** Handshake states in which cilium's agent never hands an IP out (`isIPInReleaseHandshake`). */
const IN_HANDSHAKE: ReadonlySet<ReleaseStatus> = new Set([
  'marked-for-release',
  'ready-for-release',
  'released',
]);

/**
 * The agent's side of the CRD protocol, as cilium's https://github.com/cilium/cilium/blob/507103c61f/pkg/ipam/crd.go does it
 * (functions/README.md, *Agent protocols*): it hands out pool IPs that are not in the handshake, reports them in `status.ipam.used`,
 * and on each refresh answers every `marked-for-release` entry — `ready-for-release` if the IP is in
 * `spec.ipam.pool` and not used locally, `do-not-release` if used locally or not in the pool — and
 * deletes a `released` entry once the IP is out of the pool. Answers it already gave are kept.
 * Status writes are whole-map replacements guarded by the resourceVersion, retried on conflict.
 */
class SimulatedAgent {
  /** IPs handed to pods, with whether the agent has reported them yet. */
  private readonly inUse = new Map<string, { reported: boolean }>();

  constructor(
    private readonly harness: AllocationHarness,
    private readonly nodeName: string,
  ) {}

  usedIps(): string[] {
    return sortIpv4(this.inUse.keys());
  }

  /** Hands out pool IPs (lowest first) until `count` are in use; reported on the next refresh. */
  async allocateUpTo(count: number, options: { report: boolean } = { report: true }): Promise<string[]> {
    const node = await this.read();
    const handshake = node.status?.ipam?.['release-ips'] ?? {};
    const free = sortIpv4(Object.keys(node.spec?.ipam?.pool ?? {})).filter((ip) => {
      const state = handshake[ip];
      return !this.inUse.has(ip) && (state === undefined || !IN_HANDSHAKE.has(state));
    });
    const taken = free.slice(0, Math.max(count - this.inUse.size, 0));
    for (const ip of taken) this.inUse.set(ip, { reported: false });
    if (options.report) await this.refresh();
    return taken;
  }

  /** Pods gone: their IPs are free again (reported on the next refresh). */
  async free(ips: readonly string[]): Promise<void> {
    for (const ip of ips) this.inUse.delete(ip);
    await this.refresh();
  }

  /** One status refresh: `used` and the handshake answers, in one /status write. */
  async refresh(): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const node = await this.read();
      const pool = node.spec?.ipam?.pool ?? {};
      const answers: Record<string, ReleaseStatus> = { ...(node.status?.ipam?.['release-ips'] ?? {}) };
      for (const [ip, state] of Object.entries(answers)) {
        const inPool = Object.hasOwn(pool, ip);
        if (state === 'released' && !inPool) delete answers[ip];
        if (state !== 'marked-for-release') continue;
        answers[ip] = inPool && !this.inUse.has(ip) ? 'ready-for-release' : 'do-not-release';
      }
      const used = Object.fromEntries(
        [...this.inUse.keys()].map((ip) => [ip, { owner: `pod-${ip}`, resource: pool[ip]?.resource }]),
      );
      const ipam = { ...(node.status?.ipam ?? {}), used, 'release-ips': answers };
      const patch: JsonPatchOperation[] = [
        { op: 'test', path: '/metadata/resourceVersion', value: node.metadata.resourceVersion },
        node.status === undefined
          ? { op: 'add', path: '/status', value: { ipam } }
          : { op: 'add', path: '/status/ipam', value: ipam },
      ];
      try {
        await this.harness.ciliumNodes.patchStatus(this.nodeName, patch);
        for (const entry of this.inUse.values()) entry.reported = true;
        return;
      } catch (error) {
        if (!(error instanceof ResourceVersionConflictError) || attempt >= 5) throw error;
      }
    }
  }

  private async read(): Promise<CiliumNode> {
    const node = await this.harness.ciliumNodes.get(this.nodeName);
    if (!node) throw new Error(`CiliumNode ${this.nodeName} does not exist`);
    return node;
  }
}

let harness: AllocationHarness;
let instance: InstanceRecord;
let agent: SimulatedAgent;

beforeEach(async () => {
  harness = await startAllocationHarness();
  instance = harness.launch('m5.large');
  await harness.createCiliumNode(instance, NODE_SPEC);
  agent = new SimulatedAgent(harness, instance.privateDnsName);
});
afterEach(async () => {
  await harness.close();
});

function syncDependencies(): SyncDependencies {
  return { store: harness.table.store, ciliumNodes: harness.ciliumNodes, log: silentLog };
}

/** One sweep, the sync its record writes trigger, the agent's refresh; checks invariant 5 after it. */
async function cycle(advanceMs = SWEEP_INTERVAL_MS): Promise<SweepSummary> {
  harness.clock.advance(advanceMs);
  const summary = await sweep({
    ...harness.sweepDependencies(),
    release: { enabled: true, delayMs: RELEASE_DELAY_MS },
  });
  expect(summary.failed).toEqual([]);
  await syncNode(instance.instanceId, syncDependencies());
  await agent.refresh();
  expectInUseIpsKept();
  return summary;
}

/** One sweep and the sync it triggers, with no agent refresh after it (the agent is slow to answer). */
async function releasePass(advanceMs = SWEEP_INTERVAL_MS): Promise<void> {
  harness.clock.advance(advanceMs);
  const summary = await sweep({
    ...harness.sweepDependencies(),
    release: { enabled: true, delayMs: RELEASE_DELAY_MS },
  });
  expect(summary.failed).toEqual([]);
  await syncNode(instance.instanceId, syncDependencies());
  expectInUseIpsKept();
}

/** Invariant 5: every IP a pod holds is still assigned in EC2 and still in the pool. */
function expectInUseIpsKept(): void {
  const assigned = new Set(ec2Ips());
  for (const ip of agent.usedIps()) expect(assigned.has(ip), `in-use ${ip} still assigned in EC2`).toBe(true);
}

/** Secondary IPs on the instance's ENIs from device index 1, as EC2 holds them. */
function ec2Ips(): string[] {
  return sortIpv4(
    harness.ec2.state
      .networkInterfaces({ instanceId: instance.instanceId })
      .filter((eni) => (eni.attachment?.deviceIndex ?? 0) >= 1)
      .flatMap((eni) => eni.secondaryPrivateIpAddresses),
  );
}

async function ciliumNode(): Promise<CiliumNode> {
  const node = await harness.ciliumNodes.get(instance.privateDnsName);
  if (!node) throw new Error('no CiliumNode');
  return node;
}

async function poolIps(): Promise<string[]> {
  return sortIpv4(Object.keys((await ciliumNode()).spec?.ipam?.pool ?? {}));
}

async function releaseIps(): Promise<Record<string, ReleaseStatus>> {
  return (await ciliumNode()).status?.ipam?.['release-ips'] ?? {};
}

async function marks(): Promise<Record<string, string>> {
  const record = await harness.table.store.get(instance.instanceId);
  return Object.fromEntries(
    Object.entries(record?.excessMarks ?? {}).map(([ip, mark]) => [ip, mark.state ?? 'pending']),
  );
}

function statesFor(ips: readonly string[], state: string): Record<string, string> {
  return Object.fromEntries(ips.map((ip) => [ip, state]));
}

/**
 * Grows the node to 8 IPs with 6 in use (the agent takes every IP it gets, the allocator keeps 2
 * spare), then lets 4 pods go: 8 available, 2 used, pre-allocate 2 → cilium's excess is
 * 8 - 2 - 2 = 4, taken by `PrepareIPRelease` as the 4 lowest free IPs of the (only) ENI.
 */
async function growThenShrink(): Promise<{ excess: string[]; kept: string[] }> {
  await cycle(); // no record yet: allocation creates the ENI with 2 IPs
  for (const inUse of [2, 4, 6]) {
    await agent.allocateUpTo(inUse);
    await cycle();
  }
  expect(ec2Ips()).toHaveLength(8);
  expect(await poolIps()).toEqual(ec2Ips());
  const used = agent.usedIps();
  expect(used).toHaveLength(6);
  await agent.free(used.slice(0, 4));
  const free = ec2Ips().filter((ip) => !agent.usedIps().includes(ip));
  return { excess: free.slice(0, 4), kept: ec2Ips().filter((ip) => !free.slice(0, 4).includes(ip)) };
}

/** Invariants 1 and 6 over EVERY version the Kubernetes emulator stored for the node. */
async function expectInvariantsAtEveryVersion(): Promise<void> {
  const history = await harness.k8s.history(instance.privateDnsName);
  expect(history.length).toBeGreaterThan(10);
  for (const entry of history) {
    const object = entry.object as unknown as CiliumNode;
    expect(checkStatusCoversSpec(object), `resourceVersion ${entry.resourceVersion} (${entry.type})`).toEqual(
      [],
    );
    expect(checkRightNode(object, instance.instanceId)).toEqual([]);
  }
}

/** The successive values (repeats collapsed) of one IP's `release-ips` entry over every stored version. */
async function handshakeHistory(ip: string): Promise<(ReleaseStatus | 'absent')[]> {
  const states: (ReleaseStatus | 'absent')[] = [];
  for (const entry of await harness.k8s.history(instance.privateDnsName)) {
    const object = entry.object as unknown as CiliumNode;
    const state = object.status?.ipam?.['release-ips']?.[ip] ?? 'absent';
    if (states[states.length - 1] !== state) states.push(state);
  }
  return states;
}

/** The index of the first stored version from `fromIndex` on that satisfies `test`, or -1. */
async function firstVersionWhere(test: (object: CiliumNode) => boolean, fromIndex = 0): Promise<number> {
  return (await harness.k8s.history(instance.privateDnsName)).findIndex(
    (entry, index) => index >= fromIndex && test(entry.object as unknown as CiliumNode),
  );
}

describe('excess IPs are released through the handshake', () => {
  it("releases exactly cilium's excess, never before the delay, in order: marked → ready → out of spec → unassigned → released → gone", async () => {
    const { excess, kept } = await growThenShrink();
    expect(excess).toHaveLength(4);

    // The sweep marks the excess; inside the delay nothing is published, whole sweeps pass for free.
    let summary = await cycle();
    expect(summary.reconciled).toEqual({ release: 1 });
    expect(await marks()).toEqual(statesFor(excess, 'pending'));
    harness.ec2.calls.reset();
    for (let elapsedMs = SWEEP_INTERVAL_MS; elapsedMs <= RELEASE_DELAY_MS; elapsedMs += SWEEP_INTERVAL_MS) {
      summary = await cycle();
      expect(summary.skipped).toEqual({ 'in-sync': 1 });
      expect(await releaseIps()).toEqual({});
    }
    expect(harness.ec2.calls.count('DescribeNetworkInterfaces')).toBe(0);
    expect(harness.ec2.calls.mutating()).toBe(0);

    // Past the delay: published, and the agent answers ready (in the pool, not used locally).
    await cycle(1);
    expect(await marks()).toEqual(statesFor(excess, 'marked-for-release'));
    expect(await releaseIps()).toEqual(statesFor(excess, 'ready-for-release'));

    // Ready: the sync takes the IPs out of spec.ipam.pool first; EC2 still holds them.
    await cycle();
    expect(await marks()).toEqual(statesFor(excess, 'ready-for-release'));
    expect(await poolIps()).toEqual(kept);
    expect(ec2Ips()).toEqual(sortIpv4([...kept, ...excess]));
    expect(harness.ec2.calls.count('UnassignPrivateIpAddresses')).toBe(0);

    // Out of the pool and unused: unassigned in EC2 (one call for the ENI), released; the agent
    // reads `released` with the IP out of the pool and deletes the entry.
    await cycle();
    expect(harness.ec2.calls.count('UnassignPrivateIpAddresses')).toBe(1);
    expect(ec2Ips()).toEqual(kept);
    expect(await marks()).toEqual(statesFor(excess, 'released'));
    expect(await releaseIps()).toEqual({});

    // The acknowledged marks are dropped; then the node is at rest.
    await cycle();
    expect(await marks()).toEqual({});
    harness.ec2.calls.reset();
    summary = await cycle();
    expect(summary.skipped).toEqual({ 'in-sync': 1 });
    expect(harness.ec2.calls.mutating()).toBe(0);
    expect(await poolIps()).toEqual(kept);
    expect(agent.usedIps().every((ip) => kept.includes(ip))).toBe(true);

    for (const ip of excess) {
      expect(await handshakeHistory(ip)).toEqual([
        'absent',
        'marked-for-release',
        'ready-for-release',
        'released',
        'absent',
      ]);
      // The IP leaves the pool before status stops covering it, and `released` is only ever shown
      // once both are true.
      const outOfPool = await firstVersionWhere(
        (cn) =>
          cn.spec?.ipam?.pool?.[ip] === undefined &&
          cn.status?.ipam?.['release-ips']?.[ip] === 'ready-for-release',
      );
      const outOfStatus = await firstVersionWhere(
        (cn) => Object.values(cn.status?.eni?.enis ?? {}).every((eni) => !(eni.addresses ?? []).includes(ip)),
        outOfPool,
      );
      const released = await firstVersionWhere((cn) => cn.status?.ipam?.['release-ips']?.[ip] === 'released');
      expect(outOfPool).toBeGreaterThan(0);
      expect(outOfStatus).toBeGreaterThan(outOfPool);
      expect(released).toBeGreaterThanOrEqual(outOfStatus);
    }
    await expectInvariantsAtEveryVersion();
  });

  it('waits for the agent: release passes between marked-for-release and its answer change nothing', async () => {
    // Guards the handshake's wait for `ready-for-release`: in the other scenarios the agent answers
    // before the next release pass, so a planner that took a mark as ready without the answer
    // would pass them too.
    const { excess, kept } = await growThenShrink();
    await cycle(); // marked, pending
    await releasePass(PAST_DELAY_MS);
    expect(await releaseIps()).toEqual(statesFor(excess, 'marked-for-release'));
    harness.ec2.calls.reset();
    for (let pass = 0; pass < 2; pass++) {
      await releasePass();
      expect(await marks()).toEqual(statesFor(excess, 'marked-for-release'));
      expect(await releaseIps()).toEqual(statesFor(excess, 'marked-for-release'));
      expect(await poolIps()).toEqual(sortIpv4([...kept, ...excess]));
    }
    expect(harness.ec2.calls.mutating()).toBe(0);

    // The agent answers at last: from here the handshake runs as usual.
    await agent.refresh();
    expect(await releaseIps()).toEqual(statesFor(excess, 'ready-for-release'));
    await cycle();
    expect(await marks()).toEqual(statesFor(excess, 'ready-for-release'));
    expect(await poolIps()).toEqual(kept);
    await cycle();
    expect(ec2Ips()).toEqual(kept);
    for (const ip of excess) {
      expect(await handshakeHistory(ip)).toEqual([
        'absent',
        'marked-for-release',
        'ready-for-release',
        'released',
        'absent',
      ]);
    }
    await expectInvariantsAtEveryVersion();
  });

  it('keeps an IP the agent answers do-not-release for (handed to a pod before it was published)', async () => {
    const { excess } = await growThenShrink();
    await cycle(); // marked, pending
    const [claimed = '', ...others] = excess;
    // A pod gets the lowest excess IP before the mark is published; the agent reports it only with
    // its next refresh, which is the one that answers the handshake.
    expect(await agent.allocateUpTo(3, { report: false })).toEqual([claimed]);
    await cycle(PAST_DELAY_MS);
    expect(await handshakeHistory(claimed)).toEqual(['absent', 'marked-for-release', 'do-not-release']);
    expect(await releaseIps()).toEqual({
      [claimed]: 'do-not-release',
      ...statesFor(others, 'ready-for-release'),
    });

    for (let round = 0; round < 4; round++) await cycle();
    // cilium's excess is now 8 - 3 - 2 = 3: exactly the three others went, the claimed IP stayed.
    expect(ec2Ips()).toContain(claimed);
    expect(await poolIps()).toContain(claimed);
    for (const ip of others) expect(ec2Ips()).not.toContain(ip);
    expect(ec2Ips()).toHaveLength(5);
    expect(await marks()).toEqual({});
    expect(await releaseIps()).toEqual({});
    await expectInvariantsAtEveryVersion();
  });
});

describe('demand rising mid-handshake', () => {
  it('aborts what is no longer excess, restoring it to the pool, and releases only what still is', async () => {
    const { excess, kept } = await growThenShrink();
    await cycle();
    await cycle(PAST_DELAY_MS); // marked-for-release, answered ready
    await cycle(); // ready: out of the pool
    expect(await poolIps()).toEqual(kept);

    // Two new pods take the two spare pool IPs: used 4 → cilium's excess 8 - 4 - 2 = 2.
    const newlyUsed = await agent.allocateUpTo(4);
    expect(newlyUsed).toHaveLength(2);
    await cycle();
    const [first = '', second = '', third = '', fourth = ''] = excess;
    // The two lowest stay selected and are released; the other two are aborted and come back.
    expect(ec2Ips()).toEqual(sortIpv4([...kept, third, fourth]));
    expect(await poolIps()).toEqual(sortIpv4([...kept, third, fourth]));
    expect(await marks()).toEqual(statesFor([first, second], 'released'));
    for (const ip of [third, fourth]) {
      expect(await handshakeHistory(ip)).toEqual([
        'absent',
        'marked-for-release',
        'ready-for-release',
        'absent',
      ]);
    }

    // The restored IPs are usable again: the agent hands them out, and the pool grows back to its
    // watermark (the acknowledged marks are dropped in the same sweep, before the allocation).
    expect(await agent.allocateUpTo(6)).toEqual([third, fourth]);
    const summary = await cycle();
    expect(summary.reconciled).toEqual({ release: 1, 'needs-ips': 1 });
    await cycle();
    expect(await marks()).toEqual({});
    expect(ec2Ips()).toHaveLength(8);
    expect(await poolIps()).toEqual(ec2Ips());
    await expectInvariantsAtEveryVersion();
  });

  it('aborts the whole handshake when the watermark rises: nothing unassigned, every IP back in the pool', async () => {
    const { excess, kept } = await growThenShrink();
    await cycle();
    await cycle(PAST_DELAY_MS);
    await cycle(); // ready: out of the pool, not yet unassigned
    expect(await poolIps()).toEqual(kept);
    harness.ec2.calls.reset();

    // The user raises pre-allocate to 6: 8 - 2 - 6 = 0 excess.
    const node = await ciliumNode();
    await harness.ciliumNodes.patchMain(instance.privateDnsName, [
      { op: 'test', path: '/metadata/resourceVersion', value: node.metadata.resourceVersion },
      { op: 'add', path: '/spec/ipam/pre-allocate', value: 6 },
    ]);
    const summary = await cycle();
    expect(summary.reconciled).toEqual({ release: 1, 'knobs-changed': 1 });
    expect(harness.ec2.calls.count('UnassignPrivateIpAddresses')).toBe(0);
    expect(ec2Ips()).toEqual(sortIpv4([...kept, ...excess]));
    expect(await poolIps()).toEqual(ec2Ips());
    expect(await marks()).toEqual({});
    expect(await releaseIps()).toEqual({});
    for (const ip of excess) {
      expect(await handshakeHistory(ip)).toEqual([
        'absent',
        'marked-for-release',
        'ready-for-release',
        'absent',
      ]);
    }
    await expectInvariantsAtEveryVersion();
  });
});

describe('failures and concurrency', () => {
  /** Runs the node to the point where its excess is ready and out of the pool, one sweep from EC2. */
  async function readyToUnassign(): Promise<{ excess: string[]; kept: string[] }> {
    const shrunk = await growThenShrink();
    await cycle();
    await cycle(PAST_DELAY_MS);
    await cycle();
    expect(await marks()).toEqual(statesFor(shrunk.excess, 'ready-for-release'));
    return shrunk;
  }
  const releaseDependencies = () => ({
    ...harness.dependencies(),
    release: { enabled: true, delayMs: RELEASE_DELAY_MS },
  });

  it('backs off while another invocation holds the node: no EC2 call, no write', async () => {
    const { excess, kept } = await readyToUnassign();
    const record = await harness.table.store.get(instance.instanceId);
    if (!record) throw new Error('no record');
    const lease = { holder: 'allocator-elsewhere', expiresAtEpochMs: harness.clock.now() + 60_000 };
    await harness.table.store.put({ ...record, version: record.version + 1, lease }, record.version);
    harness.ec2.calls.reset();
    const outcome = await releaseExcess(instance.instanceId, releaseDependencies());
    expect(outcome).toEqual({ kind: 'busy', leaseHolder: 'allocator-elsewhere' });
    expect(harness.ec2.calls.mutating()).toBe(0);
    expect((await harness.table.store.get(instance.instanceId))?.version).toBe(record.version + 1);
    // The sweep leaves a leased node alone too, and takes it up once the lease has expired.
    expect((await cycle(1)).skipped).toEqual({ leased: 1 });
    expect((await cycle(60_000)).reconciled).toEqual({ release: 1, 'expired-lease': 1 });
    expect(await marks()).toEqual(statesFor(excess, 'released'));
    expect(ec2Ips()).toEqual(kept);
  });

  it('an UnassignPrivateIpAddresses that keeps failing leaves the marks ready and releases the claim', async () => {
    const { excess, kept } = await readyToUnassign();
    harness.ec2.faults.inject({
      action: 'UnassignPrivateIpAddresses',
      kind: 'server-error',
      times: Infinity,
    });
    await expect(releaseExcess(instance.instanceId, releaseDependencies())).rejects.toThrow();
    const record = await harness.table.store.get(instance.instanceId);
    expect(record?.lease).toBeUndefined();
    expect(await marks()).toEqual(statesFor(excess, 'ready-for-release'));
    expect(ec2Ips()).toEqual(sortIpv4([...kept, ...excess]));

    harness.ec2.faults.clear();
    await cycle();
    expect(ec2Ips()).toEqual(kept);
    expect(await marks()).toEqual(statesFor(excess, 'released'));
    await expectInvariantsAtEveryVersion();
  });

  it('an unassignment that happened but was never recorded (a crash) completes as released', async () => {
    const { excess, kept } = await readyToUnassign();
    const [eni] = harness.secondaryEnis(instance.instanceId);
    harness.ec2.state.unassignPrivateIpAddresses({
      networkInterfaceId: eni?.networkInterfaceId ?? '',
      privateIpAddresses: excess,
    });
    harness.ec2.calls.reset();
    await cycle();
    expect(harness.ec2.calls.count('UnassignPrivateIpAddresses')).toBe(0);
    expect(ec2Ips()).toEqual(kept);
    for (const ip of excess) {
      expect(await handshakeHistory(ip)).toEqual([
        'absent',
        'marked-for-release',
        'ready-for-release',
        'released',
        'absent',
      ]);
    }
    await cycle();
    expect(await marks()).toEqual({});
    await expectInvariantsAtEveryVersion();
  });
});

describe('release switched off', () => {
  it('marks nothing and unassigns nothing, whatever the excess', async () => {
    await growThenShrink();
    harness.ec2.calls.reset();
    for (let round = 0; round < 5; round++) {
      harness.clock.advance(RELEASE_DELAY_MS);
      const summary = await sweep(harness.sweepDependencies());
      expect(summary.skipped).toEqual({ 'in-sync': 1 });
    }
    expect(harness.ec2.calls.mutating()).toBe(0);
    expect(await marks()).toEqual({});
    expect(ec2Ips()).toHaveLength(8);
  });
});
