import { describe, expect, it } from 'vitest';
import {
  type CiliumNode,
  IPAM_IGNORE_ANNOTATION,
  RECORD_TABLE_ANNOTATION,
  RECORD_VERSION_ANNOTATION,
} from '../../../functions/core/ciliumnode.ts';
import { desiredPool } from '../../../functions/core/ciliumnode-render.ts';
import type { NodeRecord } from '../../../functions/core/model.ts';
import { planSyncStep } from '../../../functions/core/sync-plan.ts';
import { appliedRecordVersion } from '../../../functions/core/table-generation.ts';
import { eniFixture, nodeRecordFixture } from '../../fixtures/node-records.ts';
import { checkStatusCoversSpec } from '../../support/invariants.ts';
import { FakeCiliumNodeServer, isWrite } from './support.ts';

/**
 * The record-version annotation counts in one table (its name); the sync marks every CiliumNode
 * it writes `ipam.cilium.io/ignore: "true"` and puts the mark back when it is gone.
 */

/** A record version the allocator reconciled with EC2 in `table` (its stamp names it). */
const recordAt = (version: number, table = 'Nodes-A', ips = 3): NodeRecord =>
  nodeRecordFixture({ version, reconciledInTable: table, enis: [eniFixture(0, 0), eniFixture(1, ips)] });

/** Plans and applies until a no-op, checking invariant 1 at every version; the step kinds. */
function converge(record: NodeRecord, server: FakeCiliumNodeServer, table: string): string[] {
  const kinds: string[] = [];
  for (let step = 0; step < 10; step++) {
    const planned = planSyncStep(record, server.get(), table);
    kinds.push(
      planned.kind === 'none' || planned.kind === 'refuse'
        ? `${planned.kind}:${planned.reason}`
        : planned.kind,
    );
    if (!isWrite(planned)) return kinds;
    expect(checkStatusCoversSpec(server.apply(planned))).toEqual([]);
  }
  throw new Error(`no convergence: ${kinds.join(', ')}`);
}

function publishedFrom(table: string, version: number, ips = 3): FakeCiliumNodeServer {
  const server = new FakeCiliumNodeServer(undefined);
  converge(recordAt(version, table, ips), server, table);
  return server;
}

describe('the table generation of the applied version', () => {
  it('creates CiliumNodes that name the table and carry the ignore annotation', () => {
    const server = new FakeCiliumNodeServer(undefined);
    converge(recordAt(1), server, 'Nodes-A');
    expect(server.get()?.metadata.annotations).toEqual({
      [RECORD_VERSION_ANNOTATION]: '1',
      [RECORD_TABLE_ANNOTATION]: 'Nodes-A',
      [IPAM_IGNORE_ANNOTATION]: 'true',
    });
  });

  it('still refuses an older version of the same table (never backwards)', () => {
    const server = publishedFrom('Nodes-A', 7);
    expect(planSyncStep(recordAt(3), server.get(), 'Nodes-A')).toEqual({
      kind: 'none',
      reason: 'stale',
    });
  });

  it('adopts a node published from another table: a restored table starts its versions again', () => {
    const server = publishedFrom('Nodes-A', 40);
    const restored = recordAt(2, 'Nodes-A-restored');
    expect(converge(restored, server, 'Nodes-A-restored').at(-1)).toBe('none:in-sync');
    const cn = server.get() as CiliumNode;
    expect(cn.metadata.annotations?.[RECORD_TABLE_ANNOTATION]).toBe('Nodes-A-restored');
    expect(appliedRecordVersion(cn, 'Nodes-A-restored')).toBe(2);
    expect(cn.spec?.ipam?.pool).toEqual(desiredPool(restored));
  });

  it('counts a version written before tables were named as this table’s', () => {
    const server = publishedFrom('Nodes-A', 5);
    server.writeAsAgent((cn) => {
      delete cn.metadata.annotations?.[RECORD_TABLE_ANNOTATION];
    });
    expect(planSyncStep(recordAt(4), server.get(), 'Nodes-A')).toEqual({
      kind: 'none',
      reason: 'stale',
    });
    expect(converge(recordAt(6), server, 'Nodes-A').at(-1)).toBe('none:in-sync');
    expect(server.get()?.metadata.annotations?.[RECORD_TABLE_ANNOTATION]).toBe('Nodes-A');
  });
});

