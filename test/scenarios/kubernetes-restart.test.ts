import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import { allocateNode } from '../../functions/services/allocate-node.ts';
import { syncNode } from '../../functions/services/sync-node.ts';
import type { InstanceRecord } from '../emulators/ec2/index.ts';
import type { ControlPlane } from '../peers/kubernetes/control-plane.ts';
import { type AllocationHarness, startAllocationHarness } from '../support/allocation-harness.ts';
import { checkRightNode, checkStatusCoversSpec } from '../support/invariants.ts';

/**
 * Faults only a real server shows: etcd, or kube-apiserver, killed with SIGKILL in the middle of
 * a burst of allocations and their publishing syncs, and started again. What failed is retried as the
 * next trigger would retry it (an EventBridge redelivery, the sweep); afterwards nothing is lost
 * (every node's pool is all its EC2 addresses, published at its record's version), invariant 1 and
 * the right-node check hold at every version the server stored (a watch that reconnected through
 * the restart saw them all).
 */

let harness: AllocationHarness;
let controlPlane: ControlPlane;

beforeEach(async () => {
  // A server of its own: each test kills and restarts it.
  harness = await startAllocationHarness({ ownKubernetes: true });
  if (harness.k8s.controlPlane === undefined) throw new Error('these scenarios need the real kube-apiserver');
  controlPlane = harness.k8s.controlPlane;
});
afterEach(async () => {
  await harness.close();
});

/** Allocates until it succeeds, as redelivered events and the sweep would; returns the failures seen. */
async function allocateUntilServed(instance: InstanceRecord): Promise<number> {
  let failures = 0;
  let lastError: unknown;
  for (let attempt = 1; attempt <= 60; attempt++) {
    try {
      await allocateNode(instance.instanceId, harness.publishingDependencies());
      const node = (await harness.k8s.getCiliumNode(instance.privateDnsName)) as CiliumNode | undefined;
      const pool = Object.keys(node?.spec?.ipam?.pool ?? {}).length;
      if (pool >= 8) return failures;
      lastError = `an allocation that ended with a published pool of ${pool}`;
    } catch (error) {
      lastError = error;
      failures++;
    }
    // A claim the killed request left behind lapses; the next trigger comes later.
    harness.clock.advance(harness.settings.leaseDurationMs + 1);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`${instance.instanceId} was never served; the last failure: ${String(lastError)}`);
}

async function expectServedAndSound(instances: readonly InstanceRecord[]): Promise<void> {
  for (const instance of instances) {
    const inEc2 = harness
      .secondaryEnis(instance.instanceId)
      .flatMap((eni) => eni.secondaryPrivateIpAddresses)
      .sort();
    // The allocation leaves its last version (the delete-on-termination flag) to the stream's sync.
    await syncNode(instance.instanceId, {
      store: harness.table.store,
      ciliumNodes: harness.ciliumNodesAs('Sync'),
      log: harness.dependencies().log,
    });
    const record = await harness.table.store.get(instance.instanceId);
    const node = (await harness.k8s.getCiliumNode(instance.privateDnsName)) as unknown as CiliumNode;
    expect(node.metadata.annotations?.['serverless-eni-ipam.io/record-version']).toBe(
      String(record?.version),
    );
    // Nothing lost, nothing doubled: the pool is exactly the addresses EC2 assigned.
    expect(Object.keys(node.spec?.ipam?.pool ?? {}).sort()).toEqual(inEc2);
    expect(new Set(inEc2).size).toBe(inEc2.length);

    const versions = await harness.k8s.history(instance.privateDnsName);
    expect(versions.length).toBeGreaterThan(1);
    for (const version of versions.filter((entry) => entry.type !== 'DELETED')) {
      const object = version.object as unknown as CiliumNode;
      expect(checkStatusCoversSpec(object), `resourceVersion ${version.resourceVersion}`).toEqual([]);
      expect(checkRightNode(object, instance.instanceId)).toEqual([]);
    }
  }
}

describe.each([
  { process: 'etcd', restart: () => controlPlane.restartEtcd({ downMs: 500 }) },
  { process: 'kube-apiserver', restart: () => controlPlane.restartApiServer({ downMs: 500 }) },
])('$process killed and restarted in the middle of a burst', ({ process, restart }) => {
  it('loses nothing: every node is served once it is back, invariant 1 at every version', async () => {
    const instances = Array.from({ length: 6 }, () => harness.launch('m5.large'));
    for (const instance of instances) await harness.createCiliumNode(instance);
    let served = 0;
    const burst = Promise.all(
      instances.map(async (instance) => {
        const failures = await allocateUntilServed(instance);
        served++;
        return failures;
      }),
    );
    // Kill it while the burst is under way.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const servedBeforeTheKill = served;
    await restart();
    const failures = await burst;
    await expectServedAndSound(instances);
    // The burst really met the restart: nodes were still being served when the server died.
    expect(servedBeforeTheKill).toBeLessThan(instances.length);
    // What the run met, for the record (the kill lands at a different step on every run).
    console.info(
      `${process} restart mid-burst: ${servedBeforeTheKill} of ${instances.length} served before the kill, ${failures.reduce((sum, count) => sum + count, 0)} invocations failed and were retried`,
    );
  });
});
