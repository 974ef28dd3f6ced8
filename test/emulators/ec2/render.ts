import type { InstanceTypeInfo } from './instance-types.ts';
import {
  INSTANCE_STATE_CODES,
  type InstanceRecord,
  type NetworkInterfaceRecord,
  type RouteTableRecord,
  type SecurityGroupRecord,
  type SubnetRecord,
  type Tags,
  type VpcRecord,
} from './records.ts';
import type { Ec2State } from './state.ts';
import type { XmlObject } from './xml.ts';

/**
 * EC2 response shapes for each resource, element names as EC2 writes them (checked against the
 * XML names in @aws-sdk/client-ec2's schemas: e.g. Instance.State is `instanceState`,
 * SecurityGroup.Description is `groupDescription`, lists are `<xSet><item>`).
 */

export function tagSet(tags: Readonly<Tags>): XmlObject[] {
  return Object.entries(tags).map(([key, value]) => ({ key, value }));
}

function isoTime(epochMs: number): string {
  return new Date(epochMs).toISOString();
}

/** `us-east-1a` -> `use1-az1`. */
export function availabilityZoneId(availabilityZone: string): string {
  const match = /^([a-z]+)-([a-z]+)-(\d+)([a-z])$/.exec(availabilityZone);
  if (!match) return availabilityZone;
  const [, area = '', direction = '', number = '', letter = 'a'] = match;
  return `${area}${direction.charAt(0)}${number}-az${letter.charCodeAt(0) - 96}`;
}

function groupSet(state: Ec2State, groupIds: readonly string[]): XmlObject[] {
  return groupIds.map((groupId) => ({ groupId, groupName: state.requireSecurityGroup(groupId).groupName }));
}

/** What Describe lists: the ENI's addresses, and (eventual consistency) those unassigned a moment ago. */
function privateIpAddressesSet(state: Ec2State, eni: NetworkInterfaceRecord): XmlObject[] {
  return [eni.privateIpAddress, ...state.describedSecondaryAddresses(eni)].map((address) => ({
    privateIpAddress: address,
    privateDnsName: `ip-${address.replaceAll('.', '-')}${eni.privateDnsName.slice(eni.privateDnsName.indexOf('.'))}`,
    primary: address === eni.privateIpAddress,
  }));
}

/** A NetworkInterface as DescribeNetworkInterfaces and CreateNetworkInterface return it. */
export function renderNetworkInterface(state: Ec2State, eni: NetworkInterfaceRecord): XmlObject {
  return {
    networkInterfaceId: eni.networkInterfaceId,
    subnetId: eni.subnetId,
    vpcId: eni.vpcId,
    availabilityZone: eni.availabilityZone,
    availabilityZoneId: availabilityZoneId(eni.availabilityZone),
    description: eni.description,
    ownerId: state.accountId,
    requesterManaged: eni.requesterManaged,
    status: eni.status,
    macAddress: eni.macAddress,
    privateIpAddress: eni.privateIpAddress,
    privateDnsName: eni.privateDnsName,
    sourceDestCheck: true,
    groupSet: groupSet(state, eni.securityGroupIds),
    attachment: eni.attachment && {
      attachmentId: eni.attachment.attachmentId,
      instanceId: eni.attachment.instanceId,
      instanceOwnerId: state.accountId,
      deviceIndex: eni.attachment.deviceIndex,
      networkCardIndex: eni.attachment.networkCardIndex,
      status: eni.attachment.status,
      attachTime: isoTime(eni.attachment.attachTimeMs),
      deleteOnTermination: eni.attachment.deleteOnTermination,
    },
    tagSet: tagSet(eni.tags),
    privateIpAddressesSet: privateIpAddressesSet(state, eni),
    ipv4PrefixSet: state.describedIpv4Prefixes(eni).map((ipv4Prefix) => ({ ipv4Prefix })),
    ipv6AddressesSet: [],
    ipv6PrefixSet: eni.ipv6Prefixes.map((ipv6Prefix) => ({ ipv6Prefix })),
    interfaceType: eni.interfaceType,
  };
}

