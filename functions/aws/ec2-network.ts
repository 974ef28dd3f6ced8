import {
  type _InstanceType,
  AssignIpv6AddressesCommand,
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  DeleteNetworkInterfaceCommand,
  DescribeInstanceTypesCommand,
  DescribeVpcsCommand,
  DetachNetworkInterfaceCommand,
  EC2Client,
  type Filter,
  type Instance,
  type InstanceTypeInfo,
  ModifyNetworkInterfaceAttributeCommand,
  type NetworkInterface,
  paginateDescribeInstances,
  paginateDescribeNetworkInterfaces,
  paginateDescribeRouteTables,
  paginateDescribeSecurityGroups,
  paginateDescribeSubnets,
  type RouteTable,
  type Subnet,
  type Tag,
  UnassignPrivateIpAddressesCommand,
} from '@aws-sdk/client-ec2';
import { isEc2Failure } from '../core/ec2-failure.ts';
import {
  ENI_TAG_KEYS,
  isOurs,
  OWNER_TAG_VALUE,
  tagsForNewEni,
  validateExtraTags,
} from '../core/eni-ownership.ts';
import { ConfigurationError, InvalidInputError } from '../core/errors.ts';
import { ADDRESSES_PER_IPV4_PREFIX } from '../core/ip-math.ts';
import { canonicalIpv6Cidr } from '../core/ipv6-math.ts';
import type {
  EniState,
  InstanceLimits,
  InstanceView,
  SecurityGroupView,
  SubnetView,
  Tags,
  VpcView,
} from '../core/model.ts';
import type {
  AssignedAddresses,
  ClusterInstance,
  CreateEniRequest,
  DetachedEni,
  Ec2NetworkPort,
} from '../core/ports.ts';
import { ec2Failure, toEc2Failure } from './ec2-errors.ts';
import {
  createEc2RetryStrategy,
  type Ec2RetryOptions,
  type RetryWhileNotFoundOptions,
  retryWhileNotFound,
} from './ec2-retry.ts';

/**
 * The EC2 adapter: `Ec2NetworkPort` over @aws-sdk/client-ec2. Everything EC2-specific stays here,
 * in one layer:
 *
 * 1. SDK shapes are mapped to the domain model at the boundary.
 * 2. Every SDK error becomes the domain's `Ec2Failure`, classified once (ec2-errors.ts).
 * 3. Throttling and 5xx are retried by the client's retry strategy (ec2-retry.ts). A `*.NotFound`
 *    on a resource the caller says it just created is retried here (`retryWhileNotFound`, one call
 *    at a time): only the caller knows the resource is fresh. One layer of retries per call, never
 *    nested ones that multiply the wait.
 * 4. Describes follow every page with the SDK's paginators.
 * 5. The caches: VPC CIDRs, route tables and subnet listings for a TTL, subnet CIDRs for good.
 *
 * Most port methods are one SDK call or one paginated describe; `describeSubnets` (subnets and
 * route tables) and `unassignIps` (after a replay, a re-read and narrower unassigns) make more.
 *
 * Describe calls are always filtered (never by bare id lists): EC2 charges unfiltered
 * DescribeInstances / DescribeNetworkInterfaces / DescribeSecurityGroups to a smaller bucket
 * (50 burst, 10/s) than filtered or paginated ones (100, 20/s), and whether an id list counts as a
 * filter is not documented. An empty filtered answer also means "not there" without the
 * `*.NotFound` / `*.Malformed` errors id lists raise.
 */

export interface Ec2ClientOptions {
  /** Retry tuning; tests and the bench shrink the delays. Defaults: `DEFAULT_EC2_RETRY_OPTIONS`. */
  readonly retry?: Partial<Ec2RetryOptions>;
}

/**
 * The EC2 client, built ONCE per container (call this at module scope and share the result):
 * the SDK keeps connections alive and its retry quota per client. Region, endpoint and
 * credentials come only from the SDK's standard configuration (`AWS_REGION`,
 * `AWS_ENDPOINT_URL_EC2`, the Lambda role), so the same code runs against AWS and the emulator.
 */
export function createEc2Client(options: Ec2ClientOptions = {}): EC2Client {
  return new EC2Client({ retryStrategy: createEc2RetryStrategy(options.retry) });
}

