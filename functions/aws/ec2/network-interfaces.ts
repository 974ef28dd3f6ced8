import {
  AssignIpv6AddressesCommand,
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  DeleteNetworkInterfaceCommand,
  DetachNetworkInterfaceCommand,
  type Filter,
  ModifyNetworkInterfaceAttributeCommand,
  type NetworkInterface,
  paginateDescribeNetworkInterfaces,
  UnassignPrivateIpAddressesCommand,
} from '@aws-sdk/client-ec2';
import { isEc2Failure } from '../../core/ec2-failure.ts';
import { ENI_TAG_KEYS, isOurs, OWNER_TAG_VALUE, tagsForNewEni } from '../../core/eni-ownership.ts';
import { InvalidInputError } from '../../core/errors.ts';
import { addressesTaken, addressesTakenByNewEni } from '../../core/ip-math.ts';
import { canonicalIpv6Cidr } from '../../core/ipv6-math.ts';
import type { EniState, Tags } from '../../core/model.ts';
import type { AssignedAddresses, CreateEniRequest, DetachedEni } from '../../core/ports.ts';
import { ec2Failure } from '../ec2-errors.ts';
import { type RetryWhileNotFoundOptions, retryWhileNotFound } from '../ec2-retry.ts';
import { allPages, definedStrings, type Ec2Calls, ec2, filter, tagsOf } from './call.ts';
import type { Subnets } from './subnets.ts';

export interface NetworkInterfaceOptions {
  /** The EKS cluster name, written into our ENI tags and required on every ENI we adopt. */
  readonly clusterName: string;
  /** User-configured tags for every ENI we create (already checked by `validateExtraTags`). */
  readonly extraTags: Tags;
  /** The waits for a `*.NotFound` on a resource the caller just created or attached. */
  readonly notFoundRetry: RetryWhileNotFoundOptions;
}

/**
 * Network interfaces (DescribeNetworkInterfaces, Create/Attach/Detach/Delete, the address
 * assignments). Every address this container takes lowers the subnet listing's free count
 * (`Subnets.takeAddresses`), and a refusal for lack of room drops the listings
 * (`Subnets.forgetListingsOnRefusal`); the subnet of each ENI it described or created is
 * remembered for that.
 */
export class NetworkInterfaces {
  /** ENI id to subnet id, from every ENI this container described or created. */
  private readonly subnetOfEni = new Map<string, string>();

  constructor(
    private readonly calls: Ec2Calls,
    private readonly subnets: Subnets,
    private readonly options: NetworkInterfaceOptions,
  ) {}

  async describeAttachedEnis(instanceId: string, vpcId: string): Promise<EniState[]> {
    const interfaces = await this.describeByFilters([filter('attachment.instance-id', instanceId)]);
    const outsideVpc = interfaces.filter((eni) => eni.VpcId !== vpcId);
    if (outsideVpc.length > 0) {
      throw new InvalidInputError(
        `instance ${instanceId} has ENIs outside its VPC ${vpcId} (${outsideVpc.map((eni) => `${eni.NetworkInterfaceId} in ${eni.VpcId}`).join(', ')}); cilium's per-node VPC cannot describe them`,
      );
    }
    const subnetCidrs = await this.subnets.cidrsOf(
      interfaces.map((eni) => eni.SubnetId ?? ''),
      vpcId,
    );
    for (const eni of interfaces) {
      if (eni.NetworkInterfaceId && eni.SubnetId) this.subnetOfEni.set(eni.NetworkInterfaceId, eni.SubnetId);
    }
    return interfaces
      .map((eni) => toEniState(eni, subnetCidrs, this.options.clusterName))
      .sort((left, right) => left.deviceIndex - right.deviceIndex);
  }

  async findDetachedEnisCreatedFor(instanceId: string): Promise<DetachedEni[]> {
    const interfaces = await this.describeByFilters([
      filter(`tag:${ENI_TAG_KEYS.instanceId}`, instanceId),
      filter(`tag:${ENI_TAG_KEYS.clusterName}`, this.options.clusterName),
      filter('status', 'available'),
    ]);
    return interfaces.map(toDetachedEni).filter((eni) => isOurs(eni.tags, this.options.clusterName));
  }

  async findDetachedEnisOfCluster(): Promise<DetachedEni[]> {
    const interfaces = await this.describeByFilters([
      filter(`tag:${ENI_TAG_KEYS.clusterName}`, this.options.clusterName),
      filter(`tag:${ENI_TAG_KEYS.owner}`, OWNER_TAG_VALUE),
      filter('status', 'available'),
    ]);
    return interfaces.map(toDetachedEni).filter((eni) => isOurs(eni.tags, this.options.clusterName));
  }

