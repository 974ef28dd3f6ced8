import { describe, expect, it } from 'vitest';
import { type CiliumNode, RECORD_VERSION_ANNOTATION } from '../../../functions/core/ciliumnode.ts';
import { desiredPool, desiredStatusEnis } from '../../../functions/core/ciliumnode-render.ts';
import { checkStatusCoversSpec } from '../../../functions/core/invariants.ts';
import type { EniState, NodeRecord } from '../../../functions/core/model.ts';
import { planSyncStep, type SyncWriteStep } from '../../../functions/core/sync-plan.ts';
import { eniFixture, nodeRecordFixture } from '../../fixtures/node-records.ts';
import { seededRandom } from '../../support/seeded-random.ts';
import { FakeCiliumNodeServer, isWrite } from './support.ts';

/**
 * Random interleavings of record writes, concurrent syncs and agent writes, at the planning level.
 * Each sync round reads the CiliumNode, then the record, plans, and writes later (the write fails
 * when anything was stored in between), as `syncNode` does. Checked at every stored version:
 * invariant 1; checked over the run: no successful sync write was planned from an older record
 * version than an earlier successful one (invariant 2).
 */

function randomEnis(random: () => number): EniState[] {
  const enis = [eniFixture(0, 0)];
  for (let deviceIndex = 1; deviceIndex <= 3; deviceIndex++) {
    if (random() < 0.6) {
      const withPrefix = random() < 0.3;
      enis.push(
        eniFixture(deviceIndex, Math.floor(random() * 5), {
          prefixes: withPrefix ? [`10.0.${16 + deviceIndex}.${64 + 16 * Math.floor(random() * 4)}/28`] : [],
        }),
      );
    }
  }
  return enis;
}

type RecordReadOrder = 'node-then-record' | 'record-then-node';

interface SyncActor {
  phase: 'idle' | 'planned';
  planned?: SyncWriteStep;
  plannedFrom?: number;
  /** The record the sync planned from; after a successful write it plans its next step from it again. */
  record?: NodeRecord;
}

interface RunResult {
  invariantViolations: string[];
  backwardsWrites: string[];
  final: CiliumNode | undefined;
  latest: NodeRecord;
}

function run(seed: number, order: RecordReadOrder, steps = 400): RunResult {
  const random = seededRandom(seed);
  const server = new FakeCiliumNodeServer();
  let latest = nodeRecordFixture({ version: 1, enis: randomEnis(random) });
  const recordHistory = [latest];
  const syncs: SyncActor[] = [{ phase: 'idle' }, { phase: 'idle' }, { phase: 'idle' }];
  const invariantViolations: string[] = [];
  const backwardsWrites: string[] = [];
  let highestWrittenVersion = 0;

  const check = (stored: CiliumNode, what: string) => {
    for (const violation of checkStatusCoversSpec(stored)) {
      invariantViolations.push(`seed ${seed}, ${what}: ${violation.message}`);
    }
  };

  for (let step = 0; step < steps; step++) {
    const roll = random();
    if (roll < 0.1) {
      latest = { ...latest, version: latest.version + 1, enis: randomEnis(random) };
      recordHistory.push(latest);
    } else if (roll < 0.2) {
      if (server.get() === undefined) continue;
      // Agent: restart (replaces annotations, keeps the pool) or report usage on /status.
      const stored = server.writeAsAgent((cn) => {
        if (random() < 0.5) {
          cn.metadata.annotations = {};
        } else {
          const pool = Object.keys(cn.spec?.ipam?.pool ?? {});
          const used = pool.filter(() => random() < 0.3);
          cn.status = {
            ...cn.status,
            ipam: { ...cn.status?.ipam, used: Object.fromEntries(used.map((ip) => [ip, { owner: 'pod' }])) },
          };
        }
      });
      check(stored, 'agent write');
    } else {
      const sync = syncs[Math.floor(random() * syncs.length)] as SyncActor;
      if (sync.phase === 'idle') {
        // Read the node, then the latest record; in the naive order the record was read earlier,
        // so a slow sync may hold one of the last few versions.
        const cn = server.get();
        const record =
          order === 'node-then-record'
            ? latest
            : (recordHistory[Math.max(0, recordHistory.length - 1 - Math.floor(random() * 3))] as NodeRecord);
        const planned = planSyncStep(record, cn);
        if (isWrite(planned)) {
          sync.phase = 'planned';
          sync.planned = planned;
          sync.plannedFrom = plannedVersion(planned, record);
          sync.record = record;
        }
      } else {
        const planned = sync.planned as SyncWriteStep;
        sync.phase = 'idle';
        let stored: CiliumNode;
        try {
          stored = server.apply(planned);
        } catch {
          continue; // conflict: re-read and re-plan on the next turn
        }
        check(stored, `${planned.kind} from v${sync.plannedFrom}`);
        const from = sync.plannedFrom ?? 0;
        if (from < highestWrittenVersion) {
          backwardsWrites.push(`seed ${seed}: ${planned.kind} from v${from} after v${highestWrittenVersion}`);
        }
        highestWrittenVersion = Math.max(highestWrittenVersion, from);
        // As syncNode does: the write's response is the next CiliumNode read, and the record it was
        // planned from is planned from again, without a re-read.
        const next = planSyncStep(sync.record as NodeRecord, stored);
        if (isWrite(next)) {
          sync.phase = 'planned';
          sync.planned = next;
          sync.plannedFrom = plannedVersion(next, sync.record as NodeRecord);
        }
      }
    }
  }
  // Let one sync finish with the latest record.
  for (let round = 0; round < 10; round++) {
    const planned = planSyncStep(latest, server.get());
    if (!isWrite(planned)) break;
    check(server.apply(planned), `final ${planned.kind}`);
  }
  return { invariantViolations, backwardsWrites, final: server.get(), latest };
}

function plannedVersion(step: SyncWriteStep, record: NodeRecord): number {
  if (step.kind === 'create') return Number(step.object.metadata.annotations?.[RECORD_VERSION_ANNOTATION]);
  return step.kind === 'status' ? record.version : step.recordVersion;
}

const seeds = Array.from({ length: 60 }, (_, i) => ({ seed: 1000 + i }));

describe('sync interleavings (node read, then record read, as syncNode does)', () => {
  it.each(seeds)('seed $seed: invariant 1 at every version, never backwards, converges', ({ seed }) => {
    const result = run(seed, 'node-then-record');
    expect(result.invariantViolations).toEqual([]);
    expect(result.backwardsWrites).toEqual([]);
    expect(result.final?.spec?.ipam?.pool).toEqual(desiredPool(result.latest));
    expect(result.final?.status?.eni?.enis).toEqual(desiredStatusEnis(result.latest));
  });
});

describe('the harness itself', () => {
  it('detects backwards writes when a sync plans from a record read before the node (naive order)', () => {
    const backwards = seeds.flatMap(({ seed }) => run(seed, 'record-then-node').backwardsWrites);
    expect(backwards.length).toBeGreaterThan(0);
    // Invariant 1 still holds in that order: it never depends on which version a write came from.
    const violations = seeds.flatMap(({ seed }) => run(seed, 'record-then-node').invariantViolations);
    expect(violations).toEqual([]);
  });
});