/** An ENI as it appears inside an Instance (InstanceNetworkInterface). */
function renderInstanceNetworkInterface(state: Ec2State, eni: NetworkInterfaceRecord): XmlObject {
  return {
    networkInterfaceId: eni.networkInterfaceId,
    subnetId: eni.subnetId,
    vpcId: eni.vpcId,
    description: eni.description,
    ownerId: state.accountId,
    status: eni.status,
    macAddress: eni.macAddress,
    privateIpAddress: eni.privateIpAddress,
    privateDnsName: eni.privateDnsName,
    sourceDestCheck: true,
    groupSet: groupSet(state, eni.securityGroupIds),
    attachment: eni.attachment && {
      attachmentId: eni.attachment.attachmentId,
      deviceIndex: eni.attachment.deviceIndex,
      networkCardIndex: eni.attachment.networkCardIndex,
      status: eni.attachment.status,
      attachTime: isoTime(eni.attachment.attachTimeMs),
      deleteOnTermination: eni.attachment.deleteOnTermination,
    },
    privateIpAddressesSet: privateIpAddressesSet(state, eni),
    ipv4PrefixSet: state.describedIpv4Prefixes(eni).map((ipv4Prefix) => ({ ipv4Prefix })),
    ipv6PrefixSet: eni.ipv6Prefixes.map((ipv6Prefix) => ({ ipv6Prefix })),
    interfaceType: eni.interfaceType,
  };
}

/**
 * An Instance. A terminated instance keeps its id, type and tags but, as in EC2, has no network
 * interfaces, private address or private DNS name any more.
 */
export function renderInstance(state: Ec2State, instance: InstanceRecord): XmlObject {
  const terminated = instance.state === 'terminated';
  const interfaces = terminated ? [] : state.instanceNetworkInterfaces(instance.instanceId);
  const primary = interfaces.find((eni) => eni.attachment?.deviceIndex === 0);
  return {
    instanceId: instance.instanceId,
    imageId: instance.imageId,
    instanceState: { code: INSTANCE_STATE_CODES[instance.state], name: instance.state },
    privateDnsName: terminated ? '' : instance.privateDnsName,
    dnsName: '',
    reason: '',
    amiLaunchIndex: 0,
    productCodes: [],
    instanceType: instance.instanceType,
    launchTime: isoTime(instance.launchTimeMs),
    placement: { availabilityZone: instance.availabilityZone, groupName: '', tenancy: 'default' },
    monitoring: { state: 'disabled' },
    subnetId: terminated ? undefined : instance.subnetId,
    vpcId: terminated ? undefined : instance.vpcId,
    privateIpAddress: terminated ? undefined : instance.privateIpAddress,
    sourceDestCheck: true,
    groupSet: primary ? groupSet(state, primary.securityGroupIds) : [],
    architecture: 'x86_64',
    rootDeviceType: 'ebs',
    rootDeviceName: '/dev/xvda',
    blockDeviceMapping: [],
    virtualizationType: 'hvm',
    hypervisor: 'xen',
    tagSet: tagSet(instance.tags),
    networkInterfaceSet: interfaces.map((eni) => renderInstanceNetworkInterface(state, eni)),
    ebsOptimized: false,
    enaSupport: true,
  };
}

export function renderSubnet(state: Ec2State, subnet: SubnetRecord): XmlObject {
  return {
    subnetId: subnet.subnetId,
    subnetArn: `arn:aws:ec2:${state.region}:${state.vpcOwnerAccountId}:subnet/${subnet.subnetId}`,
    state: 'available',
    vpcId: subnet.vpcId,
    ownerId: state.vpcOwnerAccountId,
    cidrBlock: subnet.cidrBlock,
    availableIpAddressCount: state.availableIpAddressCount(subnet.subnetId),
    availabilityZone: subnet.availabilityZone,
    availabilityZoneId: availabilityZoneId(subnet.availabilityZone),
    defaultForAz: false,
    mapPublicIpOnLaunch: false,
    assignIpv6AddressOnCreation: false,
    ipv6CidrBlockAssociationSet:
      subnet.ipv6CidrBlock === undefined
        ? []
        : [
            {
              associationId: subnet.ipv6CidrBlockAssociationId,
              ipv6CidrBlock: subnet.ipv6CidrBlock,
              ipv6CidrBlockState: { state: 'associated' },
              ipv6AddressAttribute: 'public',
              ipSource: 'amazon',
            },
          ],
    ipv6Native: false,
    tagSet: tagSet(subnet.tags),
  };
}

