import { type Cidr, cidrContains, cidrsOverlap, formatCidr, mustParseCidr } from './addresses.ts';
import { type ClusterSeed, type ClusterSeedOptions, seedEksStyleCluster } from './cluster-seed.ts';
import { ec2Errors } from './errors.ts';
import { EventualConsistency } from './eventual-consistency.ts';
import {
  describeInstanceType,
  type InstanceTypeInfo,
  type InstanceTypeLimits,
  staticInstanceTypeLimits,
} from './instance-types.ts';
import {
  ipv6CidrWithin,
  SUBNET_IPV6_PREFIX_LENGTH,
  tryParseIpv6Cidr,
  VPC_IPV6_PREFIX_LENGTH,
} from './ipv6-addresses.ts';
import type {
  AddRouteTableInput,
  AddSecurityGroupInput,
  AddSubnetInput,
  AddVpcInput,
  AssignIpv6AddressesRequest,
  AssignPrivateIpAddressesRequest,
  AttachmentRecord,
  AttachNetworkInterfaceRequest,
  CreateNetworkInterfaceRequest,
  InstanceRecord,
  InstanceStateChangeListener,
  InstanceStateName,
  LaunchInstanceInput,
  ModifyNetworkInterfaceAttributeRequest,
  NetworkInterfaceQuery,
  NetworkInterfaceRecord,
  RouteTableRecord,
  SecurityGroupRecord,
  SubnetRecord,
  Tags,
  UnassignIpv6AddressesRequest,
  UnassignPrivateIpAddressesRequest,
  VpcRecord,
} from './records.ts';
import { nonNegativeParameter, SubnetAddressing } from './subnet-addressing.ts';

/**
 * The EC2 state model: VPCs, subnets with real address pools, security groups, route tables,
 * instances and network interfaces, and the rules EC2 enforces on them. No HTTP here: the server
 * parses requests into the typed requests of records.ts and renders the returned records. The
 * subnets' address pools are in subnet-addressing.ts, EC2's eventual consistency in
 * eventual-consistency.ts, the cluster seed in cluster-seed.ts.
 *
 * Every ENI ever created stays in the model (deleted ones carry `deletedAtMs`) so tests can check
 * "no duplicate, no leak" over the whole history.
 */

export interface Ec2StateOptions {
  /** Epoch milliseconds; default Date.now. A bench passes a simulated clock. */
  clock?: () => number;
  /** The `eventual-consistency` fault from the start (faults.ts): its delay in ms (default 0, off). */
  eventualConsistencyMs?: number;
  /** Region used for DNS names and ARNs (default us-east-1). */
  region?: string;
  /** Account id reported as OwnerId (default 123456789012). */
  accountId?: string;
  /**
   * The account owning the VPCs and subnets (default `accountId`): another one models a VPC shared
   * with this account through RAM, whose subnet and VPC ARNs carry the owner's account.
   */
  vpcOwnerAccountId?: string;
}

/**
 * The most secondary-address slots any instance type offers on one ENI (the 50-address types),
 * minus the primary. CreateNetworkInterface is not bound to an instance type, so this caps it.
 */
const MAX_SECONDARY_SLOTS_ON_UNATTACHED_ENI = 49;
/** The most IPv6 addresses any instance type offers on one ENI (as many as IPv4): caps an unattached ENI. */
const MAX_IPV6_ON_UNATTACHED_ENI = 50;

const ENI_ID_PATTERN = /^eni-([0-9a-f]{8}|[0-9a-f]{17})$/;
const INSTANCE_ID_PATTERN = /^i-([0-9a-f]{8}|[0-9a-f]{17})$/;

/** Instance states in which AttachNetworkInterface is accepted: hot attach (running) and warm attach (stopped). */
const ATTACHABLE_INSTANCE_STATES: ReadonlySet<InstanceStateName> = new Set(['running', 'stopped']);

export class Ec2State {
  readonly region: string;
  readonly accountId: string;
  readonly vpcOwnerAccountId: string;
  private clock: () => number;
  /** What the API shows lags behind the state for a while after a create or an unassign. */
  private readonly eventualConsistency: EventualConsistency;
  private readonly addressing = new SubnetAddressing();

  private readonly vpcs = new Map<string, VpcRecord & { cidrs: Cidr[] }>();
  private readonly subnetRecords = new Map<string, SubnetRecord>();
  private readonly securityGroupRecords = new Map<string, SecurityGroupRecord>();
  private readonly routeTableRecords = new Map<string, RouteTableRecord>();
  private readonly instanceRecords = new Map<string, InstanceRecord>();
  private readonly eniRecords = new Map<string, NetworkInterfaceRecord>();
  private readonly instanceTypes = new Map<string, InstanceTypeLimits>(staticInstanceTypeLimits());
  /** CreateNetworkInterface ClientToken -> (request fingerprint, ENI id). */
  private readonly clientTokens = new Map<string, { fingerprint: string; networkInterfaceId: string }>();
  private readonly idCounters = new Map<string, number>();
  private readonly stateChangeListeners = new Set<InstanceStateChangeListener>();
  private sequence = 0;

  constructor(options: Ec2StateOptions = {}) {
    this.clock = options.clock ?? Date.now;
    this.eventualConsistency = new EventualConsistency(() => this.now(), options.eventualConsistencyMs ?? 0);
    this.region = options.region ?? 'us-east-1';
    this.accountId = options.accountId ?? '123456789012';
    this.vpcOwnerAccountId = options.vpcOwnerAccountId ?? this.accountId;
  }

  // ---------------------------------------------------------------- settings

  now(): number {
    return this.clock();
  }

  setClock(clock: () => number): void {
    this.clock = clock;
  }

  /** The `eventual-consistency` fault's delay (0 turns it off); the emulator arms it through `faults.arm`. */
  setEventualConsistencyMs(milliseconds: number): void {
    this.eventualConsistency.setDelayMs(milliseconds);
  }

  /**
   * Calls `listener` synchronously after every instance state transition: a launch reports
   * `pending` then `running` (then the requested state, if another), as EC2 emits one state-change
   * event per transition. Listeners must not throw. Returns the unsubscribe function.
   */
  onInstanceStateChange(listener: InstanceStateChangeListener): () => void {
    this.stateChangeListeners.add(listener);
    return () => this.stateChangeListeners.delete(listener);
  }

