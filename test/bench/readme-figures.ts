import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { formatNumber } from './floors.ts';
import type { Figure } from './report.ts';

/**
 * The root README's table of current figures, written by the bench (`npm run bench --
 * --write-readme`), never by hand: the block between the two markers is replaced with the figures
 * below, the date, the commit and the command that measured them.
 */

export const FIGURES_BEGIN = '<!-- figures:begin -->';
export const FIGURES_END = '<!-- figures:end -->';

/** The figures the README shows, in its order (the rest stay in bench.md). */
export const README_FIGURE_IDS: readonly string[] = [
  'time_to_last_ready',
  'mutating_calls_per_new_eni',
  'mutating_calls_per_node',
  'non_mutating_calls_per_node',
  'throttled_retries',
  'denied_ec2_calls',
  'denied_k8s_requests',
  'denied_lambda_invokes',
  'single_node_round_trips',
  'single_node_round_trips_warm',
  'k8s_writes_per_changing_sync',
  'k8s_writes_per_noop_sync',
  'demand_to_pool_watcher_p50',
  'demand_to_pool_watcher_p99',
  'demand_to_pool_sweep_alone_p99',
  'recovery_after_kill_p50',
  'recovery_after_kill_max',
  'init_ms_vs_naive_Allocate',
  'init_ms_vs_naive_Sync',
  'sweep_cost_lambda_ms_5000',
  'sweep_cost_rcu_5000',
];

/** Where the figures come from. */
export interface Provenance {
  /** `YYYY-MM-DD`. */
  readonly date: string;
  /** `git rev-parse --short HEAD`. */
  readonly commit: string;
  /** The command line that measured them. */
  readonly command: string;
}

function referenceText(item: Figure): string {
  const prefix = item.referenceKind === 'floor' ? '' : item.referenceKind === 'limit' ? 'limit ' : 'ref ';
  return item.reference === undefined ? 'n/a' : `${prefix}${formatNumber(item.reference)}`;
}

/** The block's Markdown, markers included: the README's figures, then where they come from. */
export function renderReadmeFigures(figures: readonly Figure[], provenance: Provenance): string {
  const byId = new Map(figures.map((item) => [item.id, item]));
  const shown = README_FIGURE_IDS.flatMap((id) => (byId.has(id) ? [byId.get(id) as Figure] : []));
  const cell = (text: string) => text.replaceAll('|', '\\|');
  return [
    FIGURES_BEGIN,
    '| figure | value | floor (or limit) | ratio |',
    '| --- | ---: | ---: | ---: |',
    ...shown.map(
      (item) =>
        `| ${cell(item.label)} | ${formatNumber(item.value)} ${cell(item.unit)} | ${referenceText(item)} | ${item.ratioText} |`,
    ),
    '',
    `Measured ${provenance.date} at commit \`${provenance.commit}\` with \`${provenance.command}\`.`,
    FIGURES_END,
  ].join('\n');
}

/** `readme` with the block between the markers replaced; throws when the markers are missing. */
export function replaceFiguresBlock(readme: string, block: string): string {
  const begin = readme.indexOf(FIGURES_BEGIN);
  const end = readme.indexOf(FIGURES_END);
  if (begin === -1 || end === -1 || end < begin) {
    throw new Error(`README.md has no ${FIGURES_BEGIN} … ${FIGURES_END} block to write the figures into`);
  }
  return readme.slice(0, begin) + block + readme.slice(end + FIGURES_END.length);
}

/**
 * Writes the bench's figures into the README at the repository root, with today's date, the
 * commit checked out and `npm run bench` with `args` (the flag that asked for it left out).
 */
export function writeReadmeFigures(figures: readonly Figure[], args: readonly string[]): void {
  const readmePath = resolve(import.meta.dirname, '..', '..', 'README.md');
  const commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  const rest = args.filter((arg) => arg !== '--write-readme');
  const provenance: Provenance = {
    date: new Date().toISOString().slice(0, 10),
    commit,
    command: rest.length === 0 ? 'npm run bench' : `npm run bench -- ${rest.join(' ')}`,
  };
  const block = renderReadmeFigures(figures, provenance);
  writeFileSync(readmePath, replaceFiguresBlock(readFileSync(readmePath, 'utf8'), block));
  console.log(`figures written to ${readmePath}`);
}