export interface Ec2NetworkAdapterOptions {
  readonly client: EC2Client;
  /** The EKS cluster name, written into our ENI tags and required on every ENI we adopt. */
  readonly clusterName: string;
  /** User-configured tags for every ENI we create; must not touch our own keys (`validateExtraTags`). */
  readonly extraTags?: Tags;
  /** MaxResults of the paginated describes, 5..1000 (route tables are capped at 100). Default 1000. */
  readonly describePageSize?: number;
  /** How long a VPC's CIDRs and route tables are remembered. Default 60 s; 0 asks EC2 every time. */
  readonly vpcCacheTtlMs?: number;
  /**
   * How long a VPC's subnet listing (every AZ) is remembered (`describeSubnets`). Default 60 s; 0 asks EC2
   * every time. Its free counts are kept current with what this container takes, and the listing
   * is dropped whenever EC2 refuses an address for lack of room.
   */
  readonly subnetCacheTtlMs?: number;
  /** Clock for the VPC cache; default the system clock. */
  readonly nowMs?: () => number;
  /**
   * The waits for a `*.NotFound` on a resource the caller just created (`justCreated`,
   * `justAttached`). Default `DEFAULT_NOT_FOUND_RETRY` with real timers; tests pass a fast `sleep`.
   */
  readonly notFoundRetry?: RetryWhileNotFoundOptions;
}

/** Builds the adapter; throws `ConfigurationError` for an empty cluster name or unusable extra tags. */
export function createEc2NetworkAdapter(options: Ec2NetworkAdapterOptions): Ec2NetworkPort {
  if (!options.clusterName) throw new ConfigurationError('clusterName must not be empty');
  const tagProblems = validateExtraTags(options.extraTags ?? {});
  if (tagProblems.length > 0)
    throw new ConfigurationError(`invalid extra ENI tags: ${tagProblems.join('; ')}`);
  const pageSize = options.describePageSize ?? 1000;
  if (!Number.isInteger(pageSize) || pageSize < 5 || pageSize > 1000) {
    throw new ConfigurationError(`describePageSize must be an integer in 5..1000, got ${pageSize}`);
  }
  return new Ec2NetworkAdapter(options, pageSize);
}

class Ec2NetworkAdapter implements Ec2NetworkPort {
  private readonly client: EC2Client;
  private readonly clusterName: string;
  private readonly extraTags: Tags;
  /** Subnet id to IPv4 CIDR, for the container's lifetime (a subnet's CIDR never changes). */
  private readonly subnetCidrs = new Map<string, string>();
  private readonly vpcs = new Map<string, { vpc: VpcView; expiresAtMs: number }>();
  private readonly routeTables = new Map<string, { routeTables: RouteTable[]; expiresAtMs: number }>();
  private readonly vpcCacheTtlMs: number;
  private readonly subnetCacheTtlMs: number;
  /** Per VPC: the listing (free counts kept current by `takeAddresses`) and its expiry. */
  private readonly subnetListings = new Map<string, { subnets: SubnetView[]; expiresAtMs: number }>();
  /**
   * Per VPC: the listing being read now, shared by every caller meanwhile (a cold container's
   * concurrent reads ask once). `subnetGeneration` moves on at every refusal for room, so a listing
   * asked for before it is never remembered after it.
   */
  private readonly subnetListingsInFlight = new Map<string, Promise<SubnetView[]>>();
  private subnetGeneration = 0;
  /** ENI id to subnet id, from every ENI this container described or created. */
  private readonly subnetOfEni = new Map<string, string>();
  private readonly nowMs: () => number;
  private readonly notFoundRetry: RetryWhileNotFoundOptions;

  constructor(
    options: Ec2NetworkAdapterOptions,
    private readonly pageSize: number,
  ) {
    this.client = options.client;
    this.clusterName = options.clusterName;
    this.extraTags = options.extraTags ?? {};
    this.vpcCacheTtlMs = options.vpcCacheTtlMs ?? 60_000;
    this.subnetCacheTtlMs = options.subnetCacheTtlMs ?? 60_000;
    this.nowMs = options.nowMs ?? Date.now;
    this.notFoundRetry = options.notFoundRetry ?? {};
  }

  async describeInstance(instanceId: string): Promise<InstanceView | undefined> {
    return (await this.describeInstances([instanceId]))[0];
  }

  async describeInstances(instanceIds: readonly string[]): Promise<InstanceView[]> {
    const wanted = new Set(instanceIds);
    const views: InstanceView[] = [];
    // A filter takes at most 200 values.
    for (let start = 0; start < instanceIds.length; start += 200) {
      const reservations = await this.describeInstancesByFilters([
        filter('instance-id', ...instanceIds.slice(start, start + 200)),
      ]);
      for (const instance of reservations.flatMap((reservation) => reservation.Instances ?? [])) {
        if (instance.InstanceId && wanted.has(instance.InstanceId)) views.push(toInstanceView(instance));
      }
    }
    return views;
  }