  private emitStateChange(instanceId: string, state: InstanceStateName): void {
    for (const listener of this.stateChangeListeners) listener({ instanceId, state });
  }

  /** Adds or overrides an instance type's limits (e.g. a tiny type for limit tests). */
  defineInstanceType(instanceType: string, limits: InstanceTypeLimits): void {
    this.instanceTypes.set(instanceType, limits);
  }

  instanceTypeInfo(instanceType: string): InstanceTypeInfo | undefined {
    const limits = this.instanceTypes.get(instanceType);
    return limits ? describeInstanceType(instanceType, limits) : undefined;
  }

  allInstanceTypes(): InstanceTypeInfo[] {
    return [...this.instanceTypes].map(([name, limits]) => describeInstanceType(name, limits));
  }

  // ---------------------------------------------------------------- seeding

  addVpc(input: AddVpcInput): VpcRecord {
    const primary = mustParseCidr(input.cidrBlock);
    const vpcId = this.newId('vpc');
    const mainRouteTableId = this.newId('rtb');
    const defaultSecurityGroupId = this.newId('sg');
    const vpc = {
      vpcId,
      cidrBlock: input.cidrBlock,
      cidrBlockAssociations: [{ associationId: this.newId('vpc-cidr-assoc'), cidrBlock: input.cidrBlock }],
      ipv6CidrBlockAssociations: [],
      cidrs: [primary],
      isDefault: false,
      mainRouteTableId,
      defaultSecurityGroupId,
      tags: { ...input.tags },
    };
    this.vpcs.set(vpcId, vpc);
    // Every VPC comes with a main route table and a security group named "default".
    this.routeTableRecords.set(mainRouteTableId, {
      routeTableId: mainRouteTableId,
      vpcId,
      main: true,
      tags: {},
    });
    this.securityGroupRecords.set(defaultSecurityGroupId, {
      groupId: defaultSecurityGroupId,
      groupName: 'default',
      description: 'default VPC security group',
      vpcId,
      tags: {},
    });
    for (const cidr of input.secondaryCidrBlocks ?? []) this.addVpcCidr(vpcId, cidr);
    if (input.ipv6CidrBlock !== undefined) {
      this.addVpcIpv6Cidr(vpcId, input.ipv6CidrBlock === true ? undefined : input.ipv6CidrBlock);
    }
    return structuredClone(this.vpcRecord(vpcId));
  }

  /**
   * AssociateVpcCidrBlock with an IPv6 /56: `cidrBlock`, or an Amazon-provided one (a deterministic
   * block per VPC in `2600:1f18::/32`). Returns the block.
   */
  addVpcIpv6Cidr(vpcId: string, cidrBlock?: string): string {
    const vpc = this.vpcRecord(vpcId);
    const block = cidrBlock ?? amazonProvidedIpv6Block(this.vpcs.size + vpc.ipv6CidrBlockAssociations.length);
    const parsed = tryParseIpv6Cidr(block);
    if (parsed?.prefixLength !== VPC_IPV6_PREFIX_LENGTH)
      throw new Error(`a VPC IPv6 block is a /56, not ${block}`);
    vpc.ipv6CidrBlockAssociations.push({ associationId: this.newId('vpc-cidr-assoc'), ipv6CidrBlock: block });
    return block;
  }

  /**
   * AssociateSubnetCidrBlock: the subnet becomes dual-stack with `cidrBlock`, a /64 inside one of
   * its VPC's IPv6 blocks that no other subnet holds. A subnet has at most one IPv6 block.
   */
  addSubnetIpv6Cidr(subnetId: string, cidrBlock: string): void {
    const subnet = this.subnetRecord(subnetId);
    const block = tryParseIpv6Cidr(cidrBlock);
    if (block?.prefixLength !== SUBNET_IPV6_PREFIX_LENGTH)
      throw new Error(`a subnet IPv6 block is a /64, not ${cidrBlock}`);
    if (subnet.ipv6CidrBlock !== undefined)
      throw new Error(`${subnetId} already has ${subnet.ipv6CidrBlock}`);
    const vpcBlocks = this.vpcRecord(subnet.vpcId).ipv6CidrBlockAssociations;
    if (
      !vpcBlocks.some((association) => ipv6CidrWithin(tryParseIpv6Cidr(association.ipv6CidrBlock)!, block))
    ) {
      throw new Error(`${cidrBlock} is outside every IPv6 block of ${subnet.vpcId}`);
    }
    const taken = [...this.subnetRecords.values()].find((other) => other.ipv6CidrBlock === cidrBlock);
    if (taken) throw new Error(`${cidrBlock} is already the IPv6 block of ${taken.subnetId}`);
    subnet.ipv6CidrBlock = cidrBlock;
    subnet.ipv6CidrBlockAssociationId = this.newId('subnet-cidr-assoc');
    this.addressing.addIpv6Block(subnetId, cidrBlock);
  }

  /** AssociateVpcCidrBlock: a secondary IPv4 CIDR (e.g. 100.64.0.0/16 for pods). */
  addVpcCidr(vpcId: string, cidrBlock: string): void {
    const vpc = this.vpcs.get(vpcId);
    if (!vpc) throw ec2Errors.vpcNotFound(vpcId);
    const cidr = mustParseCidr(cidrBlock);
    if (vpc.cidrs.some((existing) => cidrsOverlap(existing, cidr))) {
      throw new Error(`CIDR ${cidrBlock} overlaps a CIDR of ${vpcId}`);
    }
    vpc.cidrs.push(cidr);
    vpc.cidrBlockAssociations.push({ associationId: this.newId('vpc-cidr-assoc'), cidrBlock });
  }

  addRouteTable(input: AddRouteTableInput): RouteTableRecord {
    if (!this.vpcs.has(input.vpcId)) throw ec2Errors.vpcNotFound(input.vpcId);
    const record: RouteTableRecord = {
      routeTableId: this.newId('rtb'),
      vpcId: input.vpcId,
      main: false,
      tags: { ...input.tags },
    };
    this.routeTableRecords.set(record.routeTableId, record);
    return structuredClone(record);
  }

