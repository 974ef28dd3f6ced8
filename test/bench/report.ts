import { formatNumber, formatRatio, ratioTo } from './floors.ts';
import type { BenchReport } from './phases/assemble-report.ts';

/**
 * One measured figure beside its reference: a FLOOR (the least the design could do; ratio >= 1
 * means how far above it we are), a LIMIT (a ceiling we must stay under; ratio < 1 is headroom) or
 * a REFERENCE (an outside measurement to compare with, neither bound).
 */
export interface Figure {
  readonly id: string;
  readonly label: string;
  readonly value: number | undefined;
  readonly reference: number | undefined;
  readonly referenceKind: 'floor' | 'limit' | 'reference';
  readonly unit: string;
  /** value / reference, when both are known and the reference is not 0. */
  readonly ratio: number | undefined;
  /** How the ratio prints (`1.50x`, `at floor`, `above floor 0`, `n/a`). */
  readonly ratioText: string;
  /** Where the figure comes from and how the reference is derived. */
  readonly note: string;
}

export function figure(
  input: Omit<Figure, 'ratio' | 'ratioText' | 'referenceKind'> & {
    referenceKind?: Figure['referenceKind'];
  },
): Figure {
  return {
    ...input,
    referenceKind: input.referenceKind ?? 'floor',
    ratio: ratioTo(input.value, input.reference),
    ratioText: formatRatio(input.value, input.reference),
  };
}

function referencePrefix(item: Figure): string {
  return item.referenceKind === 'floor' ? '' : item.referenceKind === 'limit' ? 'limit ' : 'ref ';
}

/** A fixed-width table: figure, value, floor or limit, ratio, unit. */
export function renderTable(figures: readonly Figure[]): string {
  const header = ['FIGURE', 'VALUE', 'FLOOR (or limit, ref)', 'RATIO', 'UNIT'];
  const rows = figures.map((item) => [
    item.label,
    formatNumber(item.value),
    `${referencePrefix(item)}${formatNumber(item.reference)}`,
    item.ratioText,
    item.unit,
  ]);
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, column) =>
        column === 0 || column === 4 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0),
      )
      .join('  ')
      .trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

/** A Markdown table of the figures, then each figure's note. */
export function renderMarkdownFigures(figures: readonly Figure[]): string {
  const cell = (text: string) => text.replaceAll('|', '\\|');
  return [
    '| figure | value | floor (or limit, ref) | ratio | unit |',
    '| --- | ---: | ---: | ---: | --- |',
    ...figures.map(
      (item) =>
        `| ${cell(item.label)} | ${formatNumber(item.value)} | ${referencePrefix(item)}${formatNumber(item.reference)} | ${item.ratioText} | ${cell(item.unit)} |`,
    ),
    '',
    'How each figure is measured and its floor derived:',
    '',
    ...figures.map((item) => `- **${cell(item.label)}**: ${item.note}`),
  ].join('\n');
}

/** The Markdown report: the run's settings and outcome, the figures, the chart, the raw counts. */
export function renderMarkdownReport(report: BenchReport): string {
  const { options, burst } = report;
  return [
    `# Bench: ${options.nodes} nodes launched at once`,
    '',
    `Mix \`${options.mix}\`, first-interface-index ${options.firstInterfaceIndex}, prefix delegation ${options.prefixDelegation ? 'on' : 'off'}, duplicate events ${options.duplicateEvents}, scale ${options.scale}x, ${options.concurrency} containers per function. Started ${report.startedAt}, ${report.wallSeconds.toFixed(0)} s wall time (burst ${burst.realSeconds.toFixed(1)} real s).`,
    '',
    `Ready: ${report.readyNodes}/${options.nodes}${burst.timedOut ? ' (TIMED OUT)' : ''}; invariant violations over every CiliumNode version: ${burst.invariantViolations}; new ENIs ${burst.newEnis}; assigns needed ${burst.floorAssigns}; ENIs left detached ${burst.leakedEnis}; function errors logged ${burst.functionErrors}; EC2 running events ${burst.eventsDelivered} (${burst.eventsDuplicated} duplicated).`,
    '',
    renderMarkdownFigures(report.figures),
    '',
    '![nodes ready over time](nodes-ready.svg)',
    '',
    `EC2 calls during the burst by action: ${Object.entries(burst.ec2CallsByAction)
      .map(([action, count]) => `${action} ${count}`)
      .join(', ')}.`,
    '',
    `Allocation outcomes: ${Object.entries(burst.allocations)
      .map(([kind, count]) => `${kind} ${count}`)
      .join(
        ', ',
      )}. DynamoDB: ${burst.dynamoDb.putAttempts} PutItem attempts, ${burst.dynamoDb.putSucceeded} succeeded, ${burst.dynamoDb.conditionFailures} conditional-check failures, ${burst.dynamoDb.getItems} GetItem.`,
    '',
  ].join('\n');
}
