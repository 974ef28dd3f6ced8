/** A settable clock for the emulator's `clock` option (throttle refill, eventual consistency). */
export interface ManualClock {
  /** Current time, epoch ms; pass `clock.now` as the emulator's clock. */
  readonly now: () => number;
  advance(milliseconds: number): void;
  set(epochMs: number): void;
}

export function createManualClock(startEpochMs = Date.UTC(2026, 0, 1)): ManualClock {
  let current = startEpochMs;
  return {
    now: () => current,
    advance: (milliseconds) => {
      current += milliseconds;
    },
    set: (epochMs) => {
      current = epochMs;
    },
  };
}
