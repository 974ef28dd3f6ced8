import { afterEach, describe, expect, it } from 'vitest';
import { UNAUTHORIZED_RETRY_DELAY_MS } from '../../functions/core/allocation-round.ts';
import {
  desiredOperatorError,
  desiredPool,
  desiredStatusEnis,
} from '../../functions/core/ciliumnode-render.ts';
import type { NodeRecord } from '../../functions/core/model.ts';
import { allocationMetrics } from '../../functions/runtime/metrics.ts';
import { allocateNode } from '../../functions/services/allocate-node.ts';
import type { IamIdentity, PolicyDocument } from '../emulators/ec2/index.ts';
import {
  ACCESS_KEY_ID,
  type AllocationHarness,
  CLUSTER_NAME,
  startAllocationHarness,
} from '../support/allocation-harness.ts';
import { SHARED_VPC_OWNER_ACCOUNT } from '../support/stack-policies.ts';

/**
 * The allocator under the stack's own IAM policies (the EC2 emulator authorizes every call): it
 * serves nodes with the defaults without a call its role may not make, never touches an ENI it did
 * not create, works in a shared VPC when told its owner, and a permission that is missing anyway
 * surfaces on the node and in a metric instead of being retried on every sweep.
 */

let harness: AllocationHarness;
afterEach(async () => {
  await harness?.close();
});

const OWNER_ACCOUNT = SHARED_VPC_OWNER_ACCOUNT;

function secondaryIpsByDevice(instanceId: string): Record<number, number> {
  return Object.fromEntries(
    harness.ec2.state
      .networkInterfaces({ instanceId })
      .map((eni) => [eni.attachment?.deviceIndex ?? -1, eni.secondaryPrivateIpAddresses.length]),
  );
}

async function recordOf(instanceId: string): Promise<NodeRecord> {
  const record = await harness.table.store.get(instanceId);
  if (record === undefined) throw new Error(`no record for ${instanceId}`);
  return record;
}

describe('an eth0 that EC2 created untagged', () => {
  it.each([0, 1])(
    'first-interface-index %i: the pool comes from an ENI we create, no call touches eth0, none is denied',
    async (firstInterfaceIndex) => {
      harness = await startAllocationHarness();
      const instance = harness.launch('m5.large');
      await harness.createCiliumNode(instance, { eni: { 'first-interface-index': firstInterfaceIndex } });
      const eth0 = harness.ec2.state.instanceNetworkInterfaces(instance.instanceId)[0]?.networkInterfaceId;

      await allocateNode(instance.instanceId, harness.dependencies());

      expect(secondaryIpsByDevice(instance.instanceId)).toEqual({ 0: 0, 1: 8 });
      expect(harness.ec2.calls.touching(eth0 ?? '')).toEqual([]);
      expect(harness.ec2.calls.denied()).toBe(0);
      const record = await recordOf(instance.instanceId);
      expect(record.enis.find((eni) => eni.deviceIndex === 0)?.foreign).toBe(true);
      expect(Object.keys(desiredPool(record))).toHaveLength(8);
    },
  );
});

describe('an ENI another controller created', () => {
  it('is never filled or touched though it has room at index 1; it keeps its slot, and the node is served from index 2', async () => {
    harness = await startAllocationHarness();
    const instance = harness.launch('m5.large');
    // cilium-operator's ENI from before the hand-over: its tags, not our ownership tag.
    const operatorEni = harness.ec2.state.createNetworkInterface({
      subnetId: harness.seed.subnets.podsA.subnetId,
      secondaryPrivateIpAddressCount: 2,
      tags: { 'io.cilium/cilium-managed': 'true', 'io.cilium/cluster-name': CLUSTER_NAME },
    }).networkInterface;
    harness.ec2.state.attachNetworkInterface({
      networkInterfaceId: operatorEni.networkInterfaceId,
      instanceId: instance.instanceId,
      deviceIndex: 1,
    });
    await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });

    await allocateNode(instance.instanceId, harness.dependencies());

    expect(harness.ec2.calls.touching(operatorEni.networkInterfaceId)).toEqual([]);
    expect(secondaryIpsByDevice(instance.instanceId)).toEqual({ 0: 0, 1: 2, 2: 8 });
    const record = await recordOf(instance.instanceId);
    const pool = desiredPool(record);
    expect(Object.values(pool).every((entry) => entry.resource !== operatorEni.networkInterfaceId)).toBe(
      true,
    );
    expect(Object.keys(pool)).toHaveLength(8);
    // Still published in status (the agent sees every ENI of its node).
    expect(Object.keys(desiredStatusEnis(record))).toContain(operatorEni.networkInterfaceId);

    // Nothing left to do: a second run makes no mutating call at all.
    const mutating = harness.ec2.calls.mutating();
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(harness.ec2.calls.mutating()).toBe(mutating);
  });
});

