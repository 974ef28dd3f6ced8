import {
  type _InstanceType,
  DescribeInstanceTypesCommand,
  type Filter,
  type Instance,
  type InstanceTypeInfo,
  paginateDescribeInstances,
} from '@aws-sdk/client-ec2';
import { isEc2Failure } from '../../core/ec2-failure.ts';
import type { InstanceLimits, InstanceView } from '../../core/model.ts';
import type { ClusterInstance } from '../../core/ports.ts';
import { allPages, type Ec2Calls, ec2, filter, tagsOf } from './call.ts';
import { ipv6PrefixesField } from './network-interfaces.ts';

/**
 * Instances and instance types (DescribeInstances, DescribeInstanceTypes). Nothing is cached
 * here: an instance's state moves on, and `InstanceLimitsCatalog` (../instance-limits.ts) caches
 * the types.
 */
export class Instances {
  constructor(private readonly calls: Ec2Calls) {}

  async describeInstance(instanceId: string): Promise<InstanceView | undefined> {
    return (await this.describeInstances([instanceId]))[0];
  }

  async describeInstances(instanceIds: readonly string[]): Promise<InstanceView[]> {
    const wanted = new Set(instanceIds);
    const views: InstanceView[] = [];
    // A filter takes at most 200 values.
    for (let start = 0; start < instanceIds.length; start += 200) {
      const reservations = await this.describeByFilters([
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
    const reservations = await this.describeByFilters([
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

  async describeInstanceLimits(instanceType: string): Promise<InstanceLimits | undefined> {
    let info: InstanceTypeInfo | undefined;
    try {
      const output = await ec2('DescribeInstanceTypes', () =>
        this.calls.client.send(
          new DescribeInstanceTypesCommand({ InstanceTypes: [instanceType as _InstanceType] }),
        ),
      );
      info = output.InstanceTypes?.find((candidate) => candidate.InstanceType === instanceType);
    } catch (error) {
      if (isEc2Failure(error, 'unknown-instance-type')) return undefined;
      throw error;
    }
    return info && toInstanceLimits(info);
  }

  /** Every reservation matching the filters, all pages (EC2's default page size: no MaxResults). */
  private describeByFilters(filters: Filter[]) {
    return allPages(
      'DescribeInstances',
      paginateDescribeInstances({ client: this.calls.client }, { Filters: filters }),
      (page) => page.Reservations,
    );
  }
}

function toInstanceLimits(info: InstanceTypeInfo): InstanceLimits | undefined {
  const maxInterfaces = info.NetworkInfo?.MaximumNetworkInterfaces;
  const ipv4PerInterface = info.NetworkInfo?.Ipv4AddressesPerInterface;
  if (maxInterfaces === undefined || ipv4PerInterface === undefined) return undefined;
  const ipv6PerInterface =
    info.NetworkInfo?.Ipv6Supported === false ? 0 : info.NetworkInfo?.Ipv6AddressesPerInterface;
  return {
    maxInterfaces,
    ipv4PerInterface,
    ...(ipv6PerInterface === undefined ? {} : { ipv6PerInterface }),
    hypervisor: info.Hypervisor ?? '',
    bareMetal: info.BareMetal ?? false,
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
