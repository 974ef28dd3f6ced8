/**
 * What an EC2 call that failed means, in domain terms: the only EC2 error that crosses the
 * `Ec2NetworkPort`. The adapter (`functions/aws/ec2-errors.ts`) classifies every EC2 error answer
 * into exactly one kind at the boundary; services branch on `kind` alone, never on EC2's codes or
 * message texts. The EC2 code, action and request id ride along for logs, records and support.
 *
 * The kinds, grouped as EC2's failures are:
 *
 * - slow down, retries spent: `throttled` (the token bucket is empty), `server-fault` (5xx or a
 *   known server-side code). The SDK's retry strategy already retried both.
 * - `not-found`: any `*.NotFound`. Right after our own create it is eventual consistency, which the
 *   adapter retries when the caller says the resource is fresh (`justCreated`, `justAttached`).
 * - `unauthorized`: IAM denied the call; the same call cannot succeed until the policy changes.
 * - limits: `attachment-limit` (the instance holds as many ENIs as its type allows),
 *   `eni-address-limit` (the ENI cannot take the IPv4 addresses asked for: it holds more than our
 *   view of it says).
 * - conflicts: `device-index-taken` (another attach raced us to the index), `in-use` (an ENI still
 *   attached, an IP taken), `idempotency-mismatch` (a ClientToken reused with other parameters: a
 *   bug to surface), `incorrect-instance-state` (e.g. attach while `pending`).
 * - capacity: `subnet-full` (too few free IPv4 addresses), `prefix-capacity` (no free contiguous /28;
 *   for a request of single IPs EC2's text for it can only mean the subnet is out of addresses),
 *   `ipv6-refused` (the IPv6 part of an assign or create: no IPv6 block, no room, a type without it).
 * - answered inside the adapter, listed so the classification is total: `address-not-assigned` (a
 *   replayed unassign), `unknown-instance-type` (DescribeInstanceTypes of a type EC2 does not offer).
 * - `other`: any other EC2 answer; rethrown as it is.
 */
export type Ec2FailureKind =
  | 'throttled'
  | 'server-fault'
  | 'not-found'
  | 'unauthorized'
  | 'attachment-limit'
  | 'eni-address-limit'
  | 'device-index-taken'
  | 'in-use'
  | 'idempotency-mismatch'
  | 'incorrect-instance-state'
  | 'subnet-full'
  | 'prefix-capacity'
  | 'ipv6-refused'
  | 'address-not-assigned'
  | 'unknown-instance-type'
  | 'other';

/** An EC2 call that failed, classified (`kind`); keeps EC2's own error as `cause` when there is one. */
export class Ec2Failure extends Error {
  override readonly name = 'Ec2Failure';
  /** HTTP status of the failed response (400 client error, 5xx server side); absent when unknown. */
  readonly httpStatusCode: number | undefined;
  /** EC2's request id, for correlating with CloudTrail and AWS support. */
  readonly requestId: string | undefined;
  /** The EC2 action that failed (e.g. `AttachNetworkInterface`), when the adapter knows it. */
  readonly action: string | undefined;

  constructor(
    readonly kind: Ec2FailureKind,
    /** The EC2 error code, e.g. `InvalidNetworkInterfaceID.NotFound`, `RequestLimitExceeded`. */
    readonly code: string,
    message: string,
    options?: ErrorOptions & {
      readonly httpStatusCode?: number | undefined;
      readonly requestId?: string | undefined;
      readonly action?: string | undefined;
    },
  ) {
    super(message, options);
    this.httpStatusCode = options?.httpStatusCode;
    this.requestId = options?.requestId;
    this.action = options?.action;
  }
}

/** Whether `error` is an EC2 failure of one of `kinds`; false for anything else (network errors, bugs). */
export function isEc2Failure(error: unknown, ...kinds: readonly Ec2FailureKind[]): error is Ec2Failure {
  return error instanceof Ec2Failure && kinds.includes(error.kind);
}

/**
 * What to record for a denied call: the action named (AWS's message often names none), without
 * the encoded authorization failure message (kilobytes, for `sts decode-authorization-message`).
 */
export function describeDenial(failure: Ec2Failure): string {
  const message = failure.message.replace(/\s*Encoded authorization failure message:.*$/s, '');
  return `ec2:${failure.action ?? 'unknown action'} was denied to this function's role: ${message}`;
}