  async listClusterInstances(
    tagKey: string,
    tagValues: readonly string[],
    states: readonly string[],
  ): Promise<ClusterInstance[]> {
    const reservations = await this.describeInstancesByFilters([
      filter(`tag:${tagKey}`, ...tagValues),
      filter('instance-state-name', ...states),
    ]);
    return reservations
      .flatMap((reservation) => reservation.Instances ?? [])
      .map((instance) => ({
        instance: toInstanceView(instance),
        attachedEnis: (instance.NetworkInterfaces ?? []).map((eni) => ({
          id: eni.NetworkInterfaceId ?? '',
          deviceIndex: eni.Attachment?.DeviceIndex ?? 0,
          secondaryIps: (eni.PrivateIpAddresses ?? [])
            .filter((address) => !address.Primary)
            .map((address) => address.PrivateIpAddress ?? ''),
          prefixes: (eni.Ipv4Prefixes ?? []).map((prefix) => prefix.Ipv4Prefix ?? ''),
          ...ipv6PrefixesField(eni.Ipv6Prefixes?.map((prefix) => prefix.Ipv6Prefix)),
        })),
      }));
  }

  async describeAttachedEnis(instanceId: string, vpcId: string): Promise<EniState[]> {
    const interfaces = await this.describeNetworkInterfaces([filter('attachment.instance-id', instanceId)]);
    const outsideVpc = interfaces.filter((eni) => eni.VpcId !== vpcId);
    if (outsideVpc.length > 0) {
      throw new InvalidInputError(
        `instance ${instanceId} has ENIs outside its VPC ${vpcId} (${outsideVpc.map((eni) => `${eni.NetworkInterfaceId} in ${eni.VpcId}`).join(', ')}); cilium's per-node VPC cannot describe them`,
      );
    }
    const subnetIds = interfaces.map((eni) => eni.SubnetId ?? '');
    // A listing of the VPC already being read (the allocation reads one beside this) brings every
    // CIDR: wait for it rather than ask for the same subnets again.
    const listing = this.subnetListingsInFlight.get(vpcId);
    if (listing && subnetIds.some((id) => id !== '' && !this.subnetCidrs.has(id))) {
      await listing.catch(() => undefined);
    }
    const subnetCidrs = await this.subnetCidrsById(subnetIds);
    for (const eni of interfaces) {
      if (eni.NetworkInterfaceId && eni.SubnetId) this.subnetOfEni.set(eni.NetworkInterfaceId, eni.SubnetId);
    }
    return interfaces
      .map((eni) => toEniState(eni, subnetCidrs, this.clusterName))
      .sort((left, right) => left.deviceIndex - right.deviceIndex);
  }

  async findDetachedEnisCreatedFor(instanceId: string): Promise<DetachedEni[]> {
    const interfaces = await this.describeNetworkInterfaces([
      filter(`tag:${ENI_TAG_KEYS.instanceId}`, instanceId),
      filter(`tag:${ENI_TAG_KEYS.clusterName}`, this.clusterName),
      filter('status', 'available'),
    ]);
    return interfaces.map(toDetachedEni).filter((eni) => isOurs(eni.tags, this.clusterName));
  }

  async findDetachedEnisOfCluster(): Promise<DetachedEni[]> {
    const interfaces = await this.describeNetworkInterfaces([
      filter(`tag:${ENI_TAG_KEYS.clusterName}`, this.clusterName),
      filter(`tag:${ENI_TAG_KEYS.owner}`, OWNER_TAG_VALUE),
      filter('status', 'available'),
    ]);
    return interfaces.map(toDetachedEni).filter((eni) => isOurs(eni.tags, this.clusterName));
  }

  /**
   * The VPC's primary and associated secondary CIDRs. Remembered for `vpcCacheTtlMs` (a CIDR
   * association is rare and slow, and a burst of nodes in one VPC should not spend the Describe
   * bucket on it). A filter, not an id list, so the call draws on the larger filtered bucket.
   */
  async describeVpc(vpcId: string): Promise<VpcView> {
    const cached = this.vpcs.get(vpcId);
    if (cached && cached.expiresAtMs > this.nowMs()) return cached.vpc;
    const vpc = await this.describeVpcUncached(vpcId);
    this.vpcs.set(vpcId, { vpc, expiresAtMs: this.nowMs() + this.vpcCacheTtlMs });
    return vpc;
  }

  private async describeVpcUncached(vpcId: string): Promise<VpcView> {
    const output = await ec2('DescribeVpcs', () =>
      this.client.send(new DescribeVpcsCommand({ Filters: [filter('vpc-id', vpcId)] })),
    );
    const vpc = output.Vpcs?.find((candidate) => candidate.VpcId === vpcId);
    if (!vpc?.CidrBlock) {
      throw ec2Failure('InvalidVpcID.NotFound', `The vpc ID '${vpcId}' does not exist`, 'DescribeVpcs');
    }
    const primaryCidr = vpc.CidrBlock;
    const secondaryCidrs = (vpc.CidrBlockAssociationSet ?? [])
      .filter((association) => association.CidrBlockState?.State === 'associated')
      .map((association) => association.CidrBlock ?? '')
      .filter((cidr) => cidr !== '' && cidr !== primaryCidr);
    return { id: vpcId, primaryCidr, secondaryCidrs: [...new Set(secondaryCidrs)] };
  }

