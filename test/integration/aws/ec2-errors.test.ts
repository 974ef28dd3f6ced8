import { EC2ServiceException } from '@aws-sdk/client-ec2';
import { describe, expect, it } from 'vitest';
import {
  Ec2Error,
  isAddressNotAssigned,
  isAttachmentLimit,
  isDeviceIndexConflict,
  isIdempotencyMismatch,
  isIncorrectInstanceState,
  isInUse,
  isNotFound,
  isPrefixCapacity,
  isRetryableServerError,
  isSubnetFull,
  isThrottled,
  isUnknownInstanceType,
  toEc2Error,
} from '../../../functions/aws/ec2-errors.ts';

const predicates = {
  isNotFound,
  isThrottled,
  isRetryableServerError,
  isDeviceIndexConflict,
  isSubnetFull,
  isPrefixCapacity,
  isIdempotencyMismatch,
  isAttachmentLimit,
  isInUse,
  isAddressNotAssigned,
  isIncorrectInstanceState,
  isUnknownInstanceType,
} as const;
type PredicateName = keyof typeof predicates;

const ec2Error = (code: string, message = 'text', httpStatusCode = 400) =>
  new Ec2Error(code, message, { httpStatusCode });

describe('EC2 error classification', () => {
  it.each<{ case: string; error: Ec2Error; matches: PredicateName[] }>([
    {
      case: 'ENI not found',
      error: ec2Error('InvalidNetworkInterfaceID.NotFound'),
      matches: ['isNotFound'],
    },
    { case: 'instance not found', error: ec2Error('InvalidInstanceID.NotFound'), matches: ['isNotFound'] },
    {
      case: 'attachment not found',
      error: ec2Error('InvalidAttachmentID.NotFound'),
      matches: ['isNotFound'],
    },
    {
      case: 'malformed id is not NotFound',
      error: ec2Error('InvalidNetworkInterfaceID.Malformed'),
      matches: [],
    },
    {
      case: 'throttled (503)',
      error: ec2Error('RequestLimitExceeded', 'Request limit exceeded.', 503),
      matches: ['isThrottled'],
    },
    { case: 'Throttling', error: ec2Error('Throttling'), matches: ['isThrottled'] },
    {
      case: 'InternalError (500)',
      error: ec2Error('InternalError', 'x', 500),
      matches: ['isRetryableServerError'],
    },
    { case: 'Unavailable', error: ec2Error('Unavailable', 'x', 503), matches: ['isRetryableServerError'] },
    { case: 'unknown 502', error: ec2Error('BadGatewayish', 'x', 502), matches: ['isRetryableServerError'] },
    {
      case: 'device index taken (text cilium matches)',
      error: ec2Error(
        'InvalidParameterValue',
        "Instance 'i-1' already has an interface attached at device index '1'.",
      ),
      matches: ['isDeviceIndexConflict'],
    },
    {
      case: 'other InvalidParameterValue',
      error: ec2Error('InvalidParameterValue', 'Invalid value for DeviceIndex'),
      matches: [],
    },
    { case: 'subnet full', error: ec2Error('InsufficientFreeAddressesInSubnet'), matches: ['isSubnetFull'] },
    { case: 'no /28 left', error: ec2Error('InsufficientCidrBlocks'), matches: ['isPrefixCapacity'] },
    {
      case: 'no /28 left, InvalidParameterValue form',
      error: ec2Error(
        'InvalidParameterValue',
        "There aren't sufficient free Ipv4 addresses or prefixes in the subnet.",
      ),
      matches: ['isPrefixCapacity'],
    },
    {
      case: 'token reused',
      error: ec2Error('IdempotentParameterMismatch'),
      matches: ['isIdempotencyMismatch'],
    },
    { case: 'too many ENIs', error: ec2Error('AttachmentLimitExceeded'), matches: ['isAttachmentLimit'] },
    { case: 'ENI attached', error: ec2Error('InvalidNetworkInterface.InUse'), matches: ['isInUse'] },
    { case: 'IP taken', error: ec2Error('InvalidIPAddress.InUse'), matches: ['isInUse'] },
    {
      case: 'delete of an attached ENI',
      error: ec2Error('InvalidParameterValue', "Network interface 'eni-1' is currently in use."),
      matches: ['isInUse'],
    },
    {
      case: 'replayed unassign',
      error: ec2Error(
        'InvalidParameterValue',
        'Some of the specified addresses are not assigned to interface eni-1',
      ),
      matches: ['isAddressNotAssigned'],
    },
    {
      case: 'instance pending',
      error: ec2Error('IncorrectInstanceState'),
      matches: ['isIncorrectInstanceState'],
    },
    { case: 'unknown type', error: ec2Error('InvalidInstanceType'), matches: ['isUnknownInstanceType'] },
    { case: 'unrelated client error', error: ec2Error('UnauthorizedOperation', 'x', 403), matches: [] },
  ])('$case', ({ error, matches }) => {
    const matched = (Object.keys(predicates) as PredicateName[]).filter((name) => predicates[name](error));
    expect(matched).toEqual(matches);
  });

  it.each([
    { case: 'a plain Error', error: new Error('InvalidNetworkInterfaceID.NotFound') },
    { case: 'undefined', error: undefined },
    { case: 'an object with a code', error: { code: 'RequestLimitExceeded', name: 'RequestLimitExceeded' } },
  ])('never classifies $case', ({ error }) => {
    for (const predicate of Object.values(predicates)) expect(predicate(error)).toBe(false);
  });
});

describe('toEc2Error', () => {
  it('turns an EC2ServiceException into an Ec2Error that keeps code, status, request id and cause', () => {
    const sdkError = new EC2ServiceException({
      name: 'InvalidNetworkInterfaceID.NotFound',
      message: "The networkInterface ID 'eni-1' does not exist",
      $fault: 'client',
      $metadata: { httpStatusCode: 400, requestId: 'req-1' },
    });

    const converted = toEc2Error(sdkError);

    expect(converted).toBeInstanceOf(Ec2Error);
    expect(converted).toMatchObject({
      name: 'Ec2Error',
      code: 'InvalidNetworkInterfaceID.NotFound',
      message: "The networkInterface ID 'eni-1' does not exist",
      httpStatusCode: 400,
      requestId: 'req-1',
      cause: sdkError,
    });
    expect(isNotFound(converted)).toBe(true);
  });

  it('returns errors that are not EC2 answers unchanged', () => {
    const networkError = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const already = ec2Error('InternalError');
    expect(toEc2Error(networkError)).toBe(networkError);
    expect(toEc2Error(already)).toBe(already);
  });
});
