import { EC2ServiceException } from '@aws-sdk/client-ec2';

/**
 * EC2 API errors, classified in ONE place (after karpenter's `pkg/errors/errors.go`). The EC2
 * adapter converts every `EC2ServiceException` into an `Ec2Error` (`toEc2Error`), so nothing
 * outside `functions/aws/` sees SDK shapes, and every branch our code takes on an EC2 failure goes
 * through one of the predicates below. The texts some predicates match are the ones EC2 sends and
 * cilium / amazon-vpc-cni match on; EC2 reuses `InvalidParameterValue` for unrelated failures, so
 * the message is the only way to tell them apart.
 */
export class Ec2Error extends Error {
  override readonly name = 'Ec2Error';
  /** HTTP status of the failed response (400 client error, 5xx server side); absent when unknown. */
  readonly httpStatusCode: number | undefined;
  /** EC2's request id, for correlating with CloudTrail and AWS support. */
  readonly requestId: string | undefined;
  /** The EC2 action that failed (e.g. `AttachNetworkInterface`), when the adapter knows it. */
  readonly action: string | undefined;

  constructor(
    /** The EC2 error code, e.g. `InvalidNetworkInterfaceID.NotFound`, `RequestLimitExceeded`. */
    readonly code: string,
    message: string,
    options?: ErrorOptions & {
      readonly httpStatusCode?: number;
      readonly requestId?: string;
      readonly action?: string;
    },
  ) {
    super(message, options);
    this.httpStatusCode = options?.httpStatusCode;
    this.requestId = options?.requestId;
    this.action = options?.action;
  }
}

/**
 * Converts an SDK `EC2ServiceException` into an `Ec2Error` that keeps it as `cause`. Anything else
 * (an `Ec2Error` already, a network error such as ECONNRESET, a bug) is returned unchanged: those
 * are not EC2 answers and must reach the caller as they are.
 */
export function toEc2Error(error: unknown, action?: string): unknown {
  if (!(error instanceof EC2ServiceException)) return error;
  return new Ec2Error(error.name, error.message, {
    cause: error,
    httpStatusCode: error.$metadata.httpStatusCode,
    requestId: error.$metadata.requestId,
    ...(action === undefined ? {} : { action }),
  });
}

/** Error codes EC2 (and the AWS SDKs' shared list) use for "slow down". */
const THROTTLING_CODES: ReadonlySet<string> = new Set([
  'RequestLimitExceeded',
  'Throttling',
  'ThrottlingException',
  'ThrottledException',
  'RequestThrottled',
  'RequestThrottledException',
  'EC2ThrottledException',
  'TooManyRequestsException',
  'BandwidthLimitExceeded',
]);

/** Codes of server-side faults that a retry of the same request may get past. */
const SERVER_ERROR_CODES: ReadonlySet<string> = new Set([
  'InternalError',
  'InternalFailure',
  'ServiceUnavailable',
  'Unavailable',
]);

/** The code of an `Ec2Error`, or undefined for anything else. */
function codeOf(error: unknown): string | undefined {
  return error instanceof Ec2Error ? error.code : undefined;
}

function isInvalidParameterValueSaying(error: unknown, text: string): boolean {
  return codeOf(error) === 'InvalidParameterValue' && (error as Ec2Error).message.includes(text);
}

/**
 * Any `*.NotFound` (InvalidInstanceID.NotFound, InvalidNetworkInterfaceID.NotFound,
 * InvalidAttachmentID.NotFound, InvalidSubnetID.NotFound, ...). Right after we created the
 * resource this is EC2's eventual consistency, not proof of absence (see `retryWhileNotFound`).
 */
export function isNotFound(error: unknown): boolean {
  return codeOf(error)?.endsWith('.NotFound') ?? false;
}

/** EC2's token bucket is empty (`RequestLimitExceeded`, per account, Region and action). */
export function isThrottled(error: unknown): boolean {
  const code = codeOf(error);
  return code !== undefined && THROTTLING_CODES.has(code);
}

/** A 5xx or a known server-side fault code: the same request may succeed when retried. */
export function isRetryableServerError(error: unknown): boolean {
  if (!(error instanceof Ec2Error)) return false;
  if (SERVER_ERROR_CODES.has(error.code)) return true;
  return error.httpStatusCode !== undefined && error.httpStatusCode >= 500 && !isThrottled(error);
}

/**
 * AttachNetworkInterface at a device index that is already taken ("Instance '...' already has an
 * interface attached at device index '1'."): cilium matches this text and retries with the next
 * free index, since another attach may have raced us to the index we computed.
 */
export function isDeviceIndexConflict(error: unknown): boolean {
  return isInvalidParameterValueSaying(error, 'interface attached at device');
}