  /**
   * The VPC's route tables, remembered as long as its CIDRs (`vpcCacheTtlMs`): subnet choice only
   * needs which table each subnet uses, which changes rarely, while free addresses (DescribeSubnets)
   * are always read fresh.
   */
  private async routeTablesOf(vpcId: string): Promise<RouteTable[]> {
    const cached = this.routeTables.get(vpcId);
    if (cached && cached.expiresAtMs > this.nowMs()) return cached.routeTables;
    const routeTables = await allPages(
      'DescribeRouteTables',
      paginateDescribeRouteTables(
        { client: this.client, pageSize: Math.min(this.pageSize, 100) },
        { Filters: [filter('vpc-id', vpcId)] },
      ),
      (page) => page.RouteTables,
    );
    this.routeTables.set(vpcId, { routeTables, expiresAtMs: this.nowMs() + this.vpcCacheTtlMs });
    return routeTables;
  }

  /**
   * Remembered for `subnetCacheTtlMs` per VPC (every AZ in one listing), so a burst of nodes spends one Describe per
   * container rather than one per node. The free counts are a planning hint kept current with what
   * this container takes; EC2 decides atomically at each create or assign, and a refusal for lack
   * of room drops every listing, so the next plan is made from a fresh one. Callers get copies.
   */
  async describeSubnets(vpcId: string, availabilityZone: string): Promise<SubnetView[]> {
    const subnets = await this.subnetListing(vpcId);
    return subnets
      .filter((subnet) => subnet.availabilityZone === availabilityZone)
      .map((subnet) => ({ ...subnet }));
  }

  /** The VPC's remembered listing, else the one being read, else a new read (single-flight). */
  private subnetListing(vpcId: string): Promise<SubnetView[]> {
    const listing = this.subnetListings.get(vpcId);
    if (listing && listing.expiresAtMs > this.nowMs()) return Promise.resolve(listing.subnets);
    const inFlight = this.subnetListingsInFlight.get(vpcId);
    if (inFlight) return inFlight;
    const generation = this.subnetGeneration;
    const reading = this.describeSubnetsUncached(vpcId)
      .then((subnets) => {
        if (generation === this.subnetGeneration) {
          this.subnetListings.set(vpcId, { subnets, expiresAtMs: this.nowMs() + this.subnetCacheTtlMs });
        }
        return subnets;
      })
      .finally(() => {
        if (this.subnetListingsInFlight.get(vpcId) === reading) this.subnetListingsInFlight.delete(vpcId);
      });
    this.subnetListingsInFlight.set(vpcId, reading);
    return reading;
  }

  /** Lowers the remembered free count of a subnet by addresses this container just took. */
  private takeAddresses(subnetId: string | undefined, addresses: number): void {
    for (const listing of this.subnetListings.values()) {
      const index = listing.subnets.findIndex((subnet) => subnet.id === subnetId);
      const subnet = listing.subnets[index];
      if (subnet) {
        listing.subnets[index] = {
          ...subnet,
          availableAddresses: Math.max(subnet.availableAddresses - addresses, 0),
        };
      }
    }
  }

  /** EC2 refused for lack of room: forget every listing so the next plan reads fresh counts. */
  private forgetSubnetsOnRefusal(error: unknown): never {
    if (isEc2Failure(error, 'subnet-full', 'prefix-capacity')) {
      this.subnetGeneration++;
      this.subnetListings.clear();
      this.subnetListingsInFlight.clear();
    }
    throw error;
  }

  /** Every subnet of the VPC (all AZs: one listing serves every node of the VPC). */
  private async describeSubnetsUncached(vpcId: string): Promise<SubnetView[]> {
    const [subnets, routeTables] = await Promise.all([
      this.describeSubnetsByFilters([filter('vpc-id', vpcId)]),
      this.routeTablesOf(vpcId),
    ]);
    const routeTableOf = routeTableResolver(routeTables);
    for (const subnet of subnets) {
      if (subnet.SubnetId && subnet.CidrBlock) this.subnetCidrs.set(subnet.SubnetId, subnet.CidrBlock);
    }
    return subnets.map((subnet) => toSubnetView(subnet, routeTableOf(subnet.SubnetId ?? '')));
  }

