import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ENI_TAG_KEYS } from '../../functions/core/eni-ownership.ts';
import { allocateNode } from '../../functions/services/allocate-node.ts';
import { collectEniGarbage, drainNode, retireNode } from '../../functions/services/node-lifecycle.ts';
import { sweep } from '../../functions/services/sweep.ts';
import type { InstanceRecord } from '../emulators/ec2/index.ts';
import {
  type AllocationHarness,
  CLUSTER_NAME,
  startAllocationHarness,
} from '../support/allocation-harness.ts';

let harness: AllocationHarness;
beforeEach(async () => {
  harness = await startAllocationHarness();
});
afterEach(async () => {
  await harness.close();
});

const GC = { graceMs: 10 * 60_000, maxDeletionsPerRun: 50 };

async function reportUsed(instance: InstanceRecord, count: number): Promise<void> {
  const ips = harness.ec2.state
    .networkInterfaces({ instanceId: instance.instanceId })
    .flatMap((eni) => eni.secondaryPrivateIpAddresses.map((ip) => [ip, eni.networkInterfaceId] as const))
    .slice(0, count);
  const node = await harness.ciliumNodes.get(instance.privateDnsName);
  await harness.ciliumNodes.patchStatus(instance.privateDnsName, [
    { op: 'test', path: '/metadata/resourceVersion', value: node?.metadata.resourceVersion },
    {
      op: 'add',
      path: '/status',
      value: {
        ipam: { used: Object.fromEntries(ips.map(([ip, eni]) => [ip, { owner: 'pod', resource: eni }])) },
      },
    },
  ]);
}

function poolSize(instance: InstanceRecord): number {
  return harness.ec2.state
    .networkInterfaces({ instanceId: instance.instanceId })
    .reduce((sum, eni) => sum + eni.secondaryPrivateIpAddresses.length, 0);
}

describe('the sweep', () => {
  it('allocates for an instance whose launch event was never delivered', async () => {
    const instance = harness.launch('m5.large');
    const summary = await sweep(harness.sweepDependencies());
    expect(summary.reconciled).toEqual({ 'no-record': 1 });
    expect(poolSize(instance)).toBe(8);
    expect(await harness.table.store.get(instance.instanceId)).toMatchObject({ version: expect.any(Number) });
  });

  it('grows a node whose used IPs rose past the watermark, within one sweep', async () => {
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(poolSize(instance)).toBe(8);
    await reportUsed(instance, 8);
    harness.ec2.calls.reset();
    const summary = await sweep(harness.sweepDependencies());
    expect(summary.reconciled).toEqual({ 'needs-ips': 1 });
    // The cluster listing serves the reconcile too: the instance is not described again.
    expect(harness.ec2.calls.count('DescribeInstances')).toBe(1);
    // used 8 of 8: needed = 8 → 1 more on ENI 1 (full at 9), 7 on a new ENI.
    expect(poolSize(instance)).toBe(16);
  });

  it('touches nothing when every node is in sync: no EC2 mutation, no per-node describe, no write', async () => {
    const instances = [harness.launch('m5.large'), harness.launch('t3.medium')];
    for (const instance of instances) await allocateNode(instance.instanceId, harness.dependencies());
    harness.ec2.calls.reset();
    const versions = await Promise.all(instances.map((i) => harness.table.store.get(i.instanceId)));
    const summary = await sweep(harness.sweepDependencies());
    expect(summary.skipped).toEqual({ 'in-sync': 2 });
    expect(harness.ec2.calls.mutating()).toBe(0);
    expect(harness.ec2.calls.count('DescribeInstances')).toBe(1);
    expect(harness.ec2.calls.count('DescribeNetworkInterfaces')).toBe(0);
    expect(await Promise.all(instances.map((i) => harness.table.store.get(i.instanceId)))).toEqual(versions);
  });

  it('repairs drift in both directions: an IP added out of band and an ENI removed out of band', async () => {
    const instance = harness.launch('m5.4xlarge');
    await harness.createCiliumNode(instance, {
      eni: { 'first-interface-index': 1 },
      ipam: { 'min-allocate': 40 },
    });
    await allocateNode(instance.instanceId, harness.dependencies());
    const [first, second] = harness.secondaryEnis(instance.instanceId);
    expect([first?.secondaryPrivateIpAddresses.length, second?.secondaryPrivateIpAddresses.length]).toEqual([
      29, 11,
    ]);
    harness.clock.advance(harness.settings.consistencyGraceMs + 1);

    // Out of band: someone assigns one more IP to the second ENI, and detaches and deletes the first.
    const outOfBand = harness.ec2.state.assignPrivateIpAddresses({
      networkInterfaceId: second?.networkInterfaceId ?? '',
      secondaryPrivateIpAddressCount: 1,
    }).addresses;
    harness.ec2.state.detachNetworkInterface(first?.attachment?.attachmentId ?? '');
    harness.ec2.state.deleteNetworkInterface(first?.networkInterfaceId ?? '');

    const summary = await sweep(harness.sweepDependencies());
    expect(summary.reconciled).toEqual({ drift: 1 });
    const record = await harness.table.store.get(instance.instanceId);
    const recordedIds = record?.enis.map((eni) => eni.id);
    expect(recordedIds).not.toContain(first?.networkInterfaceId);
    expect(record?.enis.find((eni) => eni.id === second?.networkInterfaceId)?.secondaryIps).toEqual(
      expect.arrayContaining(outOfBand),
    );
    // And the pool is regrown to min-allocate 40: the surviving ENI filled first, then a fresh one.
    expect(poolSize(instance)).toBe(40);
    expect(record?.enis.reduce((sum, eni) => sum + eni.secondaryIps.length, 0)).toBe(40);
  });

  it('retires the record of an instance that terminated while its event was lost', async () => {
    const instance = harness.launch('m5.large');
    await allocateNode(instance.instanceId, harness.dependencies());
    harness.ec2.state.setInstanceState(instance.instanceId, 'terminated');
    const summary = await sweep(harness.sweepDependencies());
    expect(summary.retired).toBe(1);
    const record = await harness.table.store.get(instance.instanceId);
    expect(record?.lifecycle).toBe('retired');
    expect(record?.expiresAtEpochSeconds).toBeGreaterThan(harness.clock.now() / 1000);
  });

  it('keeps the ENIs and record of a stopped instance', async () => {
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
    await allocateNode(instance.instanceId, harness.dependencies());
    harness.ec2.state.setInstanceState(instance.instanceId, 'stopped');
    const summary = await sweep(harness.sweepDependencies());
    expect(summary.retired).toBe(0);
    expect((await harness.table.store.get(instance.instanceId))?.lifecycle).toBe('active');
    expect(harness.secondaryEnis(instance.instanceId)).toHaveLength(1);
  });
});

