/**
 * The records the EC2 state model keeps (VPCs, subnets, security groups, route tables, instances,
 * network interfaces) and the typed requests the server parses API calls into. Records returned by
 * the state's omniscient queries are copies; the API-facing reads hand out the live records to the
 * renderers, which must not change them.
 */

export type Tags = Record<string, string>;

export type InstanceStateName =
  | 'pending'
  | 'running'
  | 'stopping'
  | 'stopped'
  | 'shutting-down'
  | 'terminated';

/** EC2's numeric instance state codes (the low byte of InstanceState.Code). */
export const INSTANCE_STATE_CODES: Readonly<Record<InstanceStateName, number>> = {
  pending: 0,
  running: 16,
  'shutting-down': 32,
  terminated: 48,
  stopping: 64,
  stopped: 80,
};

export type NetworkInterfaceStatus = 'available' | 'in-use';

/** One instance state transition, as EC2 reports it in an `EC2 Instance State-change Notification`. */
export interface InstanceStateChange {
  readonly instanceId: string;
  readonly state: InstanceStateName;
}

export type InstanceStateChangeListener = (change: InstanceStateChange) => void;

export interface VpcRecord {
  readonly vpcId: string;
  readonly cidrBlock: string;
  /** The primary CIDR first, then secondary CIDRs in association order. */
  readonly cidrBlockAssociations: { readonly associationId: string; readonly cidrBlock: string }[];
  /** Associated IPv6 blocks (/56), in association order; empty for an IPv4-only VPC. */
  readonly ipv6CidrBlockAssociations: { readonly associationId: string; readonly ipv6CidrBlock: string }[];
  readonly isDefault: boolean;
  readonly mainRouteTableId: string;
  readonly defaultSecurityGroupId: string;
  tags: Tags;
}

export interface SubnetRecord {
  readonly subnetId: string;
  readonly vpcId: string;
  readonly availabilityZone: string;
  readonly cidrBlock: string;
  /** Explicitly associated route table; undefined = the VPC's main table (implicit association). */
  readonly routeTableId: string | undefined;
  /** When true, /28 prefix allocation fails with InsufficientCidrBlocks while single IPs still work. */
  fragmented: boolean;
  /** The subnet's IPv6 block (a /64) when it is dual-stack; `undefined` for an IPv4-only subnet. */
  ipv6CidrBlock: string | undefined;
  ipv6CidrBlockAssociationId: string | undefined;
  tags: Tags;
}

export interface SecurityGroupRecord {
  readonly groupId: string;
  readonly groupName: string;
  readonly description: string;
  readonly vpcId: string;
  tags: Tags;
}

export interface RouteTableRecord {
  readonly routeTableId: string;
  readonly vpcId: string;
  readonly main: boolean;
  tags: Tags;
}

export interface InstanceRecord {
  readonly instanceId: string;
  readonly reservationId: string;
  readonly imageId: string;
  readonly instanceType: string;
  readonly availabilityZone: string;
  readonly subnetId: string;
  readonly vpcId: string;
  readonly privateIpAddress: string;
  readonly privateDnsName: string;
  readonly launchTimeMs: number;
  readonly sequence: number;
  state: InstanceStateName;
  tags: Tags;
}

export interface AttachmentRecord {
  readonly attachmentId: string;
  readonly instanceId: string;
  readonly deviceIndex: number;
  readonly networkCardIndex: number;
  readonly attachTimeMs: number;
  deleteOnTermination: boolean;
  readonly status: 'attached';
}

export interface NetworkInterfaceRecord {
  readonly networkInterfaceId: string;
  readonly subnetId: string;
  readonly vpcId: string;
  readonly availabilityZone: string;
  readonly macAddress: string;
  readonly privateIpAddress: string;
  readonly privateDnsName: string;
  readonly interfaceType: string;
  readonly requesterManaged: boolean;
  readonly createdAtMs: number;
  /** Until this time the ENI is invisible to the API (EC2's eventual consistency after create). */
  readonly visibleAtMs: number;
  readonly clientToken: string | undefined;
  readonly sequence: number;
  description: string;
  securityGroupIds: string[];
  /** Secondary private IPs in assignment order (the primary is `privateIpAddress`). */
  secondaryPrivateIpAddresses: string[];
  /** Delegated /28 prefixes in assignment order. */
  ipv4Prefixes: string[];
  /** Delegated IPv6 /80 prefixes in assignment order. */
  ipv6Prefixes: string[];
  status: NetworkInterfaceStatus;
  attachment: AttachmentRecord | undefined;
  tags: Tags;
  deletedAtMs: number | undefined;
}

