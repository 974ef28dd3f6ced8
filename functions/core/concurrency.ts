/**
 * Runs `action` on every item, at most `concurrency` at a time, in order of start. An action that
 * throws rejects the whole run (callers that must carry on catch inside `action`).
 */
export async function forEachWithConcurrency<T>(
  items: readonly T[],
  concurrency: number,
  action: (item: T) => Promise<void>,
): Promise<void> {
  if (!(Number.isInteger(concurrency) && concurrency >= 1)) {
    throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`);
  }
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const item = items[next] as T;
      next += 1;
      await action(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
}