  async describeSecurityGroups(vpcId: string): Promise<SecurityGroupView[]> {
    const groups = await allPages(
      'DescribeSecurityGroups',
      paginateDescribeSecurityGroups(
        { client: this.client, pageSize: this.pageSize },
        { Filters: [filter('vpc-id', vpcId)] },
      ),
      (page) => page.SecurityGroups,
    );
    return groups.map((group) => ({
      id: group.GroupId ?? '',
      vpcId: group.VpcId ?? '',
      tags: tagsOf(group.Tags),
    }));
  }

  async describeInstanceLimits(instanceType: string): Promise<InstanceLimits | undefined> {
    let info: InstanceTypeInfo | undefined;
    try {
      const output = await ec2('DescribeInstanceTypes', () =>
        this.client.send(
          new DescribeInstanceTypesCommand({ InstanceTypes: [instanceType as _InstanceType] }),
        ),
      );
      info = output.InstanceTypes?.find((candidate) => candidate.InstanceType === instanceType);
    } catch (error) {
      if (isEc2Failure(error, 'unknown-instance-type')) return undefined;
      throw error;
    }
    const maxInterfaces = info?.NetworkInfo?.MaximumNetworkInterfaces;
    const ipv4PerInterface = info?.NetworkInfo?.Ipv4AddressesPerInterface;
    if (maxInterfaces === undefined || ipv4PerInterface === undefined) return undefined;
    const ipv6PerInterface =
      info?.NetworkInfo?.Ipv6Supported === false ? 0 : info?.NetworkInfo?.Ipv6AddressesPerInterface;
    return {
      maxInterfaces,
      ipv4PerInterface,
      ...(ipv6PerInterface === undefined ? {} : { ipv6PerInterface }),
      hypervisor: info?.Hypervisor ?? '',
      bareMetal: info?.BareMetal ?? false,
    };
  }

