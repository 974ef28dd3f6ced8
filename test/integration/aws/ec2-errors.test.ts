import { EC2ServiceException } from '@aws-sdk/client-ec2';
import { describe, expect, it } from 'vitest';
import { classifyEc2Answer, ec2Failure, toEc2Failure } from '../../../functions/aws/ec2-errors.ts';
import {
  describeDenial,
  Ec2Failure,
  type Ec2FailureKind,
  isEc2Failure,
} from '../../../functions/core/ec2-failure.ts';

interface Answer {
  readonly code: string;
  readonly message?: string;
  readonly httpStatusCode?: number;
  readonly action?: string;
}

const kindOf = ({ code, message = 'text', httpStatusCode = 400, action }: Answer) =>
  classifyEc2Answer({ code, message, httpStatusCode, action });

const DEVICE_INDEX_TAKEN = "Instance 'i-1' already has an interface attached at device index '1'.";
const NO_FREE_PREFIX = "There aren't sufficient free Ipv4 addresses or prefixes in the subnet.";

describe('EC2 error classification', () => {
  it.each<{ case: string; answer: Answer; kind: Ec2FailureKind }>([
    { case: 'ENI not found', answer: { code: 'InvalidNetworkInterfaceID.NotFound' }, kind: 'not-found' },
    { case: 'instance not found', answer: { code: 'InvalidInstanceID.NotFound' }, kind: 'not-found' },
    { case: 'attachment not found', answer: { code: 'InvalidAttachmentID.NotFound' }, kind: 'not-found' },
    {
      case: 'malformed id is not NotFound',
      answer: { code: 'InvalidNetworkInterfaceID.Malformed' },
      kind: 'other',
    },
    {
      case: 'throttled (503)',
      answer: { code: 'RequestLimitExceeded', message: 'Request limit exceeded.', httpStatusCode: 503 },
      kind: 'throttled',
    },
    { case: 'Throttling', answer: { code: 'Throttling' }, kind: 'throttled' },
    {
      case: 'InternalError (500)',
      answer: { code: 'InternalError', httpStatusCode: 500 },
      kind: 'server-fault',
    },
    { case: 'Unavailable', answer: { code: 'Unavailable', httpStatusCode: 503 }, kind: 'server-fault' },
    { case: 'unknown 502', answer: { code: 'BadGatewayish', httpStatusCode: 502 }, kind: 'server-fault' },
    {
      case: 'device index taken (text cilium matches)',
      answer: { code: 'InvalidParameterValue', message: DEVICE_INDEX_TAKEN },
      kind: 'device-index-taken',
    },
    {
      case: 'other InvalidParameterValue',
      answer: { code: 'InvalidParameterValue', message: 'Invalid value for DeviceIndex' },
      kind: 'other',
    },
    { case: 'subnet full', answer: { code: 'InsufficientFreeAddressesInSubnet' }, kind: 'subnet-full' },
    { case: 'no /28 left', answer: { code: 'InsufficientCidrBlocks' }, kind: 'prefix-capacity' },
    {
      case: 'no /28 left, InvalidParameterValue form',
      answer: { code: 'InvalidParameterValue', message: NO_FREE_PREFIX },
      kind: 'prefix-capacity',
    },
    { case: 'token reused', answer: { code: 'IdempotentParameterMismatch' }, kind: 'idempotency-mismatch' },
    { case: 'too many ENIs', answer: { code: 'AttachmentLimitExceeded' }, kind: 'attachment-limit' },
    { case: 'ENI attached', answer: { code: 'InvalidNetworkInterface.InUse' }, kind: 'in-use' },
    { case: 'IP taken', answer: { code: 'InvalidIPAddress.InUse' }, kind: 'in-use' },
    {
      case: 'delete of an attached ENI',
      answer: { code: 'InvalidParameterValue', message: "Network interface 'eni-1' is currently in use." },
      kind: 'in-use',
    },
    {
      case: 'replayed unassign',
      answer: {
        code: 'InvalidParameterValue',
        message: 'Some of the specified addresses are not assigned to interface eni-1',
      },
      kind: 'address-not-assigned',
    },
    {
      case: 'instance pending',
      answer: { code: 'IncorrectInstanceState' },
      kind: 'incorrect-instance-state',
    },
    { case: 'unknown type', answer: { code: 'InvalidInstanceType' }, kind: 'unknown-instance-type' },
    {
      case: 'IAM denial',
      answer: { code: 'UnauthorizedOperation', httpStatusCode: 403 },
      kind: 'unauthorized',
    },
    {
      case: 'the ENI IPv4 limit, to AssignPrivateIpAddresses',
      answer: { code: 'PrivateIpAddressLimitExceeded', action: 'AssignPrivateIpAddresses' },
      kind: 'eni-address-limit',
    },
    {
      case: 'the same code to another action is no ENI address limit',
      answer: { code: 'PrivateIpAddressLimitExceeded', action: 'CreateNetworkInterface' },
      kind: 'other',
    },
    {
      case: 'the IPv6 limit, to AssignIpv6Addresses',
      answer: { code: 'PrivateIpAddressLimitExceeded', action: 'AssignIpv6Addresses' },
      kind: 'ipv6-refused',
    },
    {
      case: 'no room for a /80, to AssignIpv6Addresses',
      answer: { code: 'InsufficientCidrBlocks', action: 'AssignIpv6Addresses' },
      kind: 'ipv6-refused',
    },
    {
      case: 'a create naming IPv6',
      answer: {
        code: 'InvalidParameterValue',
        message: 'The subnet has no IPv6 CIDR block',
        action: 'CreateNetworkInterface',
      },
      kind: 'ipv6-refused',
    },
    {
      case: 'a create refused for room, whatever else it says',
      answer: { code: 'InvalidParameterValue', message: NO_FREE_PREFIX, action: 'CreateNetworkInterface' },
      kind: 'prefix-capacity',
    },
  ])('$case', ({ answer, kind }) => {
    expect(kindOf(answer)).toBe(kind);
  });

  it.each([
    { case: 'a plain Error', error: new Error('InvalidNetworkInterfaceID.NotFound') },
    { case: 'undefined', error: undefined },
    { case: 'an object with a code', error: { code: 'RequestLimitExceeded', name: 'RequestLimitExceeded' } },
  ])('never takes $case for an EC2 failure', ({ error }) => {
    expect(isEc2Failure(error, 'not-found', 'throttled', 'other')).toBe(false);
  });
});

