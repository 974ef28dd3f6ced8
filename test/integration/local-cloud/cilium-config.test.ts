import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { CiliumNode } from '../../../functions/core/ciliumnode.ts';
import { ownershipTags } from '../../../functions/core/eni-ownership.ts';
import { registerCiliumNode } from '../../local-cloud/cilium-agent.ts';
import { type LocalCloud, startLocalCloud } from '../../local-cloud/local-cloud.ts';

/**
 * Before a node's agent registers its CiliumNode, the allocator places the node's first IPs with
 * the knobs the agent will register, read from the cluster's `cilium-config` ConfigMap by the
 * allocate function's own identity (the Role of `infra/kubernetes/rbac.yaml`); the stack's
 * defaults (first interface index 0 here) where the ConfigMap is absent. The synthesized stack runs
 * on the local cloud; allocations are invoked directly so each outcome is the invocation's own.
 * eth0 is tagged as ours (a launch template's tags), so the first interface index alone decides
 * whether it is filled.
 */
describe('pre-agent knobs from cilium-config', () => {
  let cloud: LocalCloud;

  beforeAll(async () => {
    cloud = await startLocalCloud({
      dynamoDbEndpoint: inject('dynamoDbEndpoint'),
      runSchedules: false,
      ec2Events: false,
      simulateAgents: false,
    });
  }, 240_000);
  afterAll(async () => {
    await cloud?.stop();
  });

  const eth0Ours = ownershipTags('my-cluster', 'launch-template');
  const running = (instanceId: string) => ({
    version: '0',
    id: `running-${instanceId}`,
    'detail-type': 'EC2 Instance State-change Notification',
    source: 'aws.ec2',
    account: '123456789012',
    time: new Date().toISOString(),
    region: 'us-east-1',
    resources: [],
    detail: { 'instance-id': instanceId, state: 'running' },
  });
  /** Device index → secondary IPs of the node's record (ENIs without any left out). */
  const ipsByDeviceIndex = async (instanceId: string) => {
    const record = (await cloud.records()).get(instanceId);
    return Object.fromEntries(
      (record?.enis ?? [])
        .filter((eni) => eni.secondaryIps.length > 0)
        .map((eni) => [eni.deviceIndex, eni.secondaryIps.length]),
    );
  };
  const configMapReads = () =>
    cloud.k8s.requests({ resource: 'configmaps', verb: 'get', name: 'cilium-config' });

  it('without cilium-config, uses the stack defaults (the first interface index 0: eth0)', async () => {
    const instance = cloud.launchInstance('m5.large', { primaryNetworkInterfaceTags: eth0Ours });
    const result = await cloud.invoke('Allocate', running(instance.instanceId));
    expect(result).toMatchObject({ status: 'succeeded', payload: { status: 'allocated' } });
    expect(await ipsByDeviceIndex(instance.instanceId)).toEqual({ 0: 8 });
    // Read by the allocate function's identity, once, and absent.
    expect(await configMapReads()).toEqual([
      expect.objectContaining({
        name: 'cilium-config',
        statusCode: 404,
        user: expect.stringMatching(/assumed-role\/AllocateRole\//),
      }),
    ]);
  });

  it('with eni-first-interface-index 1, puts the pool on an ENI at device index 1, where the agent will use it', async () => {
    await cloud.k8s.putConfigMap('kube-system', 'cilium-config', {
      ipam: 'eni',
      'eni-first-interface-index': '1',
      'eni-tags': '{}',
    });
    const reads = (await configMapReads()).length;
    const instance = cloud.launchInstance('m5.large', { primaryNetworkInterfaceTags: eth0Ours });
    const result = await cloud.invoke('Allocate', running(instance.instanceId));
    expect(result).toMatchObject({ status: 'succeeded', payload: { status: 'allocated' } });
    expect(await ipsByDeviceIndex(instance.instanceId)).toEqual({ 1: 8 });
    expect((await configMapReads()).slice(reads)).toEqual([expect.objectContaining({ statusCode: 200 })]);

    // The agent registers the knob the ConfigMap gave it; the published pool is all usable to it.
    await cloud.drainStream();
    await registerCiliumNode(cloud.k8s, instance.privateDnsName, instance.instanceId, {
      eni: { 'first-interface-index': 1 },
    });
    await cloud.invoke('Sync', { instanceId: instance.instanceId });
    const ciliumNode = (await cloud.k8s.getCiliumNode(instance.privateDnsName)) as unknown as CiliumNode;
    const pool = Object.values(ciliumNode.spec?.ipam?.pool ?? {}).map((entry) => entry.resource);
    const enis = ciliumNode.status?.eni?.enis ?? {};
    expect(pool).toHaveLength(8);
    for (const eniId of pool) expect(enis[eniId ?? '']?.number).toBe(1);

    // The sweep (one ConfigMap read for every node) finds the agent's knobs equal to the ones the
    // IPs were placed with: no knob change, no need; only the agent's protocol is recorded now that
    // it registered. (The first node, placed before the ConfigMap existed, is reconciled to its new knobs.)
    const enisBefore = (await cloud.records()).get(instance.instanceId)?.enis;
    const sweepReads = (await configMapReads()).length;
    const sweep = await cloud.invoke('Sweep', { task: 'sweep' });
    expect(sweep).toMatchObject({
      status: 'succeeded',
      payload: { reconciled: { 'protocol-changed': 1 }, failed: [] },
    });
    expect((await configMapReads()).length - sweepReads).toBe(1);
    expect((await cloud.records()).get(instance.instanceId)?.enis).toEqual(enisBefore);
  });

  it('records the agent’s pre-allocate and prefix-delegation knobs for the node, and plans by them', async () => {
    await cloud.k8s.putConfigMap('kube-system', 'cilium-config', {
      ipam: 'eni',
      'eni-disable-prefix-delegation': 'true',
      'ipam-pre-allocate': '4',
    });
    const instance = cloud.launchInstance('t3.medium');
    await cloud.invoke('Allocate', running(instance.instanceId));
    const record = (await cloud.records()).get(instance.instanceId);
    expect(record?.knobs).toMatchObject({ disablePrefixDelegation: true, preAllocate: 4 });
    expect(record?.enis.flatMap((eni) => eni.prefixes)).toEqual([]);
    expect(record?.enis.flatMap((eni) => eni.secondaryIps)).toHaveLength(4);
  });

  it('refuses a malformed value, naming the key, and writes nothing', async () => {
    await cloud.k8s.putConfigMap('kube-system', 'cilium-config', { 'eni-first-interface-index': 'one' });
    const instance = cloud.launchInstance('m5.large', { primaryNetworkInterfaceTags: eth0Ours });
    const mutating = cloud.ec2.calls.mutating();
    const result = await cloud.invoke('Allocate', running(instance.instanceId));
    expect(result).toMatchObject({
      status: 'failed',
      error: {
        errorType: 'CiliumConfigError',
        errorMessage: expect.stringContaining(
          'ConfigMap kube-system/cilium-config, key eni-first-interface-index',
        ),
      },
    });
    expect(cloud.ec2.calls.mutating()).toBe(mutating);
    expect((await cloud.records()).get(instance.instanceId)).toBeUndefined();
    const sweep = await cloud.invoke('Sweep', { task: 'sweep' });
    expect(sweep).toMatchObject({ status: 'failed', error: { errorType: 'CiliumConfigError' } });
    expect(cloud.ec2.calls.mutating()).toBe(mutating);
    expect((await cloud.records()).get(instance.instanceId)).toBeUndefined();
  });

  it('was never refused by RBAC, and read no other ConfigMap', async () => {
    const requests = await cloud.k8s.requests({ resource: 'configmaps' });
    expect(requests.length).toBeGreaterThan(0);
    expect(requests.every((request) => request.name === 'cilium-config' && request.verb === 'get')).toBe(
      true,
    );
    expect(requests.filter((request) => request.statusCode === 403)).toEqual([]);
  });
});
