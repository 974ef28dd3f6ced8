import * as z from 'zod/mini';
import { scheduledEvent } from './events.ts';
import { type Decoded, decodeWith } from './input-schema.ts';

/**
 * The payloads of the scheduled functions, as schemas. Pure. Their schedules send a task object
 * (`RuleTargetInput`); a rule without an input sends EventBridge's own scheduled event, which
 * means the function's main task. Anything else is refused.
 */

export type SweepTask = 'sweep' | 'eni-garbage-collection';

const sweepTask = z.object({
  task: z.enum(['sweep', 'eni-garbage-collection'], { error: 'must be "sweep" or "eni-garbage-collection"' }),
});

/**
 * `{"task":"sweep"}` (or a plain scheduled event) reconciles every node;
 * `{"task":"eni-garbage-collection"}` deletes leaked ENIs.
 */
export function decodeSweepRequest(event: unknown): Decoded<SweepTask> {
  return decodeTask(
    event,
    sweepTask,
    'sweep',
    'expected {"task":"sweep"} or {"task":"eni-garbage-collection"}',
  );
}

const watchTask = z.object({ task: z.literal('watch', { error: 'must be "watch"' }) });

/** `{"task":"watch"}` (or a plain scheduled event): hold the CiliumNode watch for this invocation. */
export function decodeWatchRequest(event: unknown): Decoded<'watch'> {
  return decodeTask(event, watchTask, 'watch', 'expected {"task":"watch"}');
}

/** A payload naming a `task` is read as one; any other must be a scheduled event, which means `main`. */
function decodeTask<Task extends string>(
  event: unknown,
  schema: z.ZodMiniType<{ task: Task }>,
  main: Task,
  expected: string,
): Decoded<Task> {
  const namesTask = typeof event === 'object' && event !== null && Object.hasOwn(event, 'task');
  const decoded = namesTask ? decodeWith(schema, event) : decodeWith(scheduledEvent, event);
  if (!decoded.ok) return { ok: false, reason: `${expected}; ${decoded.reason}` };
  return { ok: true, value: 'task' in decoded.value ? decoded.value.task : main };
}