  async createEni(request: CreateEniRequest): Promise<DetachedEni> {
    const tags = tagsForNewEni(this.clusterName, request.instanceId, this.extraTags, request.tags);
    const output = await ec2('CreateNetworkInterface', () =>
      this.client.send(
        new CreateNetworkInterfaceCommand({
          SubnetId: request.subnetId,
          Groups: [...request.securityGroupIds],
          Description: request.description,
          ...(request.ipCount ? { SecondaryPrivateIpAddressCount: request.ipCount } : {}),
          ...(request.prefixCount ? { Ipv4PrefixCount: request.prefixCount } : {}),
          ...(request.ipv6PrefixCount ? { Ipv6PrefixCount: request.ipv6PrefixCount } : {}),
          TagSpecifications: [
            {
              ResourceType: 'network-interface',
              Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })),
            },
          ],
          ClientToken: request.clientToken,
        }),
      ),
    ).catch((error: unknown) => this.forgetSubnetsOnRefusal(error));
    if (!output.NetworkInterface?.NetworkInterfaceId) {
      throw ec2Failure(
        'InvalidResponse',
        'CreateNetworkInterface answered without a network interface',
        'CreateNetworkInterface',
      );
    }
    const eni = toDetachedEni(output.NetworkInterface);
    this.subnetOfEni.set(eni.id, request.subnetId);
    this.takeAddresses(
      request.subnetId,
      1 + eni.secondaryIps.length + eni.prefixes.length * ADDRESSES_PER_IPV4_PREFIX,
    );
    return eni;
  }

  async attachEni(
    eniId: string,
    instanceId: string,
    deviceIndex: number,
    options: { readonly justCreated?: boolean } = {},
  ): Promise<string> {
    const output = await this.whileFresh(options.justCreated, () =>
      ec2('AttachNetworkInterface', () =>
        this.client.send(
          new AttachNetworkInterfaceCommand({
            NetworkInterfaceId: eniId,
            InstanceId: instanceId,
            DeviceIndex: deviceIndex,
            NetworkCardIndex: 0,
          }),
        ),
      ),
    );
    if (!output.AttachmentId) {
      throw ec2Failure(
        'InvalidResponse',
        `AttachNetworkInterface of ${eniId} answered without an attachment id`,
        'AttachNetworkInterface',
      );
    }
    return output.AttachmentId;
  }

  async setDeleteOnTermination(
    eniId: string,
    attachmentId: string,
    deleteOnTermination: boolean,
    options: { readonly justAttached?: boolean } = {},
  ): Promise<void> {
    await this.whileFresh(options.justAttached, () =>
      ec2('ModifyNetworkInterfaceAttribute', () =>
        this.client.send(
          new ModifyNetworkInterfaceAttributeCommand({
            NetworkInterfaceId: eniId,
            Attachment: { AttachmentId: attachmentId, DeleteOnTermination: deleteOnTermination },
          }),
        ),
      ),
    );
  }

  /**
   * One call on a resource: when the caller just created it (`fresh`), a `*.NotFound` is EC2's
   * eventual consistency and the call is repeated with bounded waits (`retryWhileNotFound`);
   * otherwise it runs once and a NotFound means the resource is gone.
   */
  private whileFresh<T>(fresh: boolean | undefined, call: () => Promise<T>): Promise<T> {
    return fresh ? retryWhileNotFound(call, this.notFoundRetry) : call();
  }

  async assignIps(
    eniId: string,
    request: { ipCount?: number; prefixCount?: number },
  ): Promise<AssignedAddresses> {
    if (!request.ipCount && !request.prefixCount) return { ips: [], prefixes: [] };
    const output = await ec2('AssignPrivateIpAddresses', () =>
      this.client.send(
        new AssignPrivateIpAddressesCommand({
          NetworkInterfaceId: eniId,
          ...(request.ipCount ? { SecondaryPrivateIpAddressCount: request.ipCount } : {}),
          ...(request.prefixCount ? { Ipv4PrefixCount: request.prefixCount } : {}),
        }),
      ),
    ).catch((error: unknown) => this.forgetSubnetsOnRefusal(error));
    const assigned = {
      ips: definedStrings(output.AssignedPrivateIpAddresses?.map((assigned) => assigned.PrivateIpAddress)),
      prefixes: definedStrings(output.AssignedIpv4Prefixes?.map((assigned) => assigned.Ipv4Prefix)),
    };
    this.takeAddresses(
      this.subnetOfEni.get(eniId),
      assigned.ips.length + assigned.prefixes.length * ADDRESSES_PER_IPV4_PREFIX,
    );
    return assigned;
  }

  async assignIpv6Prefixes(eniId: string, prefixCount: number): Promise<string[]> {
    const output = await ec2('AssignIpv6Addresses', () =>
      this.client.send(
        new AssignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6PrefixCount: prefixCount }),
      ),
    );
    return definedStrings(output.AssignedIpv6Prefixes).map(canonicalIpv6Cidr);
  }

  async unassignIps(eniId: string, addresses: AssignedAddresses): Promise<void> {
    if (addresses.ips.length > 0) await this.unassignStillAssigned(eniId, 'ips', addresses.ips);
    if (addresses.prefixes.length > 0)
      await this.unassignStillAssigned(eniId, 'prefixes', addresses.prefixes);
  }

  async detachEni(attachmentId: string): Promise<void> {
    try {
      await ec2('DetachNetworkInterface', () =>
        this.client.send(new DetachNetworkInterfaceCommand({ AttachmentId: attachmentId })),
      );
    } catch (error) {
      if (isEc2Failure(error, 'not-found')) return;
      throw error;
    }
  }

  async deleteEni(eniId: string): Promise<void> {
    try {
      await ec2('DeleteNetworkInterface', () =>
        this.client.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eniId })),
      );
    } catch (error) {
      if (isEc2Failure(error, 'not-found')) return;
      throw error;
    }
  }

  /**
   * UnassignPrivateIpAddresses for one kind of address. EC2 rejects the whole call when any
   * address is no longer on the ENI, so a replayed release (a retried invocation after a lost
   * answer) would fail forever; on that answer we re-read the ENI and release only what it still
   * holds. An ENI that is gone holds nothing.
   */
  private async unassignStillAssigned(eniId: string, kind: 'ips' | 'prefixes', addresses: readonly string[]) {
    const unassign = (subset: readonly string[]) =>
      ec2('UnassignPrivateIpAddresses', () =>
        this.client.send(
          new UnassignPrivateIpAddressesCommand({
            NetworkInterfaceId: eniId,
            ...(kind === 'ips' ? { PrivateIpAddresses: [...subset] } : { Ipv4Prefixes: [...subset] }),
          }),
        ),
      );
    if ((await unassignOrNotAssigned(unassign, addresses)) !== 'not-assigned') return;
    const [current] = await this.describeNetworkInterfaces([filter('network-interface-id', eniId)]);
    if (!current) return;
    const held = new Set(kind === 'ips' ? secondaryIpsOf(current) : prefixesOf(current));
    const stillAssigned = addresses.filter((address) => held.has(address));
    if (stillAssigned.length === 0) return;
    if ((await unassignOrNotAssigned(unassign, stillAssigned)) !== 'not-assigned') return;
    // Describe lags an unassign (eventual consistency): what it still lists may be gone. One
    // address at a time, so EC2's own answer decides each; not assigned means already released.
    for (const address of stillAssigned) {
      if ((await unassignOrNotAssigned(unassign, [address])) === 'gone') return;
    }
  }

  /**
   * Every ENI matching the filters, all pages. MaxResults goes only with filters, never with
   * NetworkInterfaceIds: EC2 then silently pages through id lists and callers that ignore
   * NextToken lose ENIs (cilium #39106).
   */
  private describeNetworkInterfaces(filters: Filter[]): Promise<NetworkInterface[]> {
    return allPages(
      'DescribeNetworkInterfaces',
      paginateDescribeNetworkInterfaces(
        { client: this.client, pageSize: this.pageSize },
        { Filters: filters },
      ),
      (page) => page.NetworkInterfaces,
    );
  }

  /** Every reservation matching the filters, all pages (EC2's default page size: no MaxResults). */
  private describeInstancesByFilters(filters: Filter[]) {
    return allPages(
      'DescribeInstances',
      paginateDescribeInstances({ client: this.client }, { Filters: filters }),
      (page) => page.Reservations,
    );
  }

  private describeSubnetsByFilters(filters: Filter[]): Promise<Subnet[]> {
    return allPages(
      'DescribeSubnets',
      paginateDescribeSubnets({ client: this.client, pageSize: this.pageSize }, { Filters: filters }),
      (page) => page.Subnets,
    );
  }

  /**
   * CIDR per subnet id, in ONE DescribeSubnets for the ids of a batch that this container has not
   * seen yet: a subnet's IPv4 CIDR is fixed for its lifetime, so it is remembered for good.
   */
  private async subnetCidrsById(subnetIds: readonly string[]): Promise<ReadonlyMap<string, string>> {
    const uniqueIds = [...new Set(subnetIds.filter((id) => id !== ''))];
    const unknownIds = uniqueIds.filter((id) => !this.subnetCidrs.has(id));
    if (unknownIds.length > 0) {
      for (const [id, cidr] of await this.describeSubnetCidrs(unknownIds)) {
        if (cidr !== '') this.subnetCidrs.set(id, cidr);
      }
    }
    return this.subnetCidrs;
  }

  private async describeSubnetCidrs(uniqueIds: readonly string[]): Promise<ReadonlyMap<string, string>> {
    const subnets = await this.describeSubnetsByFilters([filter('subnet-id', ...uniqueIds)]);
    return new Map(subnets.map((subnet) => [subnet.SubnetId ?? '', subnet.CidrBlock ?? '']));
  }
}

