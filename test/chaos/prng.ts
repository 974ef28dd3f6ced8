import { seededRandom } from '../support/seeded-random.ts';

/**
 * The chaos suite's only source of randomness: mulberry32, a 32-bit seeded PRNG (Tommy Ettinger's
 * public-domain generator). Same seed, same sequence, on every machine; `fork` derives an
 * independent stream so that draws made at run time (how many times a stream batch is redelivered,
 * which depends on how many batches there were) never shift the draws of the run's plan.
 */
export class Prng {
  private readonly random: () => number;

  constructor(readonly seed: number) {
    this.random = seededRandom(seed);
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.random();
  }

  /** Uniform integer in [min, max], both included. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** True with probability `probability`. */
  chance(probability: number): boolean {
    return this.next() < probability;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('pick from an empty list');
    return items[this.int(0, items.length - 1)] as T;
  }

  /** A shuffled copy (Fisher-Yates). */
  shuffle<T>(items: readonly T[]): T[] {
    const copy = [...items];
    for (let index = copy.length - 1; index > 0; index--) {
      const other = this.int(0, index);
      [copy[index], copy[other]] = [copy[other] as T, copy[index] as T];
    }
    return copy;
  }

  /** An independent stream derived from this one's seed and `label`. */
  fork(label: string): Prng {
    let hash = this.seed >>> 0;
    for (let index = 0; index < label.length; index++) {
      hash = Math.imul(hash ^ label.charCodeAt(index), 0x01000193) >>> 0;
    }
    return new Prng(hash);
  }
}
