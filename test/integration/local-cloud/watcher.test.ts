import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { CiliumNode } from '../../../functions/core/ciliumnode.ts';
import type { InstanceRecord } from '../../emulators/ec2/index.ts';
import { writeUsedIps } from '../../local-cloud/cilium-agent.ts';
import { type LocalCloud, startLocalCloud } from '../../local-cloud/local-cloud.ts';

/**
 * The watcher as deployed, on the synthesized stack: the Watch function (its role: its own table
 * and lambda:InvokeFunction on the allocate function; its Kubernetes group: list and watch) hands
 * a node whose demand crossed the watermark to the allocate function through Lambda's Invoke API,
 * with no sweep running. Every EC2 call, Kubernetes request and invoke is authorized by the
 * caller's own synthesized role or group: none may be denied.
 */

/** One cloud for the file (kube-apiserver and the synthesized stack); the second test pauses it. */
let cloud: LocalCloud;
beforeAll(async () => {
  cloud = await startLocalCloud({
    dynamoDbEndpoint: inject('dynamoDbEndpoint'),
    runSchedules: false,
    // One Watch invocation ends on its own within the test.
    environment: { WATCH_SECONDS: '6', DRAIN_SECONDS: '5' },
  });
}, 240_000);
afterAll(async () => {
  await cloud?.stop();
});

async function ciliumNodeOf(local: LocalCloud, instance: InstanceRecord): Promise<CiliumNode> {
  return (await local.k8s.getCiliumNode(instance.privateDnsName)) as unknown as CiliumNode;
}

/** Invocations of the allocate function so far (stats are keyed by logical id). */
const allocateInvocations = (local: LocalCloud) =>
  Object.entries(local.functionStats())
    .filter(([logicalId]) => logicalId.startsWith('Allocate'))
    .reduce((sum, [, stats]) => sum + stats.invocations, 0);

const poolSize = (node: CiliumNode) => Object.keys(node.spec?.ipam?.pool ?? {}).length;

/** The agent giving `count` pods a pool IP each, in status.ipam.used (a status update, as the agent writes it). */
async function startPods(local: LocalCloud, instance: InstanceRecord, count: number): Promise<void> {
  const outcome = await writeUsedIps(local.k8s, instance.privateDnsName, (node) =>
    Object.fromEntries(
      Object.keys(node.spec?.ipam?.pool ?? {})
        .slice(0, count)
        .map((ip, index) => [ip, { owner: `default/pod-${index}`, resource: '' }]),
    ),
  );
  expect(outcome).toBe('written');
}

/** Whether the Watch function's list (what its watch starts from) has been answered. */
async function watcherListed(local: LocalCloud): Promise<boolean> {
  const lists = await local.k8s.requests({ verb: 'list' });
  return lists.some((request) => /WatchRole/.test(request.user ?? ''));
}

async function readyNode(local: LocalCloud): Promise<InstanceRecord> {
  const instance = local.launchInstance('m5.large');
  await local.settle();
  expect(poolSize(await ciliumNodeOf(local, instance))).toBe(8);
  return instance;
}

describe('the deployed watcher on the local cloud', () => {
  it('hands a node whose demand crossed the watermark to the allocate function, and nothing is denied', async () => {
    const local = cloud;
    const instance = await readyNode(local);
    const invokesBefore = allocateInvocations(local);
    const watching = local.invoke('Watch', { task: 'watch' });
    // Its watch starts from its list's resourceVersion: a write after the list reaches it.
    await local.waitUntil(() => watcherListed(local), { description: 'the watcher listed' });
    await startPods(local, instance, 5);
    await local.waitUntil(async () => poolSize(await ciliumNodeOf(local, instance)) === 13, {
      timeoutMs: 10_000,
      description: 'the pool grew to 13',
    });
    const result = await watching;

    expect(result).toMatchObject({
      status: 'succeeded',
      payload: { outcome: 'watched', served: { allocate: 1, failed: 0, paused: 0 } },
    });
    expect(allocateInvocations(local) - invokesBefore).toBe(1);
    expect(await local.denials()).toMatchObject({ total: 0 });
    const watchRequests = (await local.k8s.requests()).filter((request) =>
      /WatchRole/.test(request.user ?? ''),
    );
    expect(new Set(watchRequests.map((request) => request.verb))).toEqual(new Set(['list', 'watch']));
  });

  it('paused, watches and hands nothing over', async () => {
    const local = cloud;
    // What a deploy with `eni-ipam:paused` changes: the functions' PAUSED variable.
    await local.settle();
    await local.updateFunctionEnvironment({ PAUSED: 'true' });
    const instance = local.launchInstance('m5.large');
    await local.settle();
    // Its agent registered a CiliumNode with an empty pool: demand the watcher sees at once.
    expect(await ciliumNodeOf(local, instance)).toBeDefined();
    const invokesBefore = allocateInvocations(local);
    const result = await local.invoke('Watch', { task: 'watch' });

    expect(result).toMatchObject({
      status: 'succeeded',
      payload: { served: { allocate: 0, release: 0, failed: 0, paused: 1, askedAgain: 0 } },
    });
    expect(allocateInvocations(local) - invokesBefore).toBe(0);
    expect(poolSize(await ciliumNodeOf(local, instance))).toBe(0);
    expect(await local.denials()).toMatchObject({ total: 0 });
  });
});
