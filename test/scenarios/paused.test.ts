import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CiliumNodePort } from '../../functions/core/ciliumnode.ts';
import { allocateNode } from '../../functions/services/allocate-node.ts';
import { sweep } from '../../functions/services/sweep.ts';
import { syncNode } from '../../functions/services/sync-node.ts';
import { type AllocationHarness, startAllocationHarness } from '../support/allocation-harness.ts';

/**
 * `eni-ipam:paused` (the hand-over from cilium-operator, the rollback to it): the functions run
 * and observe, and nothing is allocated or written: no mutating EC2 call, no node record, no
 * CiliumNode write.
 */
let paused: AllocationHarness;
beforeAll(async () => {
  paused = await startAllocationHarness({ settings: { paused: true } });
});
afterAll(async () => {
  await paused.close();
});

describe('a paused stack', () => {
  it('allocates nothing on an EC2 event, and says so', async () => {
    const instance = paused.launch('m5.large');
    await paused.createCiliumNode(instance);
    paused.ec2.calls.reset();
    expect(await allocateNode(instance.instanceId, paused.dependencies())).toMatchObject({
      kind: 'ignored',
      reason: 'paused',
    });
    expect(paused.ec2.calls.count()).toBe(0);
    expect(await paused.table.store.get(instance.instanceId)).toBeUndefined();
  });

  it('sweeps as an observer: counts the nodes it would reconcile, touches none', async () => {
    const before = (await paused.k8s.listCiliumNodes()).map((cn) => cn.metadata.resourceVersion);
    paused.launch('t3.medium');
    paused.ec2.calls.reset();
    const summary = await sweep(paused.sweepDependencies());
    expect(summary.skipped.paused).toBe(summary.clusterInstances);
    expect(summary.reconciled).toEqual({});
    expect(paused.ec2.calls.mutating()).toBe(0);
    expect((await paused.table.store.listPage()).records).toEqual([]);
    expect((await paused.k8s.listCiliumNodes()).map((cn) => cn.metadata.resourceVersion)).toEqual(before);
  });

  it('writes no CiliumNode, even for a record it has', async () => {
    const served = await startAllocationHarness();
    try {
      const instance = served.launch('m5.large');
      await allocateNode(instance.instanceId, served.dependencies());
      // The harness's CiliumNode client is the full adapter (reads and writes).
      const deps = {
        store: served.table.store,
        ciliumNodes: served.dependencies().ciliumNodes as CiliumNodePort,
        log: served.dependencies().log,
      };
      expect(await syncNode(instance.instanceId, { ...deps, paused: true })).toMatchObject({
        outcome: 'paused',
        writes: 0,
      });
      expect(await served.k8s.listCiliumNodes()).toEqual([]);
      expect(await syncNode(instance.instanceId, deps)).toMatchObject({ outcome: 'written' });
      expect(await served.k8s.listCiliumNodes()).toHaveLength(1);
    } finally {
      await served.close();
    }
  });
});
