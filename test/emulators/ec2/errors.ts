/**
 * EC2 API errors as the emulator answers them. Every error our code may branch on has a named
 * factory here so the code, HTTP status and message text live in one place.
 *
 * Codes and texts mirror what EC2 returns (the EC2 API reference "Error codes" page, and the
 * messages that cilium and the VPC CNI match on, e.g. "interface attached at device").
 */
export class Ec2ApiError extends Error {
  override readonly name = 'Ec2ApiError';

  constructor(
    /** The EC2 error code, e.g. `InvalidNetworkInterfaceID.NotFound`; the SDK exposes it as `err.name`. */
    readonly code: string,
    message: string,
    /** 400 for client errors, 503 for throttling, 500 for internal faults. */
    readonly httpStatus = 400,
  ) {
    super(message);
  }
}

const clientError = (code: string, message: string): Ec2ApiError => new Ec2ApiError(code, message, 400);

export const ec2Errors = {
  invalidAction: (action: string) =>
    clientError('InvalidAction', `The action ${action} is not valid for this web service.`),
  authFailure: () =>
    new Ec2ApiError('AuthFailure', 'AWS was not able to validate the provided access credentials', 401),
  /** IAM denied the call: EC2 answers 403 with this code (and, on AWS, an encoded message). */
  unauthorizedOperation: (message: string) => new Ec2ApiError('UnauthorizedOperation', message, 403),
  missingParameter: (name: string) =>
    clientError('MissingParameter', `The request must contain the parameter ${name}`),
  invalidParameterValue: (message: string) => clientError('InvalidParameterValue', message),
  invalidParameterCombination: (message: string) => clientError('InvalidParameterCombination', message),
  invalidFilter: (name: string) => clientError('InvalidParameterValue', `The filter '${name}' is invalid`),
  invalidNextToken: (token: string) =>
    clientError('InvalidParameterValue', `The NextToken '${token}' is invalid or has expired`),

  networkInterfaceNotFound: (id: string) =>
    clientError('InvalidNetworkInterfaceID.NotFound', `The networkInterface ID '${id}' does not exist`),
  networkInterfaceMalformed: (id: string) =>
    clientError('InvalidNetworkInterfaceID.Malformed', `Invalid id: "${id}" (expecting "eni-...")`),
  instanceNotFound: (id: string) =>
    clientError('InvalidInstanceID.NotFound', `The instance ID '${id}' does not exist`),
  instanceMalformed: (id: string) => clientError('InvalidInstanceID.Malformed', `Invalid id: "${id}"`),
  subnetNotFound: (id: string) =>
    clientError('InvalidSubnetID.NotFound', `The subnet ID '${id}' does not exist`),
  securityGroupNotFound: (id: string) =>
    clientError('InvalidGroup.NotFound', `The security group '${id}' does not exist`),
  vpcNotFound: (id: string) => clientError('InvalidVpcID.NotFound', `The vpc ID '${id}' does not exist`),
  routeTableNotFound: (id: string) =>
    clientError('InvalidRouteTableID.NotFound', `The routeTable ID '${id}' does not exist`),
  attachmentNotFound: (id: string) =>
    clientError('InvalidAttachmentID.NotFound', `The attachment ID '${id}' does not exist`),
  invalidInstanceType: (names: string[]) =>
    clientError(
      'InvalidInstanceType',
      `The following supplied instance types do not exist: [${names.join(', ')}]`,
    ),
  invalidResourceId: (id: string) => clientError('InvalidID', `The ID '${id}' is not valid`),

  idempotentParameterMismatch: (token: string) =>
    clientError(
      'IdempotentParameterMismatch',
      `The client token '${token}' has already been used with different request parameters.`,
    ),
  deviceIndexInUse: (instanceId: string, deviceIndex: number) =>
    clientError(
      'InvalidParameterValue',
      `Instance '${instanceId}' already has an interface attached at device index '${deviceIndex}'.`,
    ),
  attachmentLimitExceeded: (instanceType: string) =>
    clientError(
      'AttachmentLimitExceeded',
      `Interface count exceeds the limit for ${instanceType}: no more network interfaces can be attached.`,
    ),
  networkInterfaceAttached: (id: string) =>
    clientError(
      'InvalidNetworkInterface.InUse',
      `Interface: [${id}] in use. The network interface is already attached to an instance.`,
    ),
  networkInterfaceInUseCannotDelete: (id: string) =>
    clientError('InvalidParameterValue', `Network interface '${id}' is currently in use.`),
  incorrectInstanceState: (instanceId: string, state: string) =>
    clientError(
      'IncorrectInstanceState',
      `The instance '${instanceId}' is not in a valid state for this operation (current state: ${state}).`,
    ),
  availabilityZoneMismatch: (eniId: string, instanceId: string) =>
    clientError(
      'InvalidParameterValue',
      `The network interface '${eniId}' and the instance '${instanceId}' must be in the same availability zone.`,
    ),
  vpcMismatch: (eniId: string, instanceId: string) =>
    clientError(
      'InvalidParameterValue',
      `The network interface '${eniId}' and the instance '${instanceId}' belong to different networks.`,
    ),
  primaryInterfaceCannotDetach: () =>
    clientError('OperationNotPermitted', 'The network interface at device index 0 cannot be detached.'),
  privateIpAddressLimitExceeded: () =>
    clientError('PrivateIpAddressLimitExceeded', 'Number of private addresses will exceed limit.'),
  /**
   * Past Ipv6AddressesPerInterface (each /80 counts as one address). [inferred] AWS documents the
   * IPv6 limit as the IPv4 one ("as many IPv6 addresses as you can assign private IPv4 addresses")
   * but no IPv6-specific code; the emulator answers the IPv4 limit's code with an IPv6 message.
   */
  ipv6AddressLimitExceeded: () =>
    clientError('PrivateIpAddressLimitExceeded', 'Number of IPv6 addresses and prefixes will exceed limit.'),
  /** [inferred wording] IPv6 on an ENI whose subnet has no IPv6 CIDR block: a client error, nothing assigned. */
  subnetWithoutIpv6: (subnetId: string) =>
    clientError(
      'InvalidParameterValue',
      `The subnet '${subnetId}' has no IPv6 CIDR block associated; IPv6 addresses and prefixes cannot be assigned in it.`,
    ),
  ipv6NotSupported: (instanceType: string) =>
    clientError('InvalidParameterValue', `Instance type ${instanceType} does not support IPv6.`),
  ipv6PrefixInvalid: (prefix: string, subnetId: string) =>
    clientError(
      'InvalidParameterValue',
      `Invalid IPv6 prefix: ${prefix} (expecting a /80 inside the IPv6 CIDR block of subnet ${subnetId}).`,
    ),
  prefixesNotSupported: (instanceType: string) =>
    clientError(
      'InvalidParameterValue',
      `Prefix delegation is only supported on Nitro-based instance types; ${instanceType} is not one.`,
    ),
  insufficientFreeAddresses: (subnetId: string) =>
    clientError(
      'InsufficientFreeAddressesInSubnet',
      `The specified subnet ${subnetId} does not have enough free addresses to satisfy the request.`,
    ),
  insufficientCidrBlocks: (subnetId: string) =>
    clientError(
      'InsufficientCidrBlocks',
      `The specified subnet ${subnetId} does not have enough contiguous free space to allocate the requested prefixes.`,
    ),
  addressInUse: (address: string) => clientError('InvalidIPAddress.InUse', `Address ${address} is in use.`),
  addressNotInSubnet: (address: string, subnetId: string) =>
    clientError(
      'InvalidParameterValue',
      `Address ${address} does not fall within the subnet ${subnetId}'s range.`,
    ),
  addressesNotAssigned: (eniId: string) =>
    clientError(
      'InvalidParameterValue',
      `Some of the specified addresses are not assigned to interface ${eniId}`,
    ),
  primaryAddressCannotUnassign: (address: string) =>
    clientError('InvalidParameterValue', `The primary private IP address ${address} cannot be unassigned.`),

  requestLimitExceeded: () => new Ec2ApiError('RequestLimitExceeded', 'Request limit exceeded.', 503),
  internalError: () =>
    new Ec2ApiError('InternalError', 'An internal error has occurred. Please try again later.', 500),
} as const;
