/**
 * Fault injection for the EC2 emulator.
 * - `server-error`: answer 500 InternalError WITHOUT applying the call.
 * - `lost-response`: APPLY the call, then lose the answer (reset the connection, or answer 500
 *   with `lostResponseAs: 'internal-error'`), as when a response is lost on the network.
 * - `throttle`: answer 503 RequestLimitExceeded without applying the call or using a token.
 */
export type FaultKind = 'server-error' | 'lost-response' | 'throttle';

export interface FaultSpec {
  readonly action: string;
  readonly kind: FaultKind;
  /** How many matching calls are hit (default 1; Infinity for all). */
  readonly times?: number;
  /** Only calls whose parameters (the flat Query form) satisfy this are hit. */
  readonly match?: (params: Readonly<Record<string, string>>) => boolean;
  /** For `lost-response`: how the answer is lost (default `connection-reset`). */
  readonly lostResponseAs?: 'connection-reset' | 'internal-error';
}

export interface InjectedFault {
  readonly spec: FaultSpec;
  /** Calls this fault has hit so far. */
  readonly hits: number;
  readonly remaining: number;
}

interface ArmedFault {
  spec: FaultSpec;
  hits: number;
  remaining: number;
}

export class FaultInjector {
  private armed: ArmedFault[] = [];

  inject(spec: FaultSpec): InjectedFault {
    const fault: ArmedFault = { spec, hits: 0, remaining: spec.times ?? 1 };
    this.armed.push(fault);
    return fault;
  }

  /** Faults that can still hit. */
  pending(): InjectedFault[] {
    return this.armed.filter((fault) => fault.remaining > 0);
  }

  clear(): void {
    this.armed = [];
  }

  /** Picks (and consumes one use of) the first armed fault for this call, if any. */
  take(action: string, params: Readonly<Record<string, string>>): FaultSpec | undefined {
    const fault = this.armed.find(
      (candidate) =>
        candidate.remaining > 0 &&
        candidate.spec.action === action &&
        (candidate.spec.match?.(params) ?? true),
    );
    if (!fault) return undefined;
    fault.remaining -= 1;
    fault.hits += 1;
    return fault.spec;
  }
}