  addSubnet(input: AddSubnetInput): SubnetRecord {
    const vpc = this.vpcs.get(input.vpcId);
    if (!vpc) throw ec2Errors.vpcNotFound(input.vpcId);
    const cidr = mustParseCidr(input.cidrBlock);
    if (cidr.prefixLength < 16 || cidr.prefixLength > 28)
      throw new Error('an EC2 subnet is between /16 and /28');
    if (!vpc.cidrs.some((vpcCidr) => cidrContains(vpcCidr, cidr))) {
      throw new Error(`subnet ${input.cidrBlock} is outside every CIDR of ${input.vpcId}`);
    }
    for (const other of this.subnetRecords.values()) {
      if (other.vpcId === input.vpcId && cidrsOverlap(mustParseCidr(other.cidrBlock), cidr)) {
        throw new Error(`subnet ${input.cidrBlock} overlaps ${other.subnetId}`);
      }
    }
    if (input.routeTableId !== undefined) {
      const table = this.routeTableRecords.get(input.routeTableId);
      if (!table || table.vpcId !== input.vpcId) throw ec2Errors.routeTableNotFound(input.routeTableId);
    }
    const record: SubnetRecord = {
      subnetId: this.newId('subnet'),
      vpcId: input.vpcId,
      availabilityZone: input.availabilityZone,
      cidrBlock: formatCidr(cidr),
      routeTableId: input.routeTableId,
      fragmented: input.fragmented ?? false,
      ipv6CidrBlock: undefined,
      ipv6CidrBlockAssociationId: undefined,
      tags: { ...input.tags },
    };
    this.subnetRecords.set(record.subnetId, record);
    this.addressing.addIpv4Block(record.subnetId, cidr);
    if (input.ipv6CidrBlock !== undefined) this.addSubnetIpv6Cidr(record.subnetId, input.ipv6CidrBlock);
    return structuredClone(this.subnetRecord(record.subnetId));
  }

  /**
   * The `fragmented-subnet` fault (faults.ts): prefixes fail with InsufficientCidrBlocks, single IPs
   * still work. Set here directly, `faults.disarmAll` leaves it; through `faults.arm`, it clears it.
   */
  setSubnetFragmented(subnetId: string, fragmented: boolean): void {
    this.subnetRecord(subnetId).fragmented = fragmented;
  }

  addSecurityGroup(input: AddSecurityGroupInput): SecurityGroupRecord {
    if (!this.vpcs.has(input.vpcId)) throw ec2Errors.vpcNotFound(input.vpcId);
    const record: SecurityGroupRecord = {
      groupId: this.newId('sg'),
      groupName: input.groupName,
      description: input.description ?? input.groupName,
      vpcId: input.vpcId,
      tags: { ...input.tags },
    };
    this.securityGroupRecords.set(record.groupId, record);
    return structuredClone(record);
  }

  /**
   * RunInstances for one instance: its primary ENI is created in the subnet and attached at
   * device index 0 with DeleteOnTermination true, and is visible at once.
   */
  launchInstance(input: LaunchInstanceInput): InstanceRecord {
    if (!this.instanceTypes.has(input.instanceType))
      throw ec2Errors.invalidInstanceType([input.instanceType]);
    const subnet = this.subnetRecord(input.subnetId);
    const securityGroupIds = input.securityGroupIds ?? [this.vpcRecord(subnet.vpcId).defaultSecurityGroupId];
    this.requireSecurityGroupsInVpc(securityGroupIds, subnet.vpcId);
    const instanceId = this.newId('i');
    const now = this.now();
    const primaryEni = this.createNetworkInterfaceRecord({
      subnet,
      securityGroupIds,
      description: '',
      primaryAddress: input.privateIpAddress,
      secondaryCount: 0,
      explicitSecondaries: [],
      prefixCount: 0,
      explicitPrefixes: [],
      ipv6Prefixes: [],
      interfaceType: 'interface',
      tags: { ...input.primaryNetworkInterfaceTags },
      clientToken: undefined,
      visibleAtMs: now,
    });
    primaryEni.attachment = {
      attachmentId: this.newId('eni-attach'),
      instanceId,
      deviceIndex: 0,
      networkCardIndex: 0,
      attachTimeMs: now,
      deleteOnTermination: true,
      status: 'attached',
    };
    primaryEni.status = 'in-use';
    const instance: InstanceRecord = {
      instanceId,
      reservationId: this.newId('r'),
      imageId: input.imageId ?? 'ami-0123456789abcdef0',
      instanceType: input.instanceType,
      availabilityZone: subnet.availabilityZone,
      subnetId: subnet.subnetId,
      vpcId: subnet.vpcId,
      privateIpAddress: primaryEni.privateIpAddress,
      privateDnsName: primaryEni.privateDnsName,
      launchTimeMs: now,
      sequence: this.nextSequence(),
      state: 'running',
      tags: { ...input.tags },
    };
    this.instanceRecords.set(instanceId, instance);
    this.emitStateChange(instanceId, 'pending');
    this.emitStateChange(instanceId, 'running');
    if (input.state && input.state !== 'running') this.setInstanceState(instanceId, input.state);
    return structuredClone(instance);
  }

  /**
   * Moves an instance to a state. Reaching `terminated` mirrors EC2: ENIs attached with
   * DeleteOnTermination are deleted (their addresses return to the subnet), the others are
   * detached and become `available`. A terminated instance never changes state again. A real
   * transition (not a no-op) is reported to `onInstanceStateChange` listeners.
   */
  setInstanceState(instanceId: string, state: InstanceStateName): void {
    const instance = this.instanceRecord(instanceId);
    if (instance.state === 'terminated') throw new Error(`${instanceId} is terminated`);
    const previous = instance.state;
    instance.state = state;
    if (state === 'terminated') this.releaseEnisOfTerminated(instanceId);
    if (state !== previous) this.emitStateChange(instanceId, state);
  }

  private releaseEnisOfTerminated(instanceId: string): void {
    for (const eni of this.liveEnis()) {
      if (eni.attachment?.instanceId !== instanceId) continue;
      if (eni.attachment.deleteOnTermination) {
        eni.attachment = undefined;
        eni.status = 'available';
        this.deleteEni(eni);
      } else {
        eni.attachment = undefined;
        eni.status = 'available';
      }
    }
  }

  /** Seeds a typical EKS-style VPC (see `seedEksStyleCluster`). */
  seedCluster(options: ClusterSeedOptions = {}): ClusterSeed {
    return seedEksStyleCluster(this, options);
  }

