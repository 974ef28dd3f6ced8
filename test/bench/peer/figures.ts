import { isNonMutatingAction } from '../../emulators/ec2/throttling.ts';
import { checkPoolRemovalsHandshaken, checkStatusCoversSpec } from '../../support/invariants.ts';
import { formatNumber } from '../floors.ts';
import { KUBERNETES_WRITE_VERBS } from '../phases/bench-cloud.ts';
import type { SideRun } from './run-side.ts';

/** One figure of the comparison: a side's value, in the unit given. */
export interface ComparisonFigure {
  readonly id: string;
  readonly label: string;
  readonly unit: string;
  readonly value: (run: SideRun) => number | undefined;
}

/** The figures, each read the same way off both sides' stand-ins. */
export const COMPARISON_FIGURES: readonly ComparisonFigure[] = [
  {
    id: 'last_node_ready',
    label: 'time until the last node is ready',
    unit: 's',
    value: (run) => (run.timedOut ? undefined : Math.max(0, ...[...run.readySeconds.values()])),
  },
  {
    id: 'mutating_calls_per_node',
    label: 'mutating EC2 calls per node',
    unit: 'calls',
    value: (run) =>
      accepted(run).filter((call) => !isNonMutatingAction(call.action)).length / run.nodeNames.length,
  },
  {
    id: 'non_mutating_calls_per_node',
    label: 'non-mutating EC2 calls per node',
    unit: 'calls',
    value: (run) =>
      accepted(run).filter((call) => isNonMutatingAction(call.action)).length / run.nodeNames.length,
  },
  {
    id: 'throttled_calls',
    label: 'throttled EC2 calls',
    unit: 'calls',
    value: (run) => run.burstCalls.filter((call) => call.outcome === 'throttled').length,
  },
  { id: 'demand_p50', label: 'demand to pool, p50', unit: 's', value: (run) => run.demand?.p50Seconds },
  { id: 'demand_p99', label: 'demand to pool, p99', unit: 's', value: (run) => run.demand?.p99Seconds },
  {
    id: 'kubernetes_writes_per_node',
    label: 'Kubernetes writes per node',
    unit: 'writes',
    value: (run) =>
      run.burstRequests.filter(
        (request) => KUBERNETES_WRITE_VERBS.has(request.verb) && request.statusCode < 300,
      ).length / run.nodeNames.length,
  },
  {
    id: 'status_covers_spec_violations',
    label: 'status-covers-spec violations (every resourceVersion)',
    unit: 'versions',
    value: (run) =>
      [...versionsOf(run).values()].flat().filter((version) => checkStatusCoversSpec(version).length > 0)
        .length,
  },
  {
    id: 'pool_removals_without_handshake',
    label: 'pool removals without the release handshake',
    unit: 'IPs',
    value: (run) =>
      [...versionsOf(run).values()].reduce(
        (sum, list) =>
          sum +
          list
            .slice(1)
            .reduce(
              (count, version, index) =>
                count + checkPoolRemovalsHandshaken(list[index] as (typeof list)[number], version).length,
              0,
            ),
        0,
      ),
  },
];

function accepted(run: SideRun) {
  return run.burstCalls.filter((call) => call.outcome !== 'throttled');
}

function versionsOf(run: SideRun) {
  return run.recorder.byNode(new Set(run.nodeNames));
}

/** ours / peer, or n/a. */
export function ratio(ours: number | undefined, peer: number | undefined): string {
  if (ours === undefined || peer === undefined) return 'n/a';
  if (peer === 0) return ours === 0 ? '-' : 'peer 0';
  return `${formatNumber(ours / peer, 2)}x`;
}

export interface ComparisonRow {
  readonly id: string;
  readonly label: string;
  readonly unit: string;
  readonly ours: number | undefined;
  readonly peers: readonly {
    readonly id: string;
    readonly value: number | undefined;
    readonly ratio: string;
  }[];
}

export function comparisonRows(ours: SideRun, peers: readonly SideRun[]): ComparisonRow[] {
  return COMPARISON_FIGURES.map((item) => {
    const ourValue = item.value(ours);
    return {
      id: item.id,
      label: item.label,
      unit: item.unit,
      ours: ourValue,
      peers: peers.map((peer) => {
        const value = item.value(peer);
        return { id: peer.side.id, value, ratio: ratio(ourValue, value) };
      }),
    };
  });
}

/** A fixed-width table: figure, ours, then each peer configuration and ours / it. */
export function renderComparison(rows: readonly ComparisonRow[], peers: readonly SideRun[]): string {
  const header = [
    'FIGURE',
    'OURS',
    ...peers.flatMap((peer) => [peer.side.label.toUpperCase(), 'OURS / PEER']),
    'UNIT',
  ];
  const lines = rows.map((row) => [
    row.label,
    formatNumber(row.ours),
    ...row.peers.flatMap((peer) => [formatNumber(peer.value), peer.ratio]),
    row.unit,
  ]);
  const widths = header.map((_, column) =>
    Math.max(...[header, ...lines].map((line) => (line[column] ?? '').length)),
  );
  return [header, ...lines]
    .map((line) =>
      line
        .map((cell, column) => cell.padEnd(widths[column] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}