export interface AddVpcInput {
  cidrBlock: string;
  secondaryCidrBlocks?: string[];
  /** An IPv6 /56 to associate (`true`: an Amazon-provided one); default none (IPv4 only). */
  ipv6CidrBlock?: string | true;
  tags?: Tags;
}

export interface AddSubnetInput {
  vpcId: string;
  availabilityZone: string;
  cidrBlock: string;
  tags?: Tags;
  routeTableId?: string;
  fragmented?: boolean;
  /** A /64 of the VPC's IPv6 block: the subnet is dual-stack. Default none (IPv4 only). */
  ipv6CidrBlock?: string;
}

export interface AddSecurityGroupInput {
  vpcId: string;
  groupName: string;
  description?: string;
  tags?: Tags;
}

export interface AddRouteTableInput {
  vpcId: string;
  tags?: Tags;
}

export interface LaunchInstanceInput {
  instanceType: string;
  subnetId: string;
  securityGroupIds?: string[];
  tags?: Tags;
  /** Default running. */
  state?: InstanceStateName;
  privateIpAddress?: string;
  imageId?: string;
  /** Tags of eth0, as a launch template's `network-interface` TagSpecifications set them (default none). */
  primaryNetworkInterfaceTags?: Tags;
}

export interface CreateNetworkInterfaceRequest {
  subnetId: string;
  securityGroupIds?: string[];
  description?: string;
  /** The primary private IP (`PrivateIpAddress`). */
  privateIpAddress?: string;
  /** `PrivateIpAddresses.N.{PrivateIpAddress,Primary}`. */
  privateIpAddresses?: { privateIpAddress: string; primary: boolean }[];
  secondaryPrivateIpAddressCount?: number;
  ipv4PrefixCount?: number;
  ipv4Prefixes?: string[];
  ipv6PrefixCount?: number;
  ipv6Prefixes?: string[];
  /** `Ipv6AddressCount`: single IPv6 addresses are not modelled; a request with it fails loudly. */
  ipv6AddressCount?: number;
  interfaceType?: string;
  tags?: Tags;
  clientToken?: string;
}

export interface AttachNetworkInterfaceRequest {
  networkInterfaceId: string;
  instanceId: string;
  deviceIndex: number;
  networkCardIndex?: number;
}

export interface ModifyNetworkInterfaceAttributeRequest {
  networkInterfaceId: string;
  attachment?: { attachmentId: string; deleteOnTermination?: boolean };
  description?: string;
  securityGroupIds?: string[];
}

export interface AssignPrivateIpAddressesRequest {
  networkInterfaceId: string;
  secondaryPrivateIpAddressCount?: number;
  privateIpAddresses?: string[];
  ipv4PrefixCount?: number;
  ipv4Prefixes?: string[];
}

export interface UnassignPrivateIpAddressesRequest {
  networkInterfaceId: string;
  privateIpAddresses?: string[];
  ipv4Prefixes?: string[];
}

export interface AssignIpv6AddressesRequest {
  networkInterfaceId: string;
  ipv6PrefixCount?: number;
  ipv6Prefixes?: string[];
  /** `Ipv6AddressCount` / `Ipv6Addresses`: single IPv6 addresses are not modelled (fails loudly). */
  ipv6AddressCount?: number;
  ipv6Addresses?: string[];
}

export interface UnassignIpv6AddressesRequest {
  networkInterfaceId: string;
  ipv6Prefixes?: string[];
  /** Not modelled (fails loudly). */
  ipv6Addresses?: string[];
}

export interface NetworkInterfaceQuery {
  instanceId?: string;
  status?: NetworkInterfaceStatus;
  subnetId?: string;
  /** Include deleted ENIs (the full creation history). Default false. */
  includeDeleted?: boolean;
}