export function renderVpc(state: Ec2State, vpc: VpcRecord): XmlObject {
  return {
    vpcId: vpc.vpcId,
    ownerId: state.vpcOwnerAccountId,
    state: 'available',
    cidrBlock: vpc.cidrBlock,
    cidrBlockAssociationSet: vpc.cidrBlockAssociations.map((association) => ({
      associationId: association.associationId,
      cidrBlock: association.cidrBlock,
      cidrBlockState: { state: 'associated' },
    })),
    ipv6CidrBlockAssociationSet: vpc.ipv6CidrBlockAssociations.map((association) => ({
      associationId: association.associationId,
      ipv6CidrBlock: association.ipv6CidrBlock,
      ipv6CidrBlockState: { state: 'associated' },
      networkBorderGroup: state.region,
      ipv6Pool: 'Amazon',
      ipv6AddressAttribute: 'public',
      ipSource: 'amazon',
    })),
    dhcpOptionsId: 'dopt-00000000000000001',
    instanceTenancy: 'default',
    isDefault: vpc.isDefault,
    tagSet: tagSet(vpc.tags),
  };
}

export function renderSecurityGroup(state: Ec2State, group: SecurityGroupRecord): XmlObject {
  return {
    ownerId: state.accountId,
    groupId: group.groupId,
    groupName: group.groupName,
    groupDescription: group.description,
    vpcId: group.vpcId,
    securityGroupArn: `arn:aws:ec2:${state.region}:${state.accountId}:security-group/${group.groupId}`,
    ipPermissions: [],
    ipPermissionsEgress: [],
    tagSet: tagSet(group.tags),
  };
}

/**
 * A RouteTable: one `local` route per VPC CIDR; the main table lists its `main` association and
 * only explicitly associated subnets appear in associationSet (as in EC2).
 */
export function renderRouteTable(state: Ec2State, table: RouteTableRecord): XmlObject {
  const associated = (subnetId: string | undefined, main: boolean): XmlObject => ({
    routeTableAssociationId: `rtbassoc-${(subnetId ?? table.routeTableId).split('-')[1] ?? ''}`,
    routeTableId: table.routeTableId,
    subnetId,
    main,
    associationState: { state: 'associated' },
  });
  return {
    routeTableId: table.routeTableId,
    vpcId: table.vpcId,
    ownerId: state.accountId,
    routeSet: state.vpcCidrBlocks(table.vpcId).map((cidr) => ({
      destinationCidrBlock: cidr,
      gatewayId: 'local',
      state: 'active',
      origin: 'CreateRouteTable',
    })),
    associationSet: [
      ...(table.main ? [associated(undefined, true)] : []),
      ...state
        .explicitSubnetAssociations(table.routeTableId)
        .map((subnet) => associated(subnet.subnetId, false)),
    ],
    propagatingVgwSet: [],
    tagSet: tagSet(table.tags),
  };
}

export function renderInstanceType(info: InstanceTypeInfo): XmlObject {
  return {
    instanceType: info.instanceType,
    currentGeneration: true,
    bareMetal: info.bareMetal,
    hypervisor: info.hypervisor === '' ? undefined : info.hypervisor,
    networkInfo: {
      networkPerformance: 'Up to 10 Gigabit',
      maximumNetworkInterfaces: info.maxInterfaces,
      maximumNetworkCards: 1,
      defaultNetworkCardIndex: 0,
      networkCards: [{ networkCardIndex: 0, maximumNetworkInterfaces: info.maxInterfaces }],
      ipv4AddressesPerInterface: info.ipv4PerInterface,
      ipv6AddressesPerInterface: info.ipv6PerInterface,
      ipv6Supported: info.ipv6PerInterface > 0,
      enaSupport: info.hypervisor === 'xen' ? 'supported' : 'required',
    },
  };
}