  async createEni(request: CreateEniRequest): Promise<DetachedEni> {
    const { clusterName, extraTags } = this.options;
    const tags = tagsForNewEni(clusterName, request.instanceId, extraTags, request.tags);
    const output = await ec2('CreateNetworkInterface', () =>
      this.calls.client.send(
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
    ).catch((error: unknown) => this.subnets.forgetListingsOnRefusal(error));
    if (!output.NetworkInterface?.NetworkInterfaceId) {
      throw ec2Failure(
        'InvalidResponse',
        'CreateNetworkInterface answered without a network interface',
        'CreateNetworkInterface',
      );
    }
    const eni = toDetachedEni(output.NetworkInterface);
    this.subnetOfEni.set(eni.id, request.subnetId);
    this.subnets.takeAddresses(request.subnetId, addressesTakenByNewEni(eni));
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
        this.calls.client.send(
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
        this.calls.client.send(
          new ModifyNetworkInterfaceAttributeCommand({
            NetworkInterfaceId: eniId,
            Attachment: { AttachmentId: attachmentId, DeleteOnTermination: deleteOnTermination },
          }),
        ),
      ),
    );
  }

  async assignIps(
    eniId: string,
    request: { ipCount?: number; prefixCount?: number },
  ): Promise<AssignedAddresses> {
    if (!request.ipCount && !request.prefixCount) return { ips: [], prefixes: [] };
    const output = await ec2('AssignPrivateIpAddresses', () =>
      this.calls.client.send(
        new AssignPrivateIpAddressesCommand({
          NetworkInterfaceId: eniId,
          ...(request.ipCount ? { SecondaryPrivateIpAddressCount: request.ipCount } : {}),
          ...(request.prefixCount ? { Ipv4PrefixCount: request.prefixCount } : {}),
        }),
      ),
    ).catch((error: unknown) => this.subnets.forgetListingsOnRefusal(error));
    const assigned = {
      ips: definedStrings(output.AssignedPrivateIpAddresses?.map((assigned) => assigned.PrivateIpAddress)),
      prefixes: definedStrings(output.AssignedIpv4Prefixes?.map((assigned) => assigned.Ipv4Prefix)),
    };
    this.subnets.takeAddresses(
      this.subnetOfEni.get(eniId),
      addressesTaken(assigned.ips.length, assigned.prefixes.length),
    );
    return assigned;
  }

  async assignIpv6Prefixes(eniId: string, prefixCount: number): Promise<string[]> {
    const output = await ec2('AssignIpv6Addresses', () =>
      this.calls.client.send(
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
        this.calls.client.send(new DetachNetworkInterfaceCommand({ AttachmentId: attachmentId })),
      );
    } catch (error) {
      if (isEc2Failure(error, 'not-found')) return;
      throw error;
    }
  }

  async deleteEni(eniId: string): Promise<void> {
    try {
      await ec2('DeleteNetworkInterface', () =>
        this.calls.client.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eniId })),
      );
    } catch (error) {
      if (isEc2Failure(error, 'not-found')) return;
      throw error;
    }
  }

  /**
   * One call on a resource: when the caller just created it (`fresh`), a `*.NotFound` is EC2's
   * eventual consistency and the call is repeated with bounded waits (`retryWhileNotFound`);
   * otherwise it runs once and a NotFound means the resource is gone.
   */
  private whileFresh<T>(fresh: boolean | undefined, call: () => Promise<T>): Promise<T> {
    return fresh ? retryWhileNotFound(call, this.options.notFoundRetry) : call();
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
        this.calls.client.send(
          new UnassignPrivateIpAddressesCommand({
            NetworkInterfaceId: eniId,
            ...(kind === 'ips' ? { PrivateIpAddresses: [...subset] } : { Ipv4Prefixes: [...subset] }),
          }),
        ),
      );
    if ((await unassignOrNotAssigned(unassign, addresses)) !== 'not-assigned') return;
    const [current] = await this.describeByFilters([filter('network-interface-id', eniId)]);
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
  private describeByFilters(filters: Filter[]): Promise<NetworkInterface[]> {
    return allPages(
      'DescribeNetworkInterfaces',
      paginateDescribeNetworkInterfaces(
        { client: this.calls.client, pageSize: this.calls.pageSize },
        { Filters: filters },
      ),
      (page) => page.NetworkInterfaces,
    );
  }
}

/**
 * An ENI's /80s as the domain keeps them: `{ ipv6Prefixes }` in canonical text (EC2's spelling is
 * not promised to be RFC 5952's) when there are any, else nothing, so an IPv4-only ENI reads as
 * it always did.
 */
export function ipv6PrefixesField(prefixes: readonly (string | undefined)[] | undefined): {
  ipv6Prefixes?: readonly string[];
} {
  const defined = definedStrings(prefixes);
  return defined.length > 0 ? { ipv6Prefixes: defined.map(canonicalIpv6Cidr) } : {};
}

function secondaryIpsOf(eni: NetworkInterface): string[] {
  return definedStrings(
    eni.PrivateIpAddresses?.filter((address) => !address.Primary).map((address) => address.PrivateIpAddress),
  );
}

function prefixesOf(eni: NetworkInterface): string[] {
  return definedStrings(eni.Ipv4Prefixes?.map((prefix) => prefix.Ipv4Prefix));
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
