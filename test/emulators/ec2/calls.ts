import { isNonMutatingAction } from './throttling.ts';

/**
 * What happened to each call the emulator received.
 * - `ok`: answered 200.
 * - `client-error`: answered a 4xx EC2 error (state unchanged).
 * - `throttled`: RequestLimitExceeded, from the token bucket or an injected fault (state unchanged).
 * - `server-error`: an injected or unexpected 500 (state unchanged).
 * - `lost-response`: the change was applied but the client never saw the answer.
 */
export type CallOutcome = 'ok' | 'client-error' | 'throttled' | 'server-error' | 'lost-response';

export interface CallRecord {
  readonly action: string;
  /** Emulator clock at receipt, epoch ms. */
  readonly atMs: number;
  readonly outcome: CallOutcome;
  /** The EC2 error code answered, if any. */
  readonly errorCode?: string;
  /** The resources IAM authorized the call on (ARNs, `*` for none), once it got that far. */
  readonly resources?: readonly string[];
  /** True when IAM denied the call (an injected UnauthorizedOperation is not a denial). */
  readonly deniedByIam?: boolean;
  /** The caller's access key id (SigV4 `Credential=`), when the call was signed. */
  readonly accessKeyId?: string;
}

export class CallLog {
  private records: CallRecord[] = [];

  record(call: CallRecord): void {
    this.records.push(call);
  }

  /** Every call in arrival order. */
  get log(): readonly CallRecord[] {
    return this.records;
  }

  /** Calls received, optionally of one action, whatever their outcome. */
  count(action?: string): number {
    return this.matching(action).length;
  }

  /** Calls of one action (or all) that ended with an outcome. */
  countWithOutcome(outcome: CallOutcome, action?: string): number {
    return this.matching(action).filter((call) => call.outcome === outcome).length;
  }

  /** Calls to mutating actions (anything but Describe/List/Get/Search), whatever their outcome. */
  mutating(): number {
    return this.records.filter((call) => !isNonMutatingAction(call.action)).length;
  }

  /** Calls IAM denied (UnauthorizedOperation), optionally of one action. */
  denied(action?: string): number {
    return this.matching(action).filter((call) => call.deniedByIam === true).length;
  }

  /** Calls authorized on (acting on) a resource whose ARN ends with `/<id>`, e.g. an ENI id. */
  touching(id: string): CallRecord[] {
    return this.records.filter((call) => call.resources?.some((arn) => arn.endsWith(`/${id}`)));
  }

  /** Calls answered RequestLimitExceeded, optionally of one action. */
  throttled(action?: string): number {
    return this.countWithOutcome('throttled', action);
  }

  /** Calls per action, e.g. `{ CreateNetworkInterface: 3 }`. */
  byAction(): Record<string, number> {
    const counts: Record<string, number> = {};
    for (const call of this.records) counts[call.action] = (counts[call.action] ?? 0) + 1;
    return counts;
  }

  reset(): void {
    this.records = [];
  }

  private matching(action: string | undefined): CallRecord[] {
    return action === undefined ? this.records : this.records.filter((call) => call.action === action);
  }
}
