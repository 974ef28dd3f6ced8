import { describe, expect, it } from 'vitest';
import { FIGURES_BEGIN, FIGURES_END, renderReadmeFigures, replaceFiguresBlock } from './readme-figures.ts';
import { figure } from './report.ts';

const provenance = { date: '2026-12-04', commit: 'abc1234', command: 'npm run bench -- --nodes 50' };

describe("the README's figures", () => {
  it('shows the chosen figures in their order, with floor, ratio, date, commit and command', () => {
    const figures = [
      figure({
        id: 'not_shown',
        label: 'a figure only bench.md has',
        value: 1,
        reference: 1,
        unit: 'x',
        note: '',
      }),
      figure({
        id: 'non_mutating_calls_per_node',
        label: 'non-mutating EC2 calls per node',
        value: 2.16,
        reference: 2,
        unit: 'calls/node',
        note: '',
      }),
      figure({
        id: 'time_to_last_ready',
        label: 'time until the last node is ready',
        value: 45.47,
        reference: 43.2,
        unit: 'simulated s',
        note: '',
      }),
      figure({
        id: 'denied_ec2_calls',
        label: 'EC2 calls denied by IAM',
        value: 0,
        reference: 0,
        unit: 'calls',
        note: '',
      }),
    ];
    expect(renderReadmeFigures(figures, provenance).split('\n')).toEqual([
      FIGURES_BEGIN,
      '| figure | value | floor (or limit) | ratio |',
      '| --- | ---: | ---: | ---: |',
      '| time until the last node is ready | 45.47 simulated s | 43.2 | 1.05x |',
      '| non-mutating EC2 calls per node | 2.16 calls/node | 2 | 1.08x |',
      '| EC2 calls denied by IAM | 0 calls | 0 | at floor |',
      '',
      'Measured 2026-12-04 at commit `abc1234` with `npm run bench -- --nodes 50`.',
      FIGURES_END,
    ]);
  });

  it('replaces only the block between the markers, and refuses a README without them', () => {
    const readme = `# title\n\n${FIGURES_BEGIN}\nold table\n${FIGURES_END}\n\n## next\n`;
    expect(replaceFiguresBlock(readme, `${FIGURES_BEGIN}\nnew\n${FIGURES_END}`)).toBe(
      `# title\n\n${FIGURES_BEGIN}\nnew\n${FIGURES_END}\n\n## next\n`,
    );
    expect(() => replaceFiguresBlock('# no block\n', 'x')).toThrow(/no <!-- figures:begin -->/);
  });
});
