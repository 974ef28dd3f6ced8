import { describe, expect, it } from 'vitest';
import type { DetachedEni } from '../../../functions/core/ports.ts';
import {
  allocationMetrics,
  garbageCollectionMetrics,
  type MetricPoint,
  syncMetrics,
  tallySyncs,
} from '../../../functions/runtime/metrics.ts';

const detachedEni = (id: string): DetachedEni => ({
  id,
  mac: '02:00:00:00:00:01',
  primaryIp: '10.0.0.5',
  secondaryIps: [],
  prefixes: [],
  subnetId: 'subnet-a',
  securityGroupIds: [],
  tags: {},
  description: '',
  status: 'available',
});

const pointValue = (points: readonly MetricPoint[], name: string) =>
  points.find((point) => point.name === name)?.value;

describe('metric points', () => {
  it.each([
    {
      case: 'a new ENI, its repair, two assigns (one of a /28) and a refusal',
      outcome: {
        kind: 'reconciled' as const,
        recordVersion: 3,
        results: [
          {
            kind: 'created' as const,
            eni: detachedEni('eni-1'),
            deviceIndex: 1,
            attachmentId: 'a-1',
            fresh: true,
          },
          { kind: 'repaired' as const, eniId: 'eni-1' },
          { kind: 'assigned' as const, eniId: 'eni-0', ips: ['10.0.0.20', '10.0.0.21'], prefixes: [] },
          { kind: 'assigned' as const, eniId: 'eni-2', ips: [], prefixes: ['10.0.1.16/28'] },
          { kind: 'refused' as const, subnetId: 'subnet-a', refusal: 'subnet-full' as const },
        ],
        neededIps: 0,
      },
      expected: { ipam_interface_creation_ops: 1, ipam_ip_allocation_ops: 18, ipam_allocation_blocked: 0 },
    },
    {
      case: 'a blocked node',
      outcome: {
        kind: 'reconciled' as const,
        recordVersion: 2,
        results: [],
        neededIps: 8,
        blocked: { code: 'NoSuitableSubnet', message: 'none', atEpochMs: 1 },
      },
      expected: { ipam_needed_ips: 8, ipam_interface_creation_ops: 0, ipam_allocation_blocked: 1 },
    },
    {
      case: 'an ignored instance',
      outcome: { kind: 'ignored' as const, reason: 'not-in-cluster' as const, detail: 'x' },
      expected: { ipam_allocation_ignored_not_in_cluster: 1 },
    },
  ])('for allocation: $case', ({ outcome, expected }) => {
    const points = allocationMetrics(outcome);
    for (const [name, value] of Object.entries(expected)) expect(pointValue(points, name), name).toBe(value);
  });

  it('tallies syncs: writes, failures and refusals', () => {
    const points = syncMetrics(
      tallySyncs(
        [
          { instanceId: 'i-1', outcome: 'written', writes: 2, conflicts: 0 },
          { instanceId: 'i-2', outcome: 'refused-foreign', writes: 0, conflicts: 0 },
          { instanceId: 'i-3', outcome: 'in-sync', writes: 0, conflicts: 0 },
        ],
        1,
      ),
    );
    expect(pointValue(points, 'ipam_k8s_sync_nodes')).toBe(4);
    expect(pointValue(points, 'ipam_k8s_sync_writes')).toBe(2);
    expect(pointValue(points, 'ipam_k8s_sync_failures')).toBe(1);
    expect(pointValue(points, 'ipam_k8s_sync_refused_foreign')).toBe(1);
  });

  it('counts garbage-collected ENIs', () => {
    const points = garbageCollectionMetrics({
      candidates: 3,
      deleted: ['eni-1'],
      referenced: 1,
      tooYoung: 1,
      failed: 0,
    });
    expect(pointValue(points, 'ipam_eni_gc_deleted')).toBe(1);
    expect(pointValue(points, 'ipam_eni_gc_candidates')).toBe(3);
  });
});