/**
 * The ENI cannot take the request's IPv4 addresses (`PrivateIpAddressLimitExceeded` to
 * AssignPrivateIpAddresses): it holds more than our view of it says, e.g. addresses a crashed
 * invocation was given after its last record write while our record of the ENI is still the
 * fresher one (`mergeObservedEnis`). Plan around the ENI; the observation adopts them later.
 */
export function isEniAddressLimit(error: unknown): boolean {
  return (
    error instanceof Ec2Error &&
    error.action === 'AssignPrivateIpAddresses' &&
    error.code === 'PrivateIpAddressLimitExceeded'
  );
}

/** The subnet has too few free IPv4 addresses for the request: pick another subnet. */
export function isSubnetFull(error: unknown): boolean {
  return codeOf(error) === 'InsufficientFreeAddressesInSubnet';
}

/**
 * The subnet has no free contiguous /28 for a prefix: `InsufficientCidrBlocks`, or the
 * `InvalidParameterValue` text EC2 also uses for it (cilium falls back to secondary IPs on both).
 */
export function isPrefixCapacity(error: unknown): boolean {
  return (
    codeOf(error) === 'InsufficientCidrBlocks' ||
    isInvalidParameterValueSaying(error, "There aren't sufficient free Ipv4 addresses or prefixes")
  );
}

/**
 * The ClientToken was already used with different parameters (`IdempotentParameterMismatch`):
 * a deterministic token was derived from inputs that changed, a bug to surface, not to retry.
 */
export function isIdempotencyMismatch(error: unknown): boolean {
  return codeOf(error) === 'IdempotentParameterMismatch';
}

/** The instance holds as many ENIs as its type allows (`AttachmentLimitExceeded`). */
export function isAttachmentLimit(error: unknown): boolean {
  return codeOf(error) === 'AttachmentLimitExceeded';
}

/**
 * The resource is in use: an ENI still attached (`InvalidNetworkInterface.InUse`, or
 * `InvalidParameterValue` "... is currently in use." on delete), an IP taken (`InvalidIPAddress.InUse`).
 * On delete this means "detach first and wait": DetachNetworkInterface completes asynchronously.
 */
export function isInUse(error: unknown): boolean {
  const code = codeOf(error);
  if (code === undefined) return false;
  return code.endsWith('.InUse') || isInvalidParameterValueSaying(error, 'currently in use');
}

/**
 * UnassignPrivateIpAddresses named an address or prefix the ENI no longer holds ("Some of the
 * specified addresses are not assigned to interface ..."): a replayed release.
 */
export function isAddressNotAssigned(error: unknown): boolean {
  return isInvalidParameterValueSaying(error, 'not assigned to interface');
}

/**
 * EC2 refused the IPv6 part of a request: any `InvalidParameterValue`, limit or capacity answer to
 * AssignIpv6Addresses (its whole request is IPv6: a subnet without an IPv6 block, a type without
 * IPv6 or without prefixes, the per-ENI limit), or an `InvalidParameterValue` naming IPv6 on a
 * create. The node's IPv4 allocation goes on without the /80; the planner routes around the subnet.
 */
export function isIpv6Refusal(error: unknown): boolean {
  if (!(error instanceof Ec2Error)) return false;
  if (error.action === 'AssignIpv6Addresses') {
    return IPV6_REFUSAL_CODES.has(error.code);
  }
  return error.code === 'InvalidParameterValue' && /ipv6/i.test(error.message);
}

const IPV6_REFUSAL_CODES: ReadonlySet<string> = new Set([
  'InvalidParameterValue',
  'PrivateIpAddressLimitExceeded',
  'InsufficientCidrBlocks',
]);

/** The instance is not in a state that allows the call (e.g. attach while `pending` or `stopping`). */
export function isIncorrectInstanceState(error: unknown): boolean {
  return codeOf(error) === 'IncorrectInstanceState';
}

/**
 * IAM denied the call (`UnauthorizedOperation`, 403): the role lacks a permission, or the resource
 * fails a condition of it. Retrying the same call cannot succeed until the policy changes.
 */
export function isUnauthorized(error: unknown): boolean {
  return codeOf(error) === 'UnauthorizedOperation';
}

/**
 * What to record for a denied call: the action named (AWS's message often names none), without
 * the encoded authorization failure message (kilobytes, for `sts decode-authorization-message`).
 */
export function describeUnauthorized(error: Ec2Error): string {
  const message = error.message.replace(/\s*Encoded authorization failure message:.*$/s, '');
  return `ec2:${error.action ?? 'unknown action'} was denied to this function's role: ${message}`;
}

/** DescribeInstanceTypes was asked about a type EC2 does not offer in this Region. */
export function isUnknownInstanceType(error: unknown): boolean {
  return codeOf(error) === 'InvalidInstanceType';
}