/** Runs one SDK call of `action` and converts an EC2 error answer into an `Ec2Failure` naming it. */
async function ec2<T>(action: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw toEc2Failure(error, action);
  }
}

/**
 * Every item of every page an SDK paginator yields (it follows NextToken until EC2 sends none);
 * a failed page's EC2 error becomes an `Ec2Failure` naming `action`.
 */
async function allPages<Page, Item>(
  action: string,
  pages: AsyncIterable<Page>,
  itemsOf: (page: Page) => Item[] | undefined,
): Promise<Item[]> {
  const items: Item[] = [];
  try {
    for await (const page of pages) items.push(...(itemsOf(page) ?? []));
  } catch (error) {
    throw toEc2Failure(error, action);
  }
  return items;
}

function filter(name: string, ...values: string[]): Filter {
  return { Name: name, Values: values };
}

function tagsOf(tags: readonly Tag[] | undefined): Tags {
  const result: Record<string, string> = {};
  for (const tag of tags ?? []) if (tag.Key !== undefined) result[tag.Key] = tag.Value ?? '';
  return result;
}

function definedStrings(values: readonly (string | undefined)[] | undefined): string[] {
  return (values ?? []).filter((value): value is string => value !== undefined && value !== '');
}

function secondaryIpsOf(eni: NetworkInterface): string[] {
  return definedStrings(
    eni.PrivateIpAddresses?.filter((address) => !address.Primary).map((address) => address.PrivateIpAddress),
  );
}

function prefixesOf(eni: NetworkInterface): string[] {
  return definedStrings(eni.Ipv4Prefixes?.map((prefix) => prefix.Ipv4Prefix));
}

/**
 * An ENI's /80s as the domain keeps them: `{ ipv6Prefixes }` in canonical text (EC2's spelling is
 * not promised to be RFC 5952's) when there are any, else nothing, so an IPv4-only ENI reads as
 * it always did.
 */
function ipv6PrefixesField(prefixes: readonly (string | undefined)[] | undefined): {
  ipv6Prefixes?: readonly string[];
} {
  const defined = definedStrings(prefixes);
  return defined.length > 0 ? { ipv6Prefixes: defined.map(canonicalIpv6Cidr) } : {};
}

function primaryIpOf(eni: NetworkInterface): string {
  return (
    eni.PrivateIpAddresses?.find((address) => address.Primary)?.PrivateIpAddress ?? eni.PrivateIpAddress ?? ''
  );
}