describe('a VPC shared with the cluster account through RAM', () => {
  it('is served when eni-ipam:vpcOwnerAccountId names the owner (subnet and VPC ARNs carry it)', async () => {
    harness = await startAllocationHarness({
      ec2: { vpcOwnerAccountId: OWNER_ACCOUNT },
      stackContext: { 'eni-ipam:vpcOwnerAccountId': OWNER_ACCOUNT },
    });
    const instance = harness.launch('m5.large');
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(secondaryIpsByDevice(instance.instanceId)).toEqual({ 0: 0, 1: 8 });
    expect(harness.ec2.calls.denied()).toBe(0);
  });

  it('without the key, creating an ENI there is denied and recorded on the node', async () => {
    harness = await startAllocationHarness({
      ec2: { vpcOwnerAccountId: OWNER_ACCOUNT },
      allowDeniedCalls: true,
    });
    const instance = harness.launch('m5.large');
    const outcome = await allocateNode(instance.instanceId, harness.dependencies());
    expect(outcome).toMatchObject({ kind: 'reconciled', deniedAction: 'CreateNetworkInterface' });
    expect((await recordOf(instance.instanceId)).lastError?.code).toBe('UnauthorizedOperation');
  });
});

describe('a statement missing from the role (the attach permission removed)', () => {
  function without(identity: IamIdentity, sid: string): IamIdentity {
    const policies = identity.policies.map(
      (policy): PolicyDocument => ({
        ...policy,
        Statement: [policy.Statement]
          .flat()
          .filter((statement) => (statement as { Sid?: string }).Sid !== sid),
      }),
    );
    return { ...identity, policies };
  }

  it('surfaces as UnauthorizedOperation on the node and in the metric, and is not retried on every sweep', async () => {
    harness = await startAllocationHarness({ allowDeniedCalls: true });
    harness.ec2.setIdentity(ACCESS_KEY_ID, without(harness.identity, 'AttachToClusterInstances'));
    const instance = harness.launch('m5.large');

    const outcome = await allocateNode(instance.instanceId, harness.dependencies());

    expect(outcome).toMatchObject({ kind: 'reconciled', deniedAction: 'AttachNetworkInterface' });
    expect(harness.ec2.calls.denied('AttachNetworkInterface')).toBe(1);
    const points = allocationMetrics(outcome);
    expect(points.find((point) => point.name === 'ipam_ec2_unauthorized')?.value).toBe(1);
    const record = await recordOf(instance.instanceId);
    expect(record.lastError?.code).toBe('UnauthorizedOperation');
    expect(desiredOperatorError(record)).toMatch(
      /^UnauthorizedOperation: ec2:AttachNetworkInterface was denied/,
    );
    // The fresh ENI that could not be attached was deleted again: nothing leaks.
    expect(harness.ec2.state.networkInterfaces({ status: 'available' })).toEqual([]);

    // The sweeps of the next minutes make no mutating call on the node.
    const mutating = harness.ec2.calls.mutating();
    for (let minute = 1; minute < UNAUTHORIZED_RETRY_DELAY_MS / 60_000; minute++) {
      harness.clock.advance(60_000);
      const again = await allocateNode(instance.instanceId, harness.dependencies());
      expect(again).toMatchObject({ kind: 'reconciled', blocked: { code: 'UnauthorizedOperation' } });
      expect(allocationMetrics(again).find((point) => point.name === 'ipam_ec2_unauthorized')?.value).toBe(0);
    }
    expect(harness.ec2.calls.mutating()).toBe(mutating);

    // Once the policy is fixed, the next attempt after the delay serves the node.
    harness.ec2.setIdentity(ACCESS_KEY_ID, harness.identity);
    harness.clock.advance(60_000);
    await allocateNode(instance.instanceId, harness.dependencies());
    expect(secondaryIpsByDevice(instance.instanceId)).toEqual({ 0: 0, 1: 8 });
    expect((await recordOf(instance.instanceId)).lastError).toBeUndefined();
  });
});
