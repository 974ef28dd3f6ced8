import { describe, expect, it } from 'vitest';
import { rateToMilliseconds, ScheduleExpressionError, Scheduler } from './scheduler.ts';
import type { RuleDefinition } from './template.ts';

describe('rateToMilliseconds', () => {
  it.each([
    { case: 'one minute', expression: 'rate(1 minute)', milliseconds: 60_000 },
    { case: 'minutes', expression: 'rate(5 minutes)', milliseconds: 300_000 },
    { case: 'hours', expression: 'rate(2 hours)', milliseconds: 7_200_000 },
    { case: 'one day', expression: 'rate(1 day)', milliseconds: 86_400_000 },
  ])('$case', ({ expression, milliseconds }) => {
    expect(rateToMilliseconds(expression)).toBe(milliseconds);
  });

  it.each([
    { case: 'a plural unit for 1', expression: 'rate(1 minutes)' },
    { case: 'a singular unit for 5', expression: 'rate(5 minute)' },
    { case: 'zero', expression: 'rate(0 minutes)' },
    { case: 'seconds', expression: 'rate(30 seconds)' },
    { case: 'cron', expression: 'cron(0 12 * * ? *)' },
  ])('refuses $case, as EventBridge does or as the local cloud cannot honour', ({ expression }) => {
    expect(() => rateToMilliseconds(expression)).toThrow(ScheduleExpressionError);
  });
});

describe('Scheduler', () => {
  const rule = (logicalId: string, scheduleExpression?: string, enabled = true): RuleDefinition => ({
    logicalId,
    enabled,
    ...(scheduleExpression ? { scheduleExpression } : { eventPattern: { source: ['aws.ec2'] } }),
    targets: [{ id: 'Target0', functionLogicalId: 'Function' }],
  });

  it('fires only enabled schedule rules, on demand, on the scaled period', async () => {
    const fired: string[] = [];
    const scheduler = new Scheduler(
      [rule('Every5', 'rate(5 minutes)'), rule('Pattern'), rule('Disabled', 'rate(1 minute)', false)],
      async (fire) => {
        fired.push(fire.logicalId);
      },
      60,
    );
    expect(scheduler.schedules()).toEqual([
      { logicalId: 'Every5', expression: 'rate(5 minutes)', periodMs: 5_000 },
    ]);
    await scheduler.fireAll();
    expect(fired).toEqual(['Every5']);
    scheduler.stop();
  });

  it('fires on its timer once started', async () => {
    let firings = 0;
    const scheduler = new Scheduler([rule('Fast', 'rate(1 minute)')], async () => void firings++, 3_000);
    scheduler.start();
    await new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (firings >= 2) {
          clearInterval(check);
          resolve();
        }
      }, 5);
    });
    scheduler.stop();
    expect(firings).toBeGreaterThanOrEqual(2);
  });
});
