import type { Subresource } from './store.ts';

/**
 * Fault injection and the request log. A fault is matched against what a request is about (verb,
 * subresource, object name), like an API-server audit rule, and consumed `times` times.
 */

export type RequestVerb =
  | 'get'
  | 'list'
  | 'watch'
  | 'create'
  | 'update'
  | 'patch'
  | 'delete'
  | 'deletecollection'
  | 'discovery'
  /** A path or method the emulator does not serve (answered 404 or 405). */
  | 'unknown';

export interface RequestInfo {
  verb: RequestVerb;
  /** `main` for the object and the collection, `status` for `/status`; absent for discovery. */
  subresource?: Subresource;
  name?: string;
  /**
   * `configmaps` for the core ConfigMaps, the two reviews for `kubectl auth can-i` and `whoami`;
   * absent for `ciliumnodes` (and discovery).
   */
  resource?: 'configmaps' | 'selfsubjectaccessreviews' | 'selfsubjectreviews';
  /** The namespace of a namespaced request (ConfigMaps). */
  namespace?: string;
}

/**
 * - `server-error`: 500 InternalError, nothing applied.
 * - `conflict`: 409 Conflict (the stale-resourceVersion answer), nothing applied.
 * - `too-many-requests`: 429 with `Retry-After: 1` (API priority and fairness), nothing applied.
 * - `drop-connection`: the socket is destroyed before anything is applied.
 * - `drop-after-apply`: the request is carried out, then the socket is destroyed instead of
 *   answering (a watch gets its initial events first).
 */
export type FaultKind =
  | 'server-error'
  | 'conflict'
  | 'too-many-requests'
  | 'drop-connection'
  | 'drop-after-apply';

export interface FaultMatch {
  verb?: RequestVerb;
  subresource?: Subresource;
  name?: string;
  /** `configmaps` to hit ConfigMap requests; absent, a rule hits CiliumNode (and discovery) requests only. */
  resource?: 'configmaps';
}

export interface FaultRule {
  match: FaultMatch;
  kind: FaultKind;
  /** How many matching requests it hits; default 1. `Infinity` for every one. */
  times?: number;
}

export interface InjectedFault {
  readonly kind: FaultKind;
  /** Requests it has hit so far. */
  readonly hits: number;
  /** Requests it will still hit. */
  readonly remaining: number;
  cancel(): void;
}

function matches(match: FaultMatch, request: RequestInfo): boolean {
  return (
    (match.verb === undefined || match.verb === request.verb) &&
    (match.subresource === undefined || match.subresource === request.subresource) &&
    (match.name === undefined || match.name === request.name) &&
    match.resource === request.resource
  );
}

interface ActiveFault {
  rule: FaultRule;
  hits: number;
  remaining: number;
}

export class Faults {
  private active: ActiveFault[] = [];
  private readonly hitListeners = new Set<(request: RequestInfo, kind: FaultKind) => void>();
  private readonly dropWatchStreams: () => number;

  constructor(dropWatchStreams: () => number) {
    this.dropWatchStreams = dropWatchStreams;
  }

  /** Arms a fault; rules are checked in the order they were injected. */
  inject(rule: FaultRule): InjectedFault {
    const fault: ActiveFault = { rule, hits: 0, remaining: rule.times ?? 1 };
    this.active.push(fault);
    const faults = this;
    return {
      kind: rule.kind,
      get hits() {
        return fault.hits;
      },
      get remaining() {
        return fault.remaining;
      },
      cancel() {
        faults.active = faults.active.filter((f) => f !== fault);
      },
    };
  }

  /** The fault this request suffers, if any (consumes one of its `times`). */
  take(request: RequestInfo): FaultKind | undefined {
    const fault = this.active.find((f) => f.remaining > 0 && matches(f.rule.match, request));
    if (fault === undefined) return undefined;
    fault.hits++;
    fault.remaining--;
    if (fault.remaining <= 0) this.active = this.active.filter((f) => f !== fault);
    for (const listener of this.hitListeners) listener(request, fault.rule.kind);
    return fault.rule.kind;
  }

  /**
   * Calls `listener` as a fault hits a request, before the request is refused, dropped or carried
   * out (a test kills the caller there); returns what stops the calls.
   */
  onHit(listener: (request: RequestInfo, kind: FaultKind) => void): () => void {
    this.hitListeners.add(listener);
    return () => this.hitListeners.delete(listener);
  }

  /** Faults still armed. */
  pending(): number {
    return this.active.length;
  }

  clear(): void {
    this.active = [];
  }

  /** Destroys the connection of every open watch (an API server restart); returns how many. */
  dropWatches(): number {
    return this.dropWatchStreams();
  }
}

export interface RequestRecord extends RequestInfo {
  method: string;
  path: string;
  query: string;
  contentType?: string;
  /** The HTTP status answered, or `dropped` when the socket was destroyed instead. */
  statusCode: number | 'dropped';
  /** The authenticated user (absent when authentication failed). */
  user?: string;
  fault?: FaultKind;
}

export class RequestLog {
  private records: RequestRecord[] = [];

  record(record: RequestRecord): void {
    this.records.push(record);
  }

  /** Requests matching every given field, e.g. `count({ verb: 'patch', subresource: 'status' })`. */
  count(filter: Partial<RequestRecord> = {}): number {
    return this.all(filter).length;
  }

  all(filter: Partial<RequestRecord> = {}): RequestRecord[] {
    const entries = Object.entries(filter) as [keyof RequestRecord, unknown][];
    return this.records
      .filter((r) => entries.every(([key, value]) => r[key] === value))
      .map((r) => ({ ...r }));
  }

  reset(): void {
    this.records = [];
  }
}
