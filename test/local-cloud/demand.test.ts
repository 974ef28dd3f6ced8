import { describe, expect, it } from 'vitest';
import type { ObservedVersion } from '../support/kubernetes.ts';
import { DemandTracker, renderDemand } from './demand.ts';
import { ipCapacityOf, nextPods, POOL_CAP } from './pod-churn.ts';

/** A stored CiliumNode version with `pool` pool IPs, the first `used` of them in use. */
function version(resourceVersion: number, pool: number, used: number, name = 'node-a'): ObservedVersion {
  const ips = Array.from({ length: pool }, (_, index) => `10.0.1.${index + 10}`);
  return {
    resourceVersion: String(resourceVersion),
    name,
    type: 'MODIFIED',
    object: {
      apiVersion: 'cilium.io/v2',
      kind: 'CiliumNode',
      metadata: { name, resourceVersion: String(resourceVersion) },
      spec: {
        'instance-id': 'i-1',
        ipam: { pool: Object.fromEntries(ips.map((ip) => [ip, { resource: 'eni-1' }])) },
      },
      status: {
        ipam: {
          used: Object.fromEntries(ips.slice(0, used).map((ip) => [ip, { owner: 'p', resource: 'eni-1' }])),
        },
      },
    } as never,
  };
}

describe('the demand tracker', () => {
  it('times a pod start from the version that crossed the watermark to the one whose pool grew', () => {
    const tracker = new DemandTracker();
    tracker.observe(version(1, 0, 0), 1_000); // registered: the first fill is not a pod start
    tracker.observe(version(2, 8, 0), 3_000);
    tracker.observe(version(3, 8, 3), 10_000); // 3 pods: 5 free, under the watermark of 8
    expect(tracker.waiting()).toEqual({ count: 1, oldestAtMs: 10_000 });
    tracker.observe(version(4, 8, 3), 10_200); // another write, still short
    tracker.observe(version(5, 11, 3), 10_700);
    expect(tracker.lastServed()).toEqual({
      nodeName: 'node-a',
      usedIps: 3,
      poolBefore: 8,
      poolAfter: 11,
      demandAtMs: 10_000,
      servedAtMs: 10_700,
      demandResourceVersion: '3',
      servedResourceVersion: '5',
    });
    expect(tracker.servedCount()).toBe(1);
    expect(renderDemand(tracker, 11_000)).toContain('pool 8 -> 11 in 0.70 s (rv 5); 1 served, none waiting');
  });

  it('drops a demand whose pods ended before the pool grew, and forgets a deleted node', () => {
    const tracker = new DemandTracker();
    tracker.observe(version(1, 8, 0), 0);
    tracker.observe(version(2, 8, 4), 100);
    tracker.observe(version(3, 8, 0), 200);
    tracker.observe(version(4, 8, 0, 'node-b'), 300);
    tracker.observe(version(5, 8, 2, 'node-b'), 400);
    tracker.observe({ ...version(6, 8, 2, 'node-b'), type: 'DELETED' }, 500);
    expect(tracker.servedCount()).toBe(0);
    expect(tracker.waiting()).toEqual({ count: 0 });
    expect(renderDemand(tracker, 600)).toBe('demand: no pod start served yet, none waiting');
  });
});

describe("the live cloud's pods", () => {
  const node = (pool: number, used: number) => version(1, pool, used).object as never;

  it('start past the watermark on a node without pods, end on a node with some, and stop at the cap', () => {
    expect(Object.keys(nextPods(node(8, 0)) ?? {})).toHaveLength(3);
    expect(Object.keys(nextPods(node(11, 0)) ?? {})).toHaveLength(6);
    expect(nextPods(node(11, 6))).toEqual({});
    expect(nextPods(node(0, 0))).toBeUndefined();
    expect(nextPods(node(POOL_CAP - 2, 0))).toBeUndefined();
    // m5.large: 3 ENIs of 10 IPv4 addresses, eth0 not ours: 18 IPs; a pool of 16 cannot take 3 more.
    expect(ipCapacityOf('m5.large')).toBe(18);
    expect(nextPods(node(15, 0), ipCapacityOf('m5.large'))).toBeDefined();
    expect(nextPods(node(16, 0), ipCapacityOf('m5.large'))).toBeUndefined();
  });
});