  // ---------------------------------------------------------------- omniscient queries (for tests)

  vpc(vpcId: string): VpcRecord | undefined {
    const vpc = this.vpcs.get(vpcId);
    return vpc ? structuredClone(withoutCidrs(vpc)) : undefined;
  }

  subnet(subnetId: string): (SubnetRecord & { availableIpAddressCount: number }) | undefined {
    const subnet = this.subnetRecords.get(subnetId);
    return subnet
      ? { ...structuredClone(subnet), availableIpAddressCount: this.availableIpAddressCount(subnetId) }
      : undefined;
  }

  availableIpAddressCount(subnetId: string): number {
    return this.addressing.availableCount(subnetId);
  }

  instance(instanceId: string): InstanceRecord | undefined {
    const instance = this.instanceRecords.get(instanceId);
    return instance ? structuredClone(instance) : undefined;
  }

  networkInterface(networkInterfaceId: string): NetworkInterfaceRecord | undefined {
    const eni = this.eniRecords.get(networkInterfaceId);
    return eni ? structuredClone(eni) : undefined;
  }

  /** Live ENIs (or the whole history with includeDeleted), in creation order, ignoring visibility delays. */
  networkInterfaces(query: NetworkInterfaceQuery = {}): NetworkInterfaceRecord[] {
    return [...this.eniRecords.values()]
      .filter((eni) => query.includeDeleted || eni.deletedAtMs === undefined)
      .filter((eni) => query.instanceId === undefined || eni.attachment?.instanceId === query.instanceId)
      .filter(
        (eni) => query.status === undefined || (eni.deletedAtMs === undefined && eni.status === query.status),
      )
      .filter((eni) => query.subnetId === undefined || eni.subnetId === query.subnetId)
      .map((eni) => structuredClone(eni));
  }

  /** Every ENI ever created, deleted ones included. */
  networkInterfaceHistory(): NetworkInterfaceRecord[] {
    return this.networkInterfaces({ includeDeleted: true });
  }

  // ---------------------------------------------------------------- API-facing reads (respect visibility)

  listVpcs(): VpcRecord[] {
    return [...this.vpcs.values()].map(withoutCidrs);
  }

  listSubnets(): SubnetRecord[] {
    return [...this.subnetRecords.values()];
  }

  listSecurityGroups(): SecurityGroupRecord[] {
    return [...this.securityGroupRecords.values()];
  }

  listRouteTables(): RouteTableRecord[] {
    return [...this.routeTableRecords.values()];
  }

  /** Subnets explicitly associated with a route table (the main table's implicit ones are not listed, as in EC2). */
  explicitSubnetAssociations(routeTableId: string): SubnetRecord[] {
    return this.listSubnets().filter((subnet) => subnet.routeTableId === routeTableId);
  }

  vpcCidrBlocks(vpcId: string): string[] {
    return this.vpcRecord(vpcId).cidrBlockAssociations.map((association) => association.cidrBlock);
  }

  listInstances(): InstanceRecord[] {
    return [...this.instanceRecords.values()];
  }

  /** ENIs the API can see now: live and past their eventual-consistency delay. */
  listVisibleNetworkInterfaces(): NetworkInterfaceRecord[] {
    return this.liveEnis().filter((eni) => this.isVisible(eni));
  }

  /** ENIs attached to an instance, by device index (what DescribeInstances lists). */
  instanceNetworkInterfaces(instanceId: string): NetworkInterfaceRecord[] {
    return this.liveEnis()
      .filter((eni) => eni.attachment?.instanceId === instanceId)
      .sort((a, b) => (a.attachment?.deviceIndex ?? 0) - (b.attachment?.deviceIndex ?? 0));
  }

  requireVpc(vpcId: string): VpcRecord {
    return withoutCidrs(this.vpcRecord(vpcId));
  }

  requireSubnet(subnetId: string): SubnetRecord {
    return this.subnetRecord(subnetId);
  }

  requireSecurityGroup(groupId: string): SecurityGroupRecord {
    const group = this.securityGroupRecords.get(groupId);
    if (!group) throw ec2Errors.securityGroupNotFound(groupId);
    return group;
  }

  requireRouteTable(routeTableId: string): RouteTableRecord {
    return this.routeTableRecord(routeTableId);
  }

  requireInstance(instanceId: string): InstanceRecord {
    return this.instanceRecord(instanceId);
  }

  /** Looks an ENI up as the API does: malformed ids, unknown, deleted and not-yet-visible ENIs all fail. */
  requireVisibleNetworkInterface(networkInterfaceId: string): NetworkInterfaceRecord {
    if (!ENI_ID_PATTERN.test(networkInterfaceId))
      throw ec2Errors.networkInterfaceMalformed(networkInterfaceId);
    const eni = this.eniRecords.get(networkInterfaceId);
    if (!eni || eni.deletedAtMs !== undefined || !this.isVisible(eni)) {
      throw ec2Errors.networkInterfaceNotFound(networkInterfaceId);
    }
    return eni;
  }

  // ---------------------------------------------------------------- API mutations

