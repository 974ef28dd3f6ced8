import { describe, expect, it } from 'vitest';
import {
  type CiliumNode,
  IPAM_IGNORE_ANNOTATION,
  RECORD_TABLE_ANNOTATION,
  RECORD_VERSION_ANNOTATION,
} from '../../../functions/core/ciliumnode.ts';
import { desiredPool } from '../../../functions/core/ciliumnode-render.ts';
import { checkStatusCoversSpec } from '../../../functions/core/invariants.ts';
import type { NodeRecord } from '../../../functions/core/model.ts';
import { appliedRecordVersion, planSyncStep } from '../../../functions/core/sync-plan.ts';
import { eniFixture, nodeRecordFixture } from '../../fixtures/node-records.ts';
import { FakeCiliumNodeServer, isWrite } from './support.ts';

/**
 * The record-version annotation counts in one table (its name); the sync marks every CiliumNode
 * it writes `ipam.cilium.io/ignore: "true"` and puts the mark back when it is gone.
 */

const recordAt = (version: number): NodeRecord =>
  nodeRecordFixture({ version, enis: [eniFixture(0, 0), eniFixture(1, 3)] });

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

function publishedFrom(table: string, version: number): FakeCiliumNodeServer {
  const server = new FakeCiliumNodeServer(undefined);
  converge(recordAt(version), server, table);
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
      reason: 'stale-record',
    });
  });

  it('adopts a node published from another table: a restored table starts its versions again', () => {
    const server = publishedFrom('Nodes-A', 40);
    const restored = recordAt(2);
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
      reason: 'stale-record',
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