describe('toEc2Failure', () => {
  it('turns an EC2ServiceException into an Ec2Failure that keeps code, status, request id and cause', () => {
    const sdkError = new EC2ServiceException({
      name: 'InvalidNetworkInterfaceID.NotFound',
      message: "The networkInterface ID 'eni-1' does not exist",
      $fault: 'client',
      $metadata: { httpStatusCode: 400, requestId: 'req-1' },
    });

    const converted = toEc2Failure(sdkError, 'AttachNetworkInterface');

    expect(converted).toBeInstanceOf(Ec2Failure);
    expect(converted).toMatchObject({
      name: 'Ec2Failure',
      kind: 'not-found',
      code: 'InvalidNetworkInterfaceID.NotFound',
      message: "The networkInterface ID 'eni-1' does not exist",
      httpStatusCode: 400,
      requestId: 'req-1',
      action: 'AttachNetworkInterface',
      cause: sdkError,
    });
    expect(isEc2Failure(converted, 'not-found')).toBe(true);
  });

  it('returns errors that are not EC2 answers unchanged', () => {
    const networkError = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const already = ec2Failure('InternalError', 'x');
    expect(toEc2Failure(networkError)).toBe(networkError);
    expect(toEc2Failure(already)).toBe(already);
  });
});

describe('describeDenial', () => {
  it('names the action and drops the encoded authorization message', () => {
    const denied = new Ec2Failure(
      'unauthorized',
      'UnauthorizedOperation',
      'You are not authorized to perform this operation. Encoded authorization failure message: AbC',
      { action: 'AttachNetworkInterface' },
    );
    expect(describeDenial(denied)).toBe(
      "ec2:AttachNetworkInterface was denied to this function's role: You are not authorized to perform this operation.",
    );
  });
});
