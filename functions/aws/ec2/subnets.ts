import {
  DescribeVpcsCommand,
  type Filter,
  paginateDescribeRouteTables,
  paginateDescribeSubnets,
  type RouteTable,
  type Subnet,
} from '@aws-sdk/client-ec2';
import { isEc2Failure } from '../../core/ec2-failure.ts';
import { canonicalIpv6Cidr } from '../../core/ipv6-math.ts';
import type { SubnetView, VpcView } from '../../core/model.ts';
import { ec2Failure } from '../ec2-errors.ts';
import { allPages, type Ec2Calls, ec2, filter, tagsOf } from './call.ts';

export interface SubnetCacheOptions {
  /** How long a VPC's CIDRs and route tables are remembered; 0 asks EC2 every time. */
  readonly vpcCacheTtlMs: number;
  /** How long a VPC's subnet listing (every AZ) is remembered; 0 asks EC2 every time. */
  readonly subnetCacheTtlMs: number;
  /** Clock for the caches. */
  readonly nowMs: () => number;
}

/**
 * VPCs, their route tables and their subnets (DescribeVpcs, DescribeRouteTables,
 * DescribeSubnets), with this container's caches of them:
 *
 * - a VPC's CIDRs and route tables for `vpcCacheTtlMs`;
 * - a VPC's subnet listing (every AZ) for `subnetCacheTtlMs`, its free counts kept current with
 *   what this container takes (`takeAddresses`) and dropped whenever EC2 refuses an address for
 *   lack of room (`forgetListingsOnRefusal`);
 * - each subnet's IPv4 CIDR for good (a subnet's CIDR never changes).
 */
export class Subnets {
  /** Subnet id to IPv4 CIDR, for the container's lifetime. */
  private readonly cidrs = new Map<string, string>();
  private readonly vpcs = new Map<string, { vpc: VpcView; expiresAtMs: number }>();
  private readonly routeTables = new Map<string, { routeTables: RouteTable[]; expiresAtMs: number }>();
  /** Per VPC: the listing (free counts kept current by `takeAddresses`) and its expiry. */
  private readonly listings = new Map<string, { subnets: SubnetView[]; expiresAtMs: number }>();
  /**
   * Per VPC: the listing being read now, shared by every caller meanwhile (a cold container's
   * concurrent reads ask once). `generation` moves on at every refusal for room, so a listing
   * asked for before it is never remembered after it.
   */
  private readonly listingsInFlight = new Map<string, Promise<SubnetView[]>>();
  private generation = 0;

  constructor(
    private readonly calls: Ec2Calls,
    private readonly options: SubnetCacheOptions,
  ) {}

  /**
   * The VPC's primary and associated secondary CIDRs. Remembered for `vpcCacheTtlMs` (a CIDR
   * association is rare and slow, and a burst of nodes in one VPC should not spend the Describe
   * bucket on it). A filter, not an id list, so the call draws on the larger filtered bucket.
   */
  async describeVpc(vpcId: string): Promise<VpcView> {
    const cached = this.vpcs.get(vpcId);
    if (cached && cached.expiresAtMs > this.options.nowMs()) return cached.vpc;
    const vpc = await this.describeVpcUncached(vpcId);
    this.vpcs.set(vpcId, { vpc, expiresAtMs: this.options.nowMs() + this.options.vpcCacheTtlMs });
    return vpc;
  }

  /**
   * Remembered for `subnetCacheTtlMs` per VPC (every AZ in one listing), so a burst of nodes spends one Describe per
   * container rather than one per node. The free counts are a planning hint kept current with what
   * this container takes; EC2 decides atomically at each create or assign, and a refusal for lack
   * of room drops every listing, so the next plan is made from a fresh one. Callers get copies.
   */
  async describeSubnets(vpcId: string, availabilityZone: string): Promise<SubnetView[]> {
    const subnets = await this.listing(vpcId);
    return subnets
      .filter((subnet) => subnet.availabilityZone === availabilityZone)
      .map((subnet) => ({ ...subnet }));
  }