  /**
   * CreateNetworkInterface. With a ClientToken it is idempotent: the same token and the same
   * parameters return the ENI created the first time without touching anything; the same token
   * with other parameters fails with IdempotentParameterMismatch. A failed request leaves no
   * token behind, so it may be retried with the same token.
   */
  createNetworkInterface(request: CreateNetworkInterfaceRequest): {
    networkInterface: NetworkInterfaceRecord;
    replayed: boolean;
  } {
    const fingerprint = requestFingerprint(request);
    if (request.clientToken !== undefined) {
      const previous = this.clientTokens.get(request.clientToken);
      if (previous && previous.fingerprint !== fingerprint) {
        throw ec2Errors.idempotentParameterMismatch(request.clientToken);
      }
      if (previous) {
        const eni = this.eniRecords.get(previous.networkInterfaceId);
        if (eni) return { networkInterface: eni, replayed: true };
      }
    }

    const subnet = this.subnetRecord(request.subnetId);
    const securityGroupIds = request.securityGroupIds?.length
      ? request.securityGroupIds
      : [this.vpcRecord(subnet.vpcId).defaultSecurityGroupId];
    this.requireSecurityGroupsInVpc(securityGroupIds, subnet.vpcId);

    const explicitAddresses = request.privateIpAddresses ?? [];
    const addressChoices = [
      request.secondaryPrivateIpAddressCount !== undefined,
      explicitAddresses.length > 0,
      request.ipv4PrefixCount !== undefined,
      (request.ipv4Prefixes ?? []).length > 0,
    ].filter(Boolean).length;
    // API_CreateNetworkInterface: a count of IPs, specific IPs, a count of prefixes and specific
    // prefixes exclude one another.
    if (addressChoices > 1) {
      throw ec2Errors.invalidParameterCombination(
        'SecondaryPrivateIpAddressCount, PrivateIpAddresses, Ipv4PrefixCount and Ipv4Prefixes are mutually exclusive.',
      );
    }
    const primaries = explicitAddresses.filter((entry) => entry.primary);
    if (primaries.length > 1 || (primaries.length === 1 && request.privateIpAddress !== undefined)) {
      throw ec2Errors.invalidParameterValue('Only one primary private IP address may be specified.');
    }
    const primaryAddress = request.privateIpAddress ?? primaries[0]?.privateIpAddress;
    const explicitSecondaries = explicitAddresses
      .filter((entry) => !entry.primary)
      .map((entry) => entry.privateIpAddress);
    const secondaryCount = nonNegativeParameter(
      'SecondaryPrivateIpAddressCount',
      request.secondaryPrivateIpAddressCount ?? 0,
    );
    const prefixCount = nonNegativeParameter('Ipv4PrefixCount', request.ipv4PrefixCount ?? 0);
    const explicitPrefixes = request.ipv4Prefixes ?? [];
    const slots = secondaryCount + explicitSecondaries.length + prefixCount + explicitPrefixes.length;
    if (slots > MAX_SECONDARY_SLOTS_ON_UNATTACHED_ENI) throw ec2Errors.privateIpAddressLimitExceeded();
    // Checked before any IPv4 address is taken, so a refused IPv6 part leaves nothing behind.
    const ipv6Prefixes = this.addressing.chooseIpv6Prefixes(subnet, request, 0, MAX_IPV6_ON_UNATTACHED_ENI);

    const eni = this.createNetworkInterfaceRecord({
      subnet,
      securityGroupIds,
      description: request.description ?? '',
      primaryAddress,
      secondaryCount,
      explicitSecondaries,
      prefixCount,
      explicitPrefixes,
      ipv6Prefixes,
      interfaceType: request.interfaceType ?? 'interface',
      tags: { ...request.tags },
      clientToken: request.clientToken,
      visibleAtMs: this.eventualConsistency.visibleAtMsOfNewEni(),
    });
    if (request.clientToken !== undefined) {
      this.clientTokens.set(request.clientToken, { fingerprint, networkInterfaceId: eni.networkInterfaceId });
    }
    return { networkInterface: eni, replayed: false };
  }

  /**
   * AttachNetworkInterface, checked in this order: ENI and instance exist (the ENI also must be
   * visible), the instance is running or stopped (hot or warm attach), the ENI is not attached,
   * same VPC and AZ, network card 0, the device index is free, the instance type's ENI limit,
   * and the ENI's addresses fit the instance type.
   */
  attachNetworkInterface(request: AttachNetworkInterfaceRequest): AttachmentRecord {
    const eni = this.requireVisibleNetworkInterface(request.networkInterfaceId);
    const instance = this.instanceRecord(request.instanceId);
    if (!ATTACHABLE_INSTANCE_STATES.has(instance.state)) {
      throw ec2Errors.incorrectInstanceState(instance.instanceId, instance.state);
    }
    if (eni.attachment) throw ec2Errors.networkInterfaceAttached(eni.networkInterfaceId);
    if (eni.vpcId !== instance.vpcId)
      throw ec2Errors.vpcMismatch(eni.networkInterfaceId, instance.instanceId);
    if (eni.availabilityZone !== instance.availabilityZone) {
      throw ec2Errors.availabilityZoneMismatch(eni.networkInterfaceId, instance.instanceId);
    }
    const networkCardIndex = request.networkCardIndex ?? 0;
    // The static limits table has no per-card data, so the emulator models card 0 only.
    if (networkCardIndex !== 0) {
      throw ec2Errors.invalidParameterValue(
        `Network card index ${networkCardIndex} is not supported for instance type ${instance.instanceType}.`,
      );
    }
    if (!Number.isInteger(request.deviceIndex) || request.deviceIndex < 0) {
      throw ec2Errors.invalidParameterValue(`Invalid value '${request.deviceIndex}' for DeviceIndex.`);
    }
    const attached = this.instanceNetworkInterfaces(instance.instanceId);
    // The error text cilium matches ("interface attached at device") to retry with another index.
    if (attached.some((other) => other.attachment?.deviceIndex === request.deviceIndex)) {
      throw ec2Errors.deviceIndexInUse(instance.instanceId, request.deviceIndex);
    }
    const type = this.requireInstanceType(instance.instanceType);
    if (attached.length >= type.maxInterfaces) throw ec2Errors.attachmentLimitExceeded(instance.instanceType);
    // [inferred] an ENI carrying more addresses than the type allows per ENI cannot be attached.
    if (secondarySlots(eni) > type.ipv4PerInterface - 1) throw ec2Errors.privateIpAddressLimitExceeded();
    if (eni.ipv6Prefixes.length > 0 && type.ipv6PerInterface === 0)
      throw ec2Errors.ipv6NotSupported(type.instanceType);
    if (eni.ipv6Prefixes.length > type.ipv6PerInterface) throw ec2Errors.ipv6AddressLimitExceeded();
    if ((eni.ipv4Prefixes.length > 0 || eni.ipv6Prefixes.length > 0) && !type.supportsPrefixes)
      throw ec2Errors.prefixesNotSupported(type.instanceType);

    const attachment: AttachmentRecord = {
      attachmentId: this.newId('eni-attach'),
      instanceId: instance.instanceId,
      deviceIndex: request.deviceIndex,
      networkCardIndex,
      attachTimeMs: this.now(),
      // An ENI attached after launch has DeleteOnTermination false until modified.
      deleteOnTermination: false,
      status: 'attached',
    };
    eni.attachment = attachment;
    eni.status = 'in-use';
    return attachment;
  }

