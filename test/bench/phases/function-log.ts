import { nowMs } from '../tap.ts';

/** One `sync finished` line of the Sync function's log. */
export interface SyncLogEntry {
  readonly atMs: number;
  readonly instanceId: string;
  readonly nodeName?: string;
  readonly outcome: string;
  readonly writes: number;
  readonly conflicts: number;
}

export interface FunctionLogLine {
  readonly functionName: string;
  readonly stream: string;
  readonly text: string;
}

/**
 * Reads the functions' log as the local cloud emits it: forwards every line (to the bench's
 * functions.log), counts the error lines (stderr, or a structured line at level ERROR), keeps every
 * sync's outcome and counts the allocations by outcome kind.
 */
export class FunctionLogRecorder {
  /** Every sync that finished, in the order logged. */
  readonly syncs: SyncLogEntry[] = [];
  private readonly allocationCounts: Record<string, number> = {};
  private errorLines = 0;

  constructor(private readonly forward: ((line: string) => void) | undefined) {}

  /** Lines on stderr or at level ERROR, since the cloud started. */
  get errors(): number {
    return this.errorLines;
  }

  /** Allocations by outcome kind (`unknown` when the line carries none) since the last reset. */
  get allocations(): Readonly<Record<string, number>> {
    return this.allocationCounts;
  }

  resetAllocations(): void {
    for (const key of Object.keys(this.allocationCounts)) delete this.allocationCounts[key];
  }

  readonly record = ({ functionName, stream, text }: FunctionLogLine): void => {
    this.forward?.(`${functionName} ${stream}: ${text}`);
    if (stream === 'stderr' || text.includes('"level":"ERROR"')) this.errorLines++;
    if (text.includes('"sync finished"')) this.recordSync(text);
    else if (text.includes('"allocation finished"')) {
      const kind = (parseJson(text)?.outcome as { kind?: string } | undefined)?.kind ?? 'unknown';
      this.allocationCounts[kind] = (this.allocationCounts[kind] ?? 0) + 1;
    }
  };

  private recordSync(text: string): void {
    const entry = parseJson(text);
    if (!entry || typeof entry.instanceId !== 'string' || typeof entry.outcome !== 'string') return;
    this.syncs.push({
      atMs: nowMs(),
      instanceId: entry.instanceId,
      ...(typeof entry.nodeName === 'string' ? { nodeName: entry.nodeName } : {}),
      outcome: entry.outcome,
      writes: Number(entry.writes ?? 0),
      conflicts: Number(entry.conflicts ?? 0),
    });
  }
}

/** The JSON a log line or an answer body holds, or undefined when it is not JSON. */
// biome-ignore lint/suspicious/noExplicitAny: parsed log lines and API answers are untyped JSON
export function parseJson(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
