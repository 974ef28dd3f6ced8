import { randomUUID } from 'node:crypto';
import type { RuleDefinition } from './template.ts';

/**
 * EventBridge schedule rules (`ScheduleExpression: rate(...)`): each fires on its rate, divided by
 * `timeScale` (10 = ten times faster than AWS), and on demand (`fireAll`). Like EventBridge, a
 * firing does not wait for the previous one's invocations. `cron(...)` expressions are refused:
 * the stack uses none, and approximating one would mis-time it silently.
 */

export class ScheduleExpressionError extends Error {
  override readonly name = 'ScheduleExpressionError';
}

const RATE_UNITS_MS: Readonly<Record<string, number>> = {
  minute: 60_000,
  minutes: 60_000,
  hour: 3_600_000,
  hours: 3_600_000,
  day: 86_400_000,
  days: 86_400_000,
};

/** `rate(1 minute)`, `rate(5 minutes)`, `rate(2 hours)` ... in milliseconds. As in EventBridge, the unit is singular only for 1. */
export function rateToMilliseconds(expression: string): number {
  const match = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression.trim());
  if (!match)
    throw new ScheduleExpressionError(`unsupported schedule expression ${JSON.stringify(expression)}`);
  const value = Number(match[1]);
  const unit = match[2] as string;
  if (value <= 0 || (value === 1) !== !unit.endsWith('s')) {
    throw new ScheduleExpressionError(`invalid rate ${JSON.stringify(expression)}`);
  }
  return value * (RATE_UNITS_MS[unit] as number);
}

/** The event a schedule rule sends when its target has no `Input`. */
export function scheduledEvent(
  ruleArn: string,
  envelope: { account: string; region: string },
  at = new Date(),
) {
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': 'Scheduled Event',
    source: 'aws.events',
    account: envelope.account,
    time: at.toISOString().replace(/\.\d{3}Z$/, 'Z'),
    region: envelope.region,
    resources: [ruleArn],
    detail: {},
  };
}

export type FireRule = (rule: RuleDefinition) => Promise<void>;

export class Scheduler {
  private readonly rules: { rule: RuleDefinition; periodMs: number }[];
  private readonly timers: NodeJS.Timeout[] = [];

  constructor(
    rules: readonly RuleDefinition[],
    private readonly fire: FireRule,
    timeScale: number,
  ) {
    if (!(timeScale > 0)) throw new ScheduleExpressionError(`timeScale must be positive, got ${timeScale}`);
    this.rules = rules
      .filter((rule) => rule.enabled && rule.scheduleExpression !== undefined)
      .map((rule) => ({ rule, periodMs: rateToMilliseconds(rule.scheduleExpression as string) / timeScale }));
  }

  /** The schedule rules and their local period. */
  schedules(): { logicalId: string; expression: string; periodMs: number }[] {
    return this.rules.map(({ rule, periodMs }) => ({
      logicalId: rule.logicalId,
      expression: rule.scheduleExpression as string,
      periodMs,
    }));
  }

  /** Starts the timers; the first firing of each rule is one period from now, as after a deploy. */
  start(): void {
    for (const { rule, periodMs } of this.rules) {
      this.timers.push(setInterval(() => void this.fire(rule).catch(() => {}), periodMs));
    }
  }

  /** Fires every schedule rule now; resolves when their invocations finished. */
  async fireAll(): Promise<void> {
    await Promise.all(this.rules.map(({ rule }) => this.fire(rule)));
  }

  /**
   * Stops the timers. Firings in progress are not waited for: a firing lasts as long as its
   * invocation, and the watcher's lasts minutes; stopping the functions ends them.
   */
  stop(): void {
    for (const timer of this.timers.splice(0)) clearInterval(timer);
  }
}