describe('ipam.cilium.io/ignore', () => {
  it('is put back on an in-sync node that lost it, with nothing else changed', () => {
    const server = publishedFrom('Nodes-A', 3);
    server.writeAsAgent((cn) => {
      delete cn.metadata.annotations?.[IPAM_IGNORE_ANNOTATION];
    });
    const before = server.get()?.spec;
    expect(converge(recordAt(3), server, 'Nodes-A')).toEqual(['spec', 'none:in-sync']);
    expect(server.get()?.metadata.annotations?.[IPAM_IGNORE_ANNOTATION]).toBe('true');
    expect(server.get()?.spec).toEqual(before);
  });
});

describe('a record reconciled with EC2 in another table (a point-in-time restore)', () => {
  const OLD = 'Nodes@2026-01-01T00:00:00.000Z';
  const RESTORED = 'Nodes-restored@2026-06-01T00:00:00.000Z';

  it('is not published until the allocator has stamped it in this table, so no pool IP is dropped', () => {
    const server = publishedFrom(OLD, 9, 5);
    const poolBefore = server.get()?.spec?.ipam?.pool;
    // The restore point's item: fewer IPs than EC2 (and the pool) have since, the old table's stamp.
    const restored = recordAt(2, OLD, 3);
    expect(planSyncStep(restored, server.get(), RESTORED)).toEqual({
      kind: 'none',
      reason: 'unreconciled',
    });
    expect(planSyncStep({ ...restored, reconciledInTable: undefined }, server.get(), RESTORED)).toEqual({
      kind: 'none',
      reason: 'unreconciled',
    });
    expect(server.get()?.spec?.ipam?.pool).toEqual(poolBefore);
    // The allocator re-observed EC2 for the restored table: the record is complete and stamped.
    const reconciled = recordAt(3, RESTORED, 5);
    expect(converge(reconciled, server, RESTORED).at(-1)).toBe('none:in-sync');
    expect(server.get()?.metadata.annotations?.[RECORD_TABLE_ANNOTATION]).toBe(RESTORED);
    expect(Object.keys(server.get()?.spec?.ipam?.pool ?? {})).toEqual(Object.keys(poolBefore ?? {}));
  });

  it('is not used to create a CiliumNode either', () => {
    expect(planSyncStep(recordAt(1, OLD), undefined, RESTORED)).toEqual({
      kind: 'none',
      reason: 'unreconciled',
    });
  });

  it('tells a table re-created under the same name from the one it replaces', () => {
    const recreated = 'Nodes@2026-03-01T00:00:00.000Z';
    expect(planSyncStep(recordAt(2, OLD), publishedFrom(OLD, 9).get(), recreated)).toEqual({
      kind: 'none',
      reason: 'unreconciled',
    });
    const server = publishedFrom(OLD, 9);
    expect(converge(recordAt(1, recreated), server, recreated).at(-1)).toBe('none:in-sync');
    expect(appliedRecordVersion(server.get() as CiliumNode, recreated)).toBe(1);
    expect(appliedRecordVersion(server.get() as CiliumNode, OLD)).toBeUndefined();
  });
});

describe('the order of table generations (a sync of the old deployment still running)', () => {
  const OLD = 'Nodes@2026-01-01T00:00:00.000Z';
  const NEW = 'Nodes-restored@2026-06-01T00:00:00.000Z';

  it('never lets a sync of an older table write over a CiliumNode a newer table has claimed', () => {
    const server = publishedFrom(NEW, 2, 5);
    const before = server.get();
    // The old deployment's record: fewer IPs than the new deployment has handed out.
    expect(planSyncStep(recordAt(40, OLD, 3), before, OLD)).toEqual({ kind: 'none', reason: 'superseded' });
    expect(server.get()).toEqual(before);
  });

  it('adopts from an older table, and from a bare name an earlier release wrote', () => {
    const server = publishedFrom(OLD, 40);
    expect(converge(recordAt(2, NEW), server, NEW).at(-1)).toBe('none:in-sync');
    const legacy = publishedFrom('Nodes-other', 40);
    expect(converge(recordAt(2, NEW), legacy, NEW).at(-1)).toBe('none:in-sync');
    expect(legacy.get()?.metadata.annotations?.[RECORD_TABLE_ANNOTATION]).toBe(NEW);
  });

  it('counts a bare name of its own table as its own, and rewrites it with the creation time', () => {
    const server = publishedFrom('Nodes', 5);
    expect(planSyncStep(recordAt(4, OLD), server.get(), OLD)).toEqual({
      kind: 'none',
      reason: 'stale',
    });
    expect(converge(recordAt(5, OLD), server, OLD)).toEqual(['spec', 'none:in-sync']);
    expect(server.get()?.metadata.annotations?.[RECORD_TABLE_ANNOTATION]).toBe(OLD);
  });
});
