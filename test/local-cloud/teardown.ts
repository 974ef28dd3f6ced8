/**
 * The stop steps of something started in steps: each step registers how to undo itself as soon as
 * it succeeded, and `run` undoes them in reverse. A failing undo is reported and the others still
 * run, so one stand-in that fails to stop never leaves the rest running.
 */

export type StopStep = () => Promise<void> | void;

export class Teardown {
  private readonly steps: StopStep[] = [];

  /** Registers steps, run in reverse order of registration. */
  add(...steps: StopStep[]): void {
    this.steps.push(...steps);
  }

  /** Runs every registered step, last first; never rejects. A second call finds nothing left to run. */
  async run(): Promise<void> {
    for (const step of this.steps.splice(0).reverse()) {
      try {
        await step();
      } catch (error) {
        console.error(`local cloud: cleanup failed: ${(error as Error).message}`);
      }
    }
  }
}

/**
 * Runs `start` with a fresh teardown. When it throws, undoes what it registered (in reverse), then
 * rethrows: a failed start leaves nothing running. When it succeeds, the teardown is the caller's
 * to run (typically as the started thing's `stop`).
 */
export async function startOrUndo<T>(start: (teardown: Teardown) => Promise<T>): Promise<T> {
  const teardown = new Teardown();
  try {
    return await start(teardown);
  } catch (error) {
    await teardown.run();
    throw error;
  }
}