  /** ModifyNetworkInterfaceAttribute: attachment DeleteOnTermination, description, security groups. */
  modifyNetworkInterfaceAttribute(request: ModifyNetworkInterfaceAttributeRequest): void {
    const eni = this.requireVisibleNetworkInterface(request.networkInterfaceId);
    const changes = [request.attachment, request.description, request.securityGroupIds].filter(
      (change) => change !== undefined,
    );
    if (changes.length !== 1) {
      throw ec2Errors.invalidParameterCombination('Exactly one attribute must be modified per request.');
    }
    if (request.attachment) {
      // The attachment id must name this ENI's current attachment.
      if (eni.attachment?.attachmentId !== request.attachment.attachmentId) {
        throw ec2Errors.attachmentNotFound(request.attachment.attachmentId);
      }
      if (request.attachment.deleteOnTermination !== undefined) {
        eni.attachment.deleteOnTermination = request.attachment.deleteOnTermination;
      }
    }
    if (request.description !== undefined) eni.description = request.description;
    if (request.securityGroupIds !== undefined) {
      this.requireSecurityGroupsInVpc(request.securityGroupIds, eni.vpcId);
      eni.securityGroupIds = [...request.securityGroupIds];
    }
  }

  /**
   * AssignPrivateIpAddresses. Secondary IPs plus /28 prefixes may not exceed the attached
   * instance type's Ipv4AddressesPerInterface − 1 (each prefix takes one slot); prefixes only on
   * Nitro or bare metal; the subnet must have the addresses (InsufficientFreeAddressesInSubnet)
   * and, for prefixes, aligned free /28 blocks (InsufficientCidrBlocks).
   */
  assignPrivateIpAddresses(request: AssignPrivateIpAddressesRequest): {
    addresses: string[];
    prefixes: string[];
  } {
    const eni = this.requireVisibleNetworkInterface(request.networkInterfaceId);
    const explicitAddresses = request.privateIpAddresses ?? [];
    const explicitPrefixes = request.ipv4Prefixes ?? [];
    if (request.secondaryPrivateIpAddressCount !== undefined && explicitAddresses.length > 0) {
      throw ec2Errors.invalidParameterCombination(
        'SecondaryPrivateIpAddressCount and PrivateIpAddress are exclusive.',
      );
    }
    if (request.ipv4PrefixCount !== undefined && explicitPrefixes.length > 0) {
      throw ec2Errors.invalidParameterCombination('Ipv4PrefixCount and Ipv4Prefix are exclusive.');
    }
    const addressCount =
      nonNegativeParameter('SecondaryPrivateIpAddressCount', request.secondaryPrivateIpAddressCount ?? 0) +
      explicitAddresses.length;
    const prefixCount =
      nonNegativeParameter('Ipv4PrefixCount', request.ipv4PrefixCount ?? 0) + explicitPrefixes.length;
    if (addressCount === 0 && prefixCount === 0) {
      throw ec2Errors.missingParameter(
        'SecondaryPrivateIpAddressCount, PrivateIpAddress, Ipv4PrefixCount or Ipv4Prefix',
      );
    }

    const instance = eni.attachment ? this.instanceRecords.get(eni.attachment.instanceId) : undefined;
    const type = instance ? this.requireInstanceType(instance.instanceType) : undefined;
    const slotLimit = type ? type.ipv4PerInterface - 1 : MAX_SECONDARY_SLOTS_ON_UNATTACHED_ENI;
    if (secondarySlots(eni) + addressCount + prefixCount > slotLimit)
      throw ec2Errors.privateIpAddressLimitExceeded();
    if (prefixCount > 0 && type && !type.supportsPrefixes)
      throw ec2Errors.prefixesNotSupported(type.instanceType);

    const subnet = this.subnetRecord(eni.subnetId);
    const allocation = this.addressing.allocate(subnet, {
      primaryAddress: undefined,
      needsPrimary: false,
      secondaryCount: request.secondaryPrivateIpAddressCount ?? 0,
      explicitSecondaries: explicitAddresses,
      prefixCount: request.ipv4PrefixCount ?? 0,
      explicitPrefixes,
    });
    eni.secondaryPrivateIpAddresses.push(...allocation.secondaries);
    eni.ipv4Prefixes.push(...allocation.prefixes);
    return { addresses: allocation.secondaries, prefixes: allocation.prefixes };
  }

  /** UnassignPrivateIpAddresses: every address/prefix must be on the ENI; they return to the subnet. */
  unassignPrivateIpAddresses(request: UnassignPrivateIpAddressesRequest): void {
    const eni = this.requireVisibleNetworkInterface(request.networkInterfaceId);
    const addresses = request.privateIpAddresses ?? [];
    const prefixes = request.ipv4Prefixes ?? [];
    if (addresses.length === 0 && prefixes.length === 0) {
      throw ec2Errors.missingParameter('PrivateIpAddress or Ipv4Prefix');
    }
    for (const address of addresses) {
      if (address === eni.privateIpAddress) throw ec2Errors.primaryAddressCannotUnassign(address);
      if (!eni.secondaryPrivateIpAddresses.includes(address))
        throw ec2Errors.addressesNotAssigned(eni.networkInterfaceId);
    }
    for (const prefix of prefixes) {
      if (!eni.ipv4Prefixes.includes(prefix)) throw ec2Errors.addressesNotAssigned(eni.networkInterfaceId);
    }
    this.addressing.releaseIpv4(eni.subnetId, addresses, prefixes);
    eni.secondaryPrivateIpAddresses = eni.secondaryPrivateIpAddresses.filter(
      (address) => !addresses.includes(address),
    );
    eni.ipv4Prefixes = eni.ipv4Prefixes.filter((prefix) => !prefixes.includes(prefix));
    this.eventualConsistency.recordUnassigned(eni.networkInterfaceId, [...addresses, ...prefixes]);
  }

  /** The secondary addresses Describe lists for the ENI now: its own, and those still lingering. */
  describedSecondaryAddresses(eni: NetworkInterfaceRecord): string[] {
    return [
      ...eni.secondaryPrivateIpAddresses,
      ...this.eventualConsistency.stillListed(eni.networkInterfaceId, eni.secondaryPrivateIpAddresses, false),
    ];
  }