describe('termination', () => {
  it('deletes the ENIs that were not delete-on-termination and retires the record', async () => {
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance, {
      eni: { 'first-interface-index': 1, 'delete-on-termination': false },
      ipam: { 'min-allocate': 12 },
    });
    await allocateNode(instance.instanceId, harness.dependencies());
    const ours = harness.secondaryEnis(instance.instanceId).map((eni) => eni.networkInterfaceId);
    expect(ours).toHaveLength(2);
    harness.ec2.state.setInstanceState(instance.instanceId, 'terminated');

    const outcome = await retireNode(instance.instanceId, harness.lifecycle());
    expect(outcome).toEqual({ kind: 'retired', deletedEniIds: ours, leftForGarbageCollection: 0 });
    expect(harness.ec2.state.networkInterfaces({ status: 'available' })).toEqual([]);
    expect(await retireNode(instance.instanceId, harness.lifecycle())).toEqual({
      kind: 'skipped',
      reason: 'already-retired',
    });
  });

  it('leaves a live instance alone when a stale termination event arrives', async () => {
    const instance = harness.launch('m5.large');
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(await retireNode(instance.instanceId, harness.lifecycle())).toEqual({
      kind: 'skipped',
      reason: 'instance-alive',
    });
  });

  it('stops allocating to a node after a spot interruption warning', async () => {
    const instance = harness.launch('m5.large');
    await harness.createCiliumNode(instance);
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(await drainNode(instance.instanceId, harness.lifecycle())).toBe('drained');
    await reportUsed(instance, 8);
    const mutating = harness.ec2.calls.mutating();
    const outcome = await allocateNode(instance.instanceId, harness.dependencies());
    expect(outcome).toMatchObject({ kind: 'ignored', reason: 'not-active' });
    expect(harness.ec2.calls.mutating()).toBe(mutating);
  });
});

describe('ENI garbage collection', () => {
  function createDetachedEni(tags: Record<string, string>): string {
    return harness.ec2.state.createNetworkInterface({ subnetId: harness.seed.subnets.nodesA.subnetId, tags })
      .networkInterface.networkInterfaceId;
  }
  const ourTags = (createdAtEpochMs: number) => ({
    [ENI_TAG_KEYS.clusterName]: CLUSTER_NAME,
    [ENI_TAG_KEYS.owner]: 'serverless-eni-ipam',
    [ENI_TAG_KEYS.instanceId]: 'i-00000000000000abc',
    [ENI_TAG_KEYS.createdAt]: String(createdAtEpochMs),
  });

  it('deletes only our detached ENIs past the grace period that no live record references', async () => {
    const now = harness.clock.now();
    const leaked = createDetachedEni(ourTags(now - GC.graceMs - 1));
    const young = createDetachedEni(ourTags(now - 1_000));
    const foreign = createDetachedEni({ team: 'someone-else' });
    const otherCluster = createDetachedEni({
      ...ourTags(now - GC.graceMs - 1),
      [ENI_TAG_KEYS.clusterName]: 'other',
    });

    const summary = await collectEniGarbage(harness.lifecycle(), GC);
    expect(summary.deleted).toEqual([leaked]);
    const remaining = harness.ec2.state
      .networkInterfaces({ status: 'available' })
      .map((eni) => eni.networkInterfaceId);
    expect(remaining.sort()).toEqual([young, foreign, otherCluster].sort());
  });

  it('cleans up an ENI a crashed invocation created for an instance that then terminated', async () => {
    const instance = harness.launch('m5.large');
    const orphan = createDetachedEni({
      ...ourTags(harness.clock.now()),
      [ENI_TAG_KEYS.instanceId]: instance.instanceId,
    });
    harness.ec2.state.setInstanceState(instance.instanceId, 'terminated');
    expect((await collectEniGarbage(harness.lifecycle(), GC)).deleted).toEqual([]);
    harness.clock.advance(GC.graceMs + 1);
    expect((await collectEniGarbage(harness.lifecycle(), GC)).deleted).toEqual([orphan]);
  });
});