function toDetachedEni(eni: NetworkInterface): DetachedEni {
  return {
    id: eni.NetworkInterfaceId ?? '',
    mac: eni.MacAddress ?? '',
    primaryIp: primaryIpOf(eni),
    secondaryIps: secondaryIpsOf(eni),
    prefixes: prefixesOf(eni),
    ...ipv6PrefixesField(eni.Ipv6Prefixes?.map((prefix) => prefix.Ipv6Prefix)),
    subnetId: eni.SubnetId ?? '',
    securityGroupIds: definedStrings(eni.Groups?.map((group) => group.GroupId)),
    tags: tagsOf(eni.TagSet),
    description: eni.Description ?? '',
    status: eni.Status ?? '',
  };
}

function toEniState(
  eni: NetworkInterface,
  subnetCidrs: ReadonlyMap<string, string>,
  clusterName: string,
): EniState {
  const detached = toDetachedEni(eni);
  const subnetCidr = subnetCidrs.get(detached.subnetId);
  if (!subnetCidr) {
    throw ec2Failure(
      'InvalidSubnetID.NotFound',
      `DescribeSubnets did not return subnet ${detached.subnetId} of ENI ${detached.id}`,
      'DescribeSubnets',
    );
  }
  return {
    id: detached.id,
    mac: detached.mac,
    deviceIndex: eni.Attachment?.DeviceIndex ?? 0,
    attachmentId: eni.Attachment?.AttachmentId ?? '',
    deleteOnTermination: eni.Attachment?.DeleteOnTermination ?? false,
    primaryIp: detached.primaryIp,
    secondaryIps: detached.secondaryIps,
    prefixes: detached.prefixes,
    ...(detached.ipv6Prefixes ? { ipv6Prefixes: detached.ipv6Prefixes } : {}),
    subnetId: detached.subnetId,
    subnetCidr,
    securityGroupIds: detached.securityGroupIds,
    tags: detached.tags,
    description: detached.description,
    ...(isOurs(detached.tags, clusterName) ? {} : { foreign: true }),
  };
}

/**
 * One UnassignPrivateIpAddresses: `done`, `gone` (the ENI no longer exists: it holds nothing), or
 * `not-assigned` (EC2 refused the whole call because some address is no longer on the ENI).
 */
async function unassignOrNotAssigned(
  unassign: (subset: readonly string[]) => Promise<unknown>,
  subset: readonly string[],
): Promise<'done' | 'gone' | 'not-assigned'> {
  try {
    await unassign(subset);
    return 'done';
  } catch (error) {
    if (isEc2Failure(error, 'not-found')) return 'gone';
    if (isEc2Failure(error, 'address-not-assigned')) return 'not-assigned';
    throw error;
  }
}

/**
 * The route table of each subnet: its explicit association, else the VPC's main table (a subnet
 * without an explicit association uses the main one). Cilium's subnet choice prefers subnets that
 * share the node subnet's route table.
 */
function routeTableResolver(routeTables: readonly RouteTable[]): (subnetId: string) => string | undefined {
  const explicit = new Map<string, string>();
  let mainTableId: string | undefined;
  for (const table of routeTables) {
    for (const association of table.Associations ?? []) {
      const state = association.AssociationState?.State;
      if (state !== undefined && state !== 'associated') continue;
      if (association.Main) mainTableId = table.RouteTableId;
      else if (association.SubnetId && table.RouteTableId)
        explicit.set(association.SubnetId, table.RouteTableId);
    }
  }
  return (subnetId) => explicit.get(subnetId) ?? mainTableId;
}

function toSubnetView(subnet: Subnet, routeTableId: string | undefined): SubnetView {
  const ipv6Cidr = subnet.Ipv6CidrBlockAssociationSet?.find(
    (association) => association.Ipv6CidrBlockState?.State === 'associated' && association.Ipv6CidrBlock,
  )?.Ipv6CidrBlock;
  return {
    id: subnet.SubnetId ?? '',
    cidr: subnet.CidrBlock ?? '',
    vpcId: subnet.VpcId ?? '',
    availabilityZone: subnet.AvailabilityZone ?? '',
    availableAddresses: subnet.AvailableIpAddressCount ?? 0,
    tags: tagsOf(subnet.Tags),
    ...(routeTableId ? { routeTableId } : {}),
    ...(ipv6Cidr ? { ipv6Cidr: canonicalIpv6Cidr(ipv6Cidr) } : {}),
  };
}

function toInstanceView(instance: Instance): InstanceView {
  return {
    id: instance.InstanceId ?? '',
    instanceType: instance.InstanceType ?? '',
    state: instance.State?.Name ?? '',
    availabilityZone: instance.Placement?.AvailabilityZone ?? '',
    vpcId: instance.VpcId ?? '',
    subnetId: instance.SubnetId ?? '',
    privateDnsName: instance.PrivateDnsName ?? '',
    privateIp: instance.PrivateIpAddress ?? '',
    tags: tagsOf(instance.Tags),
  };
}