  /** The /28 prefixes Describe lists for the ENI now: its own, and those still lingering. */
  describedIpv4Prefixes(eni: NetworkInterfaceRecord): string[] {
    return [
      ...eni.ipv4Prefixes,
      ...this.eventualConsistency.stillListed(eni.networkInterfaceId, eni.ipv4Prefixes, true),
    ];
  }

  /**
   * AssignIpv6Addresses with /80 prefixes (`Ipv6PrefixCount` or `Ipv6Prefix.N`, never both). The
   * ENI's subnet must be dual-stack; each /80 counts as one address against the attached type's
   * Ipv6AddressesPerInterface (AWS: "each prefix counts as one IP address"), an unattached ENI
   * against the largest type's; prefixes only on Nitro or bare metal; a type without IPv6 refuses.
   */
  assignIpv6Addresses(request: AssignIpv6AddressesRequest): { prefixes: string[] } {
    const eni = this.requireVisibleNetworkInterface(request.networkInterfaceId);
    if (request.ipv6AddressCount !== undefined || (request.ipv6Addresses ?? []).length > 0) {
      throw new Error('AssignIpv6Addresses with single IPv6 addresses is not modelled by the emulator');
    }
    if ((request.ipv6PrefixCount ?? 0) === 0 && (request.ipv6Prefixes ?? []).length === 0) {
      throw ec2Errors.missingParameter('Ipv6AddressCount, Ipv6Addresses, Ipv6PrefixCount or Ipv6Prefix');
    }
    const instance = eni.attachment ? this.instanceRecords.get(eni.attachment.instanceId) : undefined;
    const type = instance ? this.requireInstanceType(instance.instanceType) : undefined;
    if (type && type.ipv6PerInterface === 0) throw ec2Errors.ipv6NotSupported(type.instanceType);
    if (type && !type.supportsPrefixes) throw ec2Errors.prefixesNotSupported(type.instanceType);
    const prefixes = this.addressing.chooseIpv6Prefixes(
      this.subnetRecord(eni.subnetId),
      request,
      eni.ipv6Prefixes.length,
      type ? type.ipv6PerInterface : MAX_IPV6_ON_UNATTACHED_ENI,
    );
    this.addressing.takeIpv6Prefixes(eni.subnetId, prefixes);
    eni.ipv6Prefixes.push(...prefixes);
    return { prefixes };
  }

  /** UnassignIpv6Addresses: every prefix must be on the ENI; they return to the subnet. */
  unassignIpv6Addresses(request: UnassignIpv6AddressesRequest): { prefixes: string[] } {
    const eni = this.requireVisibleNetworkInterface(request.networkInterfaceId);
    if ((request.ipv6Addresses ?? []).length > 0) {
      throw new Error('UnassignIpv6Addresses with single IPv6 addresses is not modelled by the emulator');
    }
    const prefixes = request.ipv6Prefixes ?? [];
    if (prefixes.length === 0) throw ec2Errors.missingParameter('Ipv6Addresses or Ipv6Prefix');
    if (prefixes.some((prefix) => !eni.ipv6Prefixes.includes(prefix))) {
      throw ec2Errors.addressesNotAssigned(eni.networkInterfaceId);
    }
    this.addressing.releaseIpv6Prefixes(eni.subnetId, prefixes);
    eni.ipv6Prefixes = eni.ipv6Prefixes.filter((prefix) => !prefixes.includes(prefix));
    return { prefixes };
  }

  /** DetachNetworkInterface: the primary ENI (device index 0) cannot be detached. */
  detachNetworkInterface(attachmentId: string): void {
    const eni = this.liveEnis().find((candidate) => candidate.attachment?.attachmentId === attachmentId);
    if (!eni?.attachment) throw ec2Errors.attachmentNotFound(attachmentId);
    if (eni.attachment.deviceIndex === 0) throw ec2Errors.primaryInterfaceCannotDetach();
    eni.attachment = undefined;
    eni.status = 'available';
  }

  /** DeleteNetworkInterface: refused while attached ("is currently in use"); frees every address. */
  deleteNetworkInterface(networkInterfaceId: string): void {
    const eni = this.requireVisibleNetworkInterface(networkInterfaceId);
    if (eni.attachment) throw ec2Errors.networkInterfaceInUseCannotDelete(networkInterfaceId);
    this.deleteEni(eni);
  }

  /** CreateTags: every resource must exist; tags overwrite values of the same key. */
  createTags(resourceIds: string[], tags: Tags): void {
    const targets = resourceIds.map((id) => this.taggableResource(id));
    for (const target of targets) target.tags = { ...target.tags, ...tags };
  }

  /** DeleteTags: without tags removes all; a key with a value removes it only if the value matches. */
  deleteTags(resourceIds: string[], tags: { key: string; value: string | undefined }[]): void {
    const targets = resourceIds.map((id) => this.taggableResource(id));
    for (const target of targets) {
      const remaining = { ...target.tags };
      if (tags.length === 0) {
        target.tags = {};
        continue;
      }
      for (const { key, value } of tags) {
        if (value === undefined || remaining[key] === value) delete remaining[key];
      }
      target.tags = remaining;
    }
  }

  // ---------------------------------------------------------------- internals

  private createNetworkInterfaceRecord(input: {
    subnet: SubnetRecord;
    securityGroupIds: string[];
    description: string;
    primaryAddress: string | undefined;
    secondaryCount: number;
    explicitSecondaries: string[];
    prefixCount: number;
    explicitPrefixes: string[];
    /** Already chosen (`chooseIpv6Prefixes`); taken here once the IPv4 addresses are. */
    ipv6Prefixes: string[];
    interfaceType: string;
    tags: Tags;
    clientToken: string | undefined;
    visibleAtMs: number;
  }): NetworkInterfaceRecord {
    const allocation = this.addressing.allocate(input.subnet, {
      primaryAddress: input.primaryAddress,
      needsPrimary: true,
      secondaryCount: input.secondaryCount,
      explicitSecondaries: input.explicitSecondaries,
      prefixCount: input.prefixCount,
      explicitPrefixes: input.explicitPrefixes,
    });
    const primary = allocation.primary ?? '';
    const sequence = this.nextSequence();
    const eni: NetworkInterfaceRecord = {
      networkInterfaceId: this.newId('eni'),
      subnetId: input.subnet.subnetId,
      vpcId: input.subnet.vpcId,
      availabilityZone: input.subnet.availabilityZone,
      macAddress: macAddressFor(sequence),
      privateIpAddress: primary,
      privateDnsName: this.privateDnsName(primary),
      interfaceType: input.interfaceType,
      requesterManaged: false,
      createdAtMs: this.now(),
      visibleAtMs: input.visibleAtMs,
      clientToken: input.clientToken,
      sequence,
      description: input.description,
      securityGroupIds: [...input.securityGroupIds],
      secondaryPrivateIpAddresses: allocation.secondaries,
      ipv4Prefixes: allocation.prefixes,
      ipv6Prefixes: [...input.ipv6Prefixes],
      status: 'available',
      attachment: undefined,
      tags: input.tags,
      deletedAtMs: undefined,
    };
    if (input.ipv6Prefixes.length > 0)
      this.addressing.takeIpv6Prefixes(input.subnet.subnetId, input.ipv6Prefixes);
    this.eniRecords.set(eni.networkInterfaceId, eni);
    return eni;
  }

