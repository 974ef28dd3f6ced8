/**
 * What a run started (servers, containers, temporary directories, timers, subscriptions), undone
 * at its end whether it succeeded or not: last started, first stopped, so nothing is stopped while
 * something started after it still uses it.
 */
export class Cleanups {
  private readonly steps: (() => unknown)[] = [];

  add(step: () => unknown): void {
    this.steps.push(step);
  }

  /** Runs (and forgets) every step, last added first; a step that fails is reported and the rest still run. */
  async runAll(onFailure: (error: Error) => void): Promise<void> {
    for (const step of this.steps.splice(0).reverse()) {
      try {
        await step();
      } catch (error) {
        onFailure(error as Error);
      }
    }
  }
}
