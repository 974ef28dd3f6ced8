import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  type CiliumNode,
  IPAM_IGNORE_ANNOTATION,
  RECORD_VERSION_ANNOTATION,
} from '../../../functions/core/ciliumnode.ts';
import type { InstanceRecord } from '../../emulators/ec2/index.ts';
import { isNonMutatingAction } from '../../emulators/ec2/throttling.ts';
import { type LocalCloud, startLocalCloud } from '../../local-cloud/local-cloud.ts';
import { checkStatusCoversSpec } from '../../support/invariants.ts';

/**
 * The hand-over from cilium-operator, as the runbook of infra/README.md does it, on the synthesized stack:
 * deployed paused while another allocator (cilium-operator, modelled here) serves every node;
 * the CiliumNodes annotated `ipam.cilium.io/ignore`; unpaused (the only template difference is
 * the functions' PAUSED variable). Every node must end up served by us, and no EC2 call may ever
 * name one of the other allocator's ENIs.
 */

let cloud: LocalCloud;
const mutatingCalls: { action: string; params: Readonly<Record<string, string>> }[] = [];

beforeAll(async () => {
  cloud = await startLocalCloud({
    dynamoDbEndpoint: inject('dynamoDbEndpoint'),
    context: { 'eni-ipam:paused': true },
    runSchedules: false,
    simulateAgents: false,
    // Lambda's async retry waits (1 and 2 minutes) in 1 and 2 seconds.
    timeScale: 60,
  });
  cloud.ec2.setBeforeApply((action, params) => {
    if (!isNonMutatingAction(action)) mutatingCalls.push({ action, params });
  });
});
afterAll(async () => {
  await cloud?.stop();
});

/** cilium-operator's work on a node: an ENI of its own at device 1 with IPs, published in the CiliumNode. */
async function servedByTheOperator(instance: InstanceRecord): Promise<string> {
  const { state } = cloud.ec2;
  const { networkInterface: eni } = state.createNetworkInterface({
    subnetId: instance.subnetId,
    securityGroupIds: [cloud.cluster.securityGroups.nodes.groupId],
    description: `Cilium-CNI (${instance.instanceId})`,
    secondaryPrivateIpAddressCount: 4,
    tags: { 'io.cilium/cilium-managed': 'true', 'io.cilium/cluster-name': 'default' },
  });
  state.attachNetworkInterface({
    networkInterfaceId: eni.networkInterfaceId,
    instanceId: instance.instanceId,
    deviceIndex: 1,
  });
  const ips = state.networkInterface(eni.networkInterfaceId)?.secondaryPrivateIpAddresses ?? [];
  await cloud.k8s.createCiliumNode({
    apiVersion: 'cilium.io/v2',
    kind: 'CiliumNode',
    metadata: { name: instance.privateDnsName },
    spec: {
      'instance-id': instance.instanceId,
      eni: { 'instance-type': instance.instanceType, 'first-interface-index': 1 },
      ipam: { pool: Object.fromEntries(ips.map((ip) => [ip, { resource: eni.networkInterfaceId }])) },
    },
  });
  return eni.networkInterfaceId;
}

const ciliumNode = async (instance: InstanceRecord) =>
  (await cloud.k8s.getCiliumNode(instance.privateDnsName)) as unknown as CiliumNode | undefined;

const namesAny = (params: Readonly<Record<string, string>>, eniIds: ReadonlySet<string>) =>
  Object.values(params).some((value) => eniIds.has(value));

describe('the hand-over from cilium-operator', () => {
  it('observes while paused, then serves every node without touching the other allocator’s ENIs', async () => {
    const instances = [
      cloud.launchInstance('m5.large'),
      cloud.launchInstance('t3.medium', { subnet: 'nodesB' }),
    ];
    const foreignEnis = new Set(await Promise.all(instances.map(servedByTheOperator)));
    await cloud.fireSchedules();
    await cloud.settle();

    // Paused: the functions ran (EC2 events and every schedule), nothing was written anywhere.
    const invoked = Object.values(cloud.functionStats()).reduce((sum, stats) => sum + stats.invocations, 0);
    expect(invoked).toBeGreaterThanOrEqual(5);
    expect(mutatingCalls).toEqual([]);
    expect((await cloud.records()).size).toBe(0);
    for (const instance of instances) {
      expect((await ciliumNode(instance))?.metadata.annotations?.[RECORD_VERSION_ANNOTATION]).toBeUndefined();
    }

    // Runbook step 1-3: Nodes annotated, agents restarted (they copy the annotation), verified.
    for (const instance of instances) {
      const current = (await ciliumNode(instance)) as CiliumNode;
      await cloud.k8s.putCiliumNode({
        ...current,
        metadata: { ...current.metadata, annotations: { [IPAM_IGNORE_ANNOTATION]: 'true' } },
      });
    }
    // Step 4: unpause (the redeploy changes only PAUSED), then the next sweep.
    await cloud.updateFunctionEnvironment({ PAUSED: 'false' });
    await cloud.fireSchedules();
    await cloud.settle();
    await cloud.fireSchedules();
    await cloud.settle();

    const records = await cloud.records();
    for (const instance of instances) {
      const record = records.get(instance.instanceId);
      const cn = (await ciliumNode(instance)) as CiliumNode;
      expect(record?.lifecycle, instance.instanceId).toBe('active');
      expect(cn.metadata.annotations?.[RECORD_VERSION_ANNOTATION]).toBe(String(record?.version));
      expect(cn.metadata.annotations?.[IPAM_IGNORE_ANNOTATION]).toBe('true');
      expect(checkStatusCoversSpec(cn)).toEqual([]);
      const ours = (record?.enis ?? []).filter((eni) => !foreignEnis.has(eni.id) && eni.deviceIndex > 0);
      expect(ours.length, `${instance.instanceId} has an ENI of ours`).toBeGreaterThan(0);
      const pool = Object.entries(cn.spec?.ipam?.pool ?? {});
      // Pre-allocate 8 from ENIs of ours, as far as the instance has room: a t3.medium has 3 ENI
      // slots of 5 secondary IPs each, and eth0 and the operator's ENI hold two of them.
      const expected = instance.instanceType === 't3.medium' ? 5 : 8;
      expect(
        pool.filter(([, allocation]) => ours.some((eni) => eni.id === allocation.resource)).length,
        `${instance.instanceId} (${instance.instanceType}) pool IPs on ENIs of ours`,
      ).toBeGreaterThanOrEqual(expected);
      // The operator's IPs nobody uses leave the pool through cilium's release handshake.
      const operatorIps = pool
        .filter(([, allocation]) => foreignEnis.has(allocation.resource ?? ''))
        .map(([ip]) => ip);
      expect(Object.keys(cn.status?.ipam?.['release-ips'] ?? {}).sort()).toEqual(operatorIps.sort());
    }
    expect(mutatingCalls.length).toBeGreaterThan(0);
    expect(mutatingCalls.filter((call) => namesAny(call.params, foreignEnis))).toEqual([]);
    expect(cloud.asyncFailures).toEqual([]);
    expect((await cloud.denials()).total, 'calls refused by IAM or RBAC').toBe(0);
  }, 120_000);
});
