/**
 * One clock for the functions and the EC2 emulator that `advance` moves forward, so leases expire
 * and grace periods pass without waiting. The offset lives in shared memory: every function's
 * worker threads add it to their `Date.now` (`LambdaFunctionSpec.clockOffsetMs`), and the EC2
 * emulator reads `now`. It only ever moves forward of the real clock.
 */
export class ShiftableClock {
  /** Milliseconds added to the real clock, one BigInt64 shared with the functions' workers. */
  readonly sharedOffsetMs = new BigInt64Array(new SharedArrayBuffer(8));

  /** The shifted time, in epoch milliseconds. */
  readonly now = (): number => Date.now() + this.offsetMs();

  /** How far `advance` has moved the clock so far. */
  offsetMs(): number {
    return Number(Atomics.load(this.sharedOffsetMs, 0));
  }

  advance(milliseconds: number): void {
    Atomics.add(this.sharedOffsetMs, 0, BigInt(Math.round(milliseconds)));
  }
}
