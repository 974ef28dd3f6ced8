import { EC2ServiceException } from '@aws-sdk/client-ec2';
import { Ec2Failure, type Ec2FailureKind } from '../core/ec2-failure.ts';

/**
 * EC2 API errors, classified in ONE place (after karpenter's `pkg/errors/errors.go`). The EC2
 * adapter converts every `EC2ServiceException` into the domain's `Ec2Failure` (`toEc2Failure`), so
 * nothing outside `functions/aws/` sees SDK shapes or EC2's codes, and every branch our code takes
 * on an EC2 failure is a branch on its `kind`. The texts some rules match are the ones EC2 sends
 * and cilium / amazon-vpc-cni match on; EC2 reuses `InvalidParameterValue` for unrelated failures,
 * so the message is the only way to tell them apart.
 */

/** One EC2 error answer, as the rules read it. */
interface Ec2Answer {
  readonly code: string;
  readonly message: string;
  readonly action: string | undefined;
  readonly httpStatusCode: number | undefined;
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

/** Codes with which AssignIpv6Addresses (a request that is all IPv6) refuses the IPv6 it was asked for. */
const IPV6_REFUSAL_CODES: ReadonlySet<string> = new Set([
  'InvalidParameterValue',
  'PrivateIpAddressLimitExceeded',
  'InsufficientCidrBlocks',
]);

const saying = (answer: Ec2Answer, text: string) =>
  answer.code === 'InvalidParameterValue' && answer.message.includes(text);

/**
 * The rules, in order; the first that matches gives the kind. The order only matters where one
 * answer fits two rules, and then it is the order in which the services asked before the rules
 * moved here (a create refused for room is a capacity refusal before an IPv6 one).
 *
 * 1. `UnauthorizedOperation` (403): the role lacks a permission, or the resource fails a condition.
 * 2. A throttling code.
 * 3. Any `*.NotFound` (InvalidInstanceID, InvalidNetworkInterfaceID, InvalidAttachmentID, ...).
 * 4. `PrivateIpAddressLimitExceeded` to AssignPrivateIpAddresses: the ENI's own IPv4 limit.
 * 5. Any refusal code of AssignIpv6Addresses: the subnet has no IPv6 block, the type no IPv6 or
 *    no prefixes, the per-ENI limit.
 * 6. `InsufficientFreeAddressesInSubnet`.
 * 7. `InsufficientCidrBlocks`, or the `InvalidParameterValue` text EC2 also uses for it (cilium
 *    falls back to secondary IPs on both).
 * 8. An `InvalidParameterValue` naming IPv6 on a create: the IPv6 part of the request.
 * 9. "Instance '...' already has an interface attached at device index '1'." (cilium matches it).
 * 10. `*.InUse`, or "... is currently in use." on delete: detach first and wait.
 * 11. "Some of the specified addresses are not assigned to interface ...": a replayed unassign.
 * 12. `AttachmentLimitExceeded`, `IdempotentParameterMismatch`, `IncorrectInstanceState`,
 *     `InvalidInstanceType`, each its own kind.
 * 13. A known server-side fault code, or any 5xx.
 */
const RULES: readonly (readonly [Ec2FailureKind, (answer: Ec2Answer) => boolean])[] = [
  ['unauthorized', (answer) => answer.code === 'UnauthorizedOperation'],
  ['throttled', (answer) => THROTTLING_CODES.has(answer.code)],
  ['not-found', (answer) => answer.code.endsWith('.NotFound')],
  [
    'eni-address-limit',
    (answer) =>
      answer.action === 'AssignPrivateIpAddresses' && answer.code === 'PrivateIpAddressLimitExceeded',
  ],
  [
    'ipv6-refused',
    (answer) => answer.action === 'AssignIpv6Addresses' && IPV6_REFUSAL_CODES.has(answer.code),
  ],
  ['subnet-full', (answer) => answer.code === 'InsufficientFreeAddressesInSubnet'],
  [
    'prefix-capacity',
    (answer) =>
      answer.code === 'InsufficientCidrBlocks' ||
      saying(answer, "There aren't sufficient free Ipv4 addresses or prefixes"),
  ],
  [
    'ipv6-refused',
    (answer) =>
      answer.action === 'CreateNetworkInterface' &&
      answer.code === 'InvalidParameterValue' &&
      /ipv6/i.test(answer.message),
  ],
  ['device-index-taken', (answer) => saying(answer, 'interface attached at device')],
  ['in-use', (answer) => answer.code.endsWith('.InUse') || saying(answer, 'currently in use')],
  ['address-not-assigned', (answer) => saying(answer, 'not assigned to interface')],
  ['attachment-limit', (answer) => answer.code === 'AttachmentLimitExceeded'],
  ['idempotency-mismatch', (answer) => answer.code === 'IdempotentParameterMismatch'],
  ['incorrect-instance-state', (answer) => answer.code === 'IncorrectInstanceState'],
  ['unknown-instance-type', (answer) => answer.code === 'InvalidInstanceType'],
  [
    'server-fault',
    (answer) =>
      SERVER_ERROR_CODES.has(answer.code) ||
      (answer.httpStatusCode !== undefined && answer.httpStatusCode >= 500),
  ],
];

/** The kind of one EC2 error answer (`RULES`); `other` when no rule matches. */
export function classifyEc2Answer(answer: Ec2Answer): Ec2FailureKind {
  return RULES.find(([, matches]) => matches(answer))?.[0] ?? 'other';
}

/**
 * A failure the adapter raises itself, for an answer EC2 should have given but did not (a VPC
 * missing from a filtered describe reads as `InvalidVpcID.NotFound`), classified like EC2's own.
 */
export function ec2Failure(code: string, message: string, action?: string): Ec2Failure {
  const kind = classifyEc2Answer({ code, message, action, httpStatusCode: undefined });
  return new Ec2Failure(kind, code, message, { action });
}

/**
 * Converts an SDK `EC2ServiceException` into an `Ec2Failure` that keeps it as `cause`. Anything else
 * (an `Ec2Failure` already, a network error such as ECONNRESET, a bug) is returned unchanged: those
 * are not EC2 answers and must reach the caller as they are.
 */
export function toEc2Failure(error: unknown, action?: string): unknown {
  if (!(error instanceof EC2ServiceException)) return error;
  const answer: Ec2Answer = {
    code: error.name,
    message: error.message,
    action,
    httpStatusCode: error.$metadata.httpStatusCode,
  };
  return new Ec2Failure(classifyEc2Answer(answer), answer.code, answer.message, {
    cause: error,
    httpStatusCode: answer.httpStatusCode,
    requestId: error.$metadata.requestId,
    action,
  });
}