  private deleteEni(eni: NetworkInterfaceRecord): void {
    this.addressing.releaseIpv4(
      eni.subnetId,
      [eni.privateIpAddress, ...eni.secondaryPrivateIpAddresses],
      eni.ipv4Prefixes,
    );
    if (eni.ipv6Prefixes.length > 0) this.addressing.releaseIpv6Prefixes(eni.subnetId, eni.ipv6Prefixes);
    eni.deletedAtMs = this.now();
  }

  private isVisible(eni: NetworkInterfaceRecord): boolean {
    return this.eventualConsistency.isVisible(eni.visibleAtMs);
  }

  private liveEnis(): NetworkInterfaceRecord[] {
    return [...this.eniRecords.values()].filter((eni) => eni.deletedAtMs === undefined);
  }

  private requireSecurityGroupsInVpc(groupIds: string[], vpcId: string): void {
    for (const groupId of groupIds) {
      const group = this.requireSecurityGroup(groupId);
      if (group.vpcId !== vpcId) {
        throw ec2Errors.invalidParameterValue(
          `Security group ${groupId} and subnet belong to different networks.`,
        );
      }
    }
  }

  private requireInstanceType(instanceType: string): InstanceTypeInfo {
    const info = this.instanceTypeInfo(instanceType);
    if (!info) throw ec2Errors.invalidInstanceType([instanceType]);
    return info;
  }

  private taggableResource(resourceId: string): { tags: Tags } {
    const dash = resourceId.lastIndexOf('-');
    const kind = resourceId.slice(0, dash);
    switch (kind) {
      case 'eni':
        return this.requireVisibleNetworkInterface(resourceId);
      case 'i':
        return this.instanceRecord(resourceId);
      case 'subnet':
        return this.subnetRecord(resourceId);
      case 'vpc':
        return this.vpcRecord(resourceId);
      case 'sg':
        return this.requireSecurityGroup(resourceId);
      case 'rtb':
        return this.routeTableRecord(resourceId);
      default:
        throw ec2Errors.invalidResourceId(resourceId);
    }
  }

  private vpcRecord(vpcId: string): VpcRecord & { cidrs: Cidr[] } {
    const vpc = this.vpcs.get(vpcId);
    if (!vpc) throw ec2Errors.vpcNotFound(vpcId);
    return vpc;
  }

  private subnetRecord(subnetId: string): SubnetRecord {
    const subnet = this.subnetRecords.get(subnetId);
    if (!subnet) throw ec2Errors.subnetNotFound(subnetId);
    return subnet;
  }

  private routeTableRecord(routeTableId: string): RouteTableRecord {
    const table = this.routeTableRecords.get(routeTableId);
    if (!table) throw ec2Errors.routeTableNotFound(routeTableId);
    return table;
  }

  private instanceRecord(instanceId: string): InstanceRecord {
    if (!INSTANCE_ID_PATTERN.test(instanceId)) throw ec2Errors.instanceMalformed(instanceId);
    const instance = this.instanceRecords.get(instanceId);
    if (!instance) throw ec2Errors.instanceNotFound(instanceId);
    return instance;
  }

  /** EC2-style ids: a prefix and 17 hex digits, deterministic per emulator. */
  private newId(prefix: string): string {
    const next = (this.idCounters.get(prefix) ?? 0) + 1;
    this.idCounters.set(prefix, next);
    return `${prefix}-${next.toString(16).padStart(17, '0')}`;
  }

  private nextSequence(): number {
    this.sequence += 1;
    return this.sequence;
  }

  /** `ip-10-0-1-23.ec2.internal` in us-east-1, `ip-….<region>.compute.internal` elsewhere. */
  private privateDnsName(address: string): string {
    const host = `ip-${address.replaceAll('.', '-')}`;
    return this.region === 'us-east-1' ? `${host}.ec2.internal` : `${host}.${this.region}.compute.internal`;
  }
}

/** Secondary-address slots an ENI uses: one per secondary IP and one per /28 prefix. */
function secondarySlots(eni: NetworkInterfaceRecord): number {
  return eni.secondaryPrivateIpAddresses.length + eni.ipv4Prefixes.length;
}

function macAddressFor(sequence: number): string {
  const bytes = [
    0x02,
    0x00,
    (sequence >>> 24) & 255,
    (sequence >>> 16) & 255,
    (sequence >>> 8) & 255,
    sequence & 255,
  ];
  return bytes.map((byte) => byte.toString(16).padStart(2, '0')).join(':');
}

/** The `n`-th Amazon-provided /56 of the emulator (deterministic, inside `2600:1f18::/32`). */
function amazonProvidedIpv6Block(n: number): string {
  return `2600:1f18:${(0x4a00 + n).toString(16)}:ab00::/56`;
}

function withoutCidrs(vpc: VpcRecord & { cidrs?: Cidr[] }): VpcRecord {
  const { cidrs: _cidrs, ...rest } = vpc;
  return rest;
}

/** A canonical form of a create request minus its token, to compare ClientToken retries. */
function requestFingerprint(request: CreateNetworkInterfaceRequest): string {
  const { clientToken: _token, ...rest } = request;
  return JSON.stringify(rest, (_key, value: unknown) =>
    value && typeof value === 'object' && !Array.isArray(value)
      ? Object.fromEntries(
          Object.entries(value as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b)),
        )
      : value,
  );
}