  /**
   * CIDR per subnet id, in ONE DescribeSubnets for the ids of a batch that this container has not
   * seen yet: a subnet's IPv4 CIDR is fixed for its lifetime, so it is remembered for good. A
   * listing of the VPC already being read (the allocation reads one beside the ENIs) brings every
   * CIDR: it is waited for rather than the same subnets asked for again.
   */
  async cidrsOf(subnetIds: readonly string[], vpcId: string): Promise<ReadonlyMap<string, string>> {
    const listing = this.listingsInFlight.get(vpcId);
    if (listing && subnetIds.some((id) => id !== '' && !this.cidrs.has(id))) {
      await listing.catch(() => undefined);
    }
    const uniqueIds = [...new Set(subnetIds.filter((id) => id !== ''))];
    const unknownIds = uniqueIds.filter((id) => !this.cidrs.has(id));
    if (unknownIds.length > 0) {
      const subnets = await this.describeByFilters([filter('subnet-id', ...unknownIds)]);
      for (const subnet of subnets) {
        if (subnet.CidrBlock) this.cidrs.set(subnet.SubnetId ?? '', subnet.CidrBlock);
      }
    }
    return this.cidrs;
  }

  /** Lowers the remembered free count of a subnet by addresses this container just took. */
  takeAddresses(subnetId: string | undefined, addresses: number): void {
    for (const listing of this.listings.values()) {
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

  /**
   * Rethrows `error`; when EC2 refused for lack of room, first forgets every listing so the next
   * plan reads fresh counts.
   */
  forgetListingsOnRefusal(error: unknown): never {
    if (isEc2Failure(error, 'subnet-full', 'prefix-capacity')) {
      this.generation++;
      this.listings.clear();
      this.listingsInFlight.clear();
    }
    throw error;
  }

  private async describeVpcUncached(vpcId: string): Promise<VpcView> {
    const output = await ec2('DescribeVpcs', () =>
      this.calls.client.send(new DescribeVpcsCommand({ Filters: [filter('vpc-id', vpcId)] })),
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
   * needs which table each subnet uses, which changes rarely.
   */
  private async routeTablesOf(vpcId: string): Promise<RouteTable[]> {
    const cached = this.routeTables.get(vpcId);
    if (cached && cached.expiresAtMs > this.options.nowMs()) return cached.routeTables;
    const routeTables = await allPages(
      'DescribeRouteTables',
      paginateDescribeRouteTables(
        { client: this.calls.client, pageSize: Math.min(this.calls.pageSize, 100) },
        { Filters: [filter('vpc-id', vpcId)] },
      ),
      (page) => page.RouteTables,
    );
    this.routeTables.set(vpcId, {
      routeTables,
      expiresAtMs: this.options.nowMs() + this.options.vpcCacheTtlMs,
    });
    return routeTables;
  }

  /** The VPC's remembered listing, else the one being read, else a new read (single-flight). */
  private listing(vpcId: string): Promise<SubnetView[]> {
    const listing = this.listings.get(vpcId);
    if (listing && listing.expiresAtMs > this.options.nowMs()) return Promise.resolve(listing.subnets);
    const inFlight = this.listingsInFlight.get(vpcId);
    if (inFlight) return inFlight;
    const generation = this.generation;
    const reading = this.listingUncached(vpcId)
      .then((subnets) => {
        if (generation === this.generation) {
          this.listings.set(vpcId, {
            subnets,
            expiresAtMs: this.options.nowMs() + this.options.subnetCacheTtlMs,
          });
        }
        return subnets;
      })
      .finally(() => {
        if (this.listingsInFlight.get(vpcId) === reading) this.listingsInFlight.delete(vpcId);
      });
    this.listingsInFlight.set(vpcId, reading);
    return reading;
  }

  /** Every subnet of the VPC (all AZs: one listing serves every node of the VPC). */
  private async listingUncached(vpcId: string): Promise<SubnetView[]> {
    const [subnets, routeTables] = await Promise.all([
      this.describeByFilters([filter('vpc-id', vpcId)]),
      this.routeTablesOf(vpcId),
    ]);
    const routeTableOf = routeTableResolver(routeTables);
    for (const subnet of subnets) {
      if (subnet.SubnetId && subnet.CidrBlock) this.cidrs.set(subnet.SubnetId, subnet.CidrBlock);
    }
    return subnets.map((subnet) => toSubnetView(subnet, routeTableOf(subnet.SubnetId ?? '')));
  }

  private describeByFilters(filters: Filter[]): Promise<Subnet[]> {
    return allPages(
      'DescribeSubnets',
      paginateDescribeSubnets(
        { client: this.calls.client, pageSize: this.calls.pageSize },
        { Filters: filters },
      ),
      (page) => page.Subnets,
    );
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
