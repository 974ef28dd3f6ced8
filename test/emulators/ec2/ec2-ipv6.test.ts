import {
  AssignIpv6AddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  type CreateNetworkInterfaceCommandInput,
  DeleteNetworkInterfaceCommand,
  DescribeInstancesCommand,
  DescribeInstanceTypesCommand,
  DescribeNetworkInterfacesCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  type EC2Client,
  UnassignIpv6AddressesCommand,
} from '@aws-sdk/client-ec2';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expectEc2Error } from './expect-ec2-error.ts';
import { type ClusterSeed, type Ec2Emulator, startEc2Emulator } from './index.ts';
import { ec2ClientFor } from './sdk-client.ts';

/**
 * IPv6 in the EC2 emulator, through the real SDK: a dual-stack VPC (an Amazon-provided /56, a /64
 * per node and pod subnet), /80 prefixes carved from a subnet's /64 by AssignIpv6Addresses and
 * CreateNetworkInterface, the per-type limit (each /80 counts as one IPv6 address), and the
 * refusals the allocator must survive: a subnet without IPv6, the limit, a type without IPv6.
 */

let emulator: Ec2Emulator;
let ec2: EC2Client;
let cluster: ClusterSeed;

beforeEach(async () => {
  emulator = await startEc2Emulator();
  cluster = emulator.state.seedCluster({ dualStack: true });
  ec2 = ec2ClientFor(emulator);
});

afterEach(async () => {
  ec2.destroy();
  await emulator.close();
  expect(emulator.unexpectedErrors).toEqual([]);
});

const POD_BLOCK = '2600:1f18:4a01:ab03::/64';

async function createEni(input: Partial<CreateNetworkInterfaceCommandInput> = {}) {
  const { NetworkInterface } = await ec2.send(
    new CreateNetworkInterfaceCommand({ SubnetId: cluster.subnets.podsA.subnetId, ...input }),
  );
  if (!NetworkInterface?.NetworkInterfaceId) throw new Error('CreateNetworkInterface returned no ENI');
  return { ...NetworkInterface, NetworkInterfaceId: NetworkInterface.NetworkInterfaceId };
}

async function attachedEni(instanceType: string) {
  const instance = emulator.state.launchInstance({
    instanceType,
    subnetId: cluster.subnets.nodesA.subnetId,
  });
  const eni = await createEni();
  await ec2.send(
    new AttachNetworkInterfaceCommand({
      NetworkInterfaceId: eni.NetworkInterfaceId,
      InstanceId: instance.instanceId,
      DeviceIndex: 1,
    }),
  );
  return { instance, eniId: eni.NetworkInterfaceId };
}

const assignPrefixes = (eniId: string, count: number) =>
  ec2.send(new AssignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6PrefixCount: count }));

async function describedPrefixes(eniId: string): Promise<string[]> {
  const { NetworkInterfaces } = await ec2.send(
    new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'network-interface-id', Values: [eniId] }] }),
  );
  return (NetworkInterfaces?.[0]?.Ipv6Prefixes ?? []).map((prefix) => prefix.Ipv6Prefix ?? '');
}

describe('a dual-stack VPC, read through Describe*', () => {
  it('DescribeVpcs lists the /56 and DescribeSubnets a /64 per node and pod subnet; the tiny subnet is IPv4-only', async () => {
    const { Vpcs } = await ec2.send(new DescribeVpcsCommand({ VpcIds: [cluster.vpc.vpcId] }));
    expect(Vpcs?.[0]?.Ipv6CidrBlockAssociationSet).toEqual([
      expect.objectContaining({
        Ipv6CidrBlock: '2600:1f18:4a01:ab00::/56',
        Ipv6CidrBlockState: { State: 'associated' },
      }),
    ]);
    const { Subnets } = await ec2.send(
      new DescribeSubnetsCommand({ Filters: [{ Name: 'vpc-id', Values: [cluster.vpc.vpcId] }] }),
    );
    const blocks = Object.fromEntries(
      (Subnets ?? []).map((subnet) => [
        subnet.SubnetId,
        (subnet.Ipv6CidrBlockAssociationSet ?? []).map((association) => association.Ipv6CidrBlock),
      ]),
    );
    expect(blocks).toEqual({
      [cluster.subnets.nodesA.subnetId]: ['2600:1f18:4a01:ab01::/64'],
      [cluster.subnets.nodesB.subnetId]: ['2600:1f18:4a01:ab02::/64'],
      [cluster.subnets.podsA.subnetId]: [POD_BLOCK],
      [cluster.subnets.podsB.subnetId]: ['2600:1f18:4a01:ab04::/64'],
      [cluster.subnets.tinyA.subnetId]: [],
    });
    const byBlock = await ec2.send(
      new DescribeSubnetsCommand({
        Filters: [{ Name: 'ipv6-cidr-block-association.ipv6-cidr-block', Values: [POD_BLOCK] }],
      }),
    );
    expect(byBlock.Subnets?.map((subnet) => subnet.SubnetId)).toEqual([cluster.subnets.podsA.subnetId]);
  });

  it('a seed without dualStack has no IPv6 anywhere', async () => {
    const plain = emulator.state.seedCluster({ clusterName: 'ipv4-only' });
    const { Vpcs } = await ec2.send(new DescribeVpcsCommand({ VpcIds: [plain.vpc.vpcId] }));
    expect(Vpcs?.[0]?.Ipv6CidrBlockAssociationSet).toEqual([]);
    const { Subnets } = await ec2.send(
      new DescribeSubnetsCommand({ Filters: [{ Name: 'vpc-id', Values: [plain.vpc.vpcId] }] }),
    );
    expect(Subnets?.flatMap((subnet) => subnet.Ipv6CidrBlockAssociationSet ?? [])).toEqual([]);
  });

  it('DescribeInstanceTypes reports Ipv6AddressesPerInterface from the table, 0 and unsupported for old Xen types', async () => {
    const { InstanceTypes } = await ec2.send(
      new DescribeInstanceTypesCommand({ InstanceTypes: ['m5.large', 'm1.small'] }),
    );
    const byType = Object.fromEntries(
      (InstanceTypes ?? []).map((info) => [
        info.InstanceType,
        [info.NetworkInfo?.Ipv6AddressesPerInterface, info.NetworkInfo?.Ipv6Supported],
      ]),
    );
    expect(byType).toEqual({ 'm5.large': [10, true], 'm1.small': [0, false] });
  });
});

describe('/80 prefixes', () => {
  it('AssignIpv6Addresses carves the lowest free /80s of the subnet /64, never twice, and Describe lists them', async () => {
    const first = await attachedEni('m5.large');
    const second = await attachedEni('m5.large');
    const one = await assignPrefixes(first.eniId, 1);
    const two = await assignPrefixes(second.eniId, 2);
    // The first /80 of the block holds addresses AWS reserves: it is never delegated.
    expect(one.AssignedIpv6Prefixes).toEqual(['2600:1f18:4a01:ab03:1::/80']);
    expect(two.AssignedIpv6Prefixes).toEqual(['2600:1f18:4a01:ab03:2::/80', '2600:1f18:4a01:ab03:3::/80']);
    expect(await describedPrefixes(first.eniId)).toEqual(['2600:1f18:4a01:ab03:1::/80']);
    const { Reservations } = await ec2.send(
      new DescribeInstancesCommand({
        Filters: [{ Name: 'instance-id', Values: [second.instance.instanceId] }],
      }),
    );
    const attached = Reservations?.[0]?.Instances?.[0]?.NetworkInterfaces?.find(
      (eni) => eni.NetworkInterfaceId === second.eniId,
    );
    expect(attached?.Ipv6Prefixes?.map((prefix) => prefix.Ipv6Prefix)).toEqual(two.AssignedIpv6Prefixes);
  });

  it('CreateNetworkInterface takes a /80 with the IPv4 addresses, and deleting the ENI returns it', async () => {
    const eni = await createEni({ SecondaryPrivateIpAddressCount: 2, Ipv6PrefixCount: 1 });
    expect(eni.Ipv6Prefixes?.map((prefix) => prefix.Ipv6Prefix)).toEqual(['2600:1f18:4a01:ab03:1::/80']);
    expect(eni.PrivateIpAddresses).toHaveLength(3);
    await ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eni.NetworkInterfaceId }));
    const next = await createEni({ Ipv6PrefixCount: 1 });
    expect(next.Ipv6Prefixes?.map((prefix) => prefix.Ipv6Prefix)).toEqual(['2600:1f18:4a01:ab03:1::/80']);
  });

  it('takes explicit prefixes only as free /80s of the subnet block', async () => {
    const { eniId } = await attachedEni('m5.large');
    const explicit = await ec2.send(
      new AssignIpv6AddressesCommand({
        NetworkInterfaceId: eniId,
        Ipv6Prefixes: ['2600:1f18:4a01:ab03:9::/80'],
      }),
    );
    expect(explicit.AssignedIpv6Prefixes).toEqual(['2600:1f18:4a01:ab03:9::/80']);
    const other = await attachedEni('m5.large');
    const cases: [string[], string, RegExp?][] = [
      [['2600:1f18:4a01:ab03:9::/80'], 'InvalidIPAddress.InUse'],
      [['2600:1f18:4a01:ab04:1::/80'], 'InvalidParameterValue', /expecting a \/80 inside/],
      [['2600:1f18:4a01:ab03::/72'], 'InvalidParameterValue', /expecting a \/80/],
      [['2600:1f18:4a01:ab03::/80'], 'InvalidIPAddress.InUse'],
    ];
    for (const [prefixes, code, message] of cases) {
      await expectEc2Error(
        ec2.send(new AssignIpv6AddressesCommand({ NetworkInterfaceId: other.eniId, Ipv6Prefixes: prefixes })),
        code,
        message,
      );
    }
    await expectEc2Error(
      ec2.send(
        new AssignIpv6AddressesCommand({
          NetworkInterfaceId: other.eniId,
          Ipv6PrefixCount: 1,
          Ipv6Prefixes: ['2600:1f18:4a01:ab03:a::/80'],
        }),
      ),
      'InvalidParameterCombination',
    );
    await expectEc2Error(
      ec2.send(new AssignIpv6AddressesCommand({ NetworkInterfaceId: other.eniId })),
      'MissingParameter',
    );
    expect(await describedPrefixes(other.eniId)).toEqual([]);
  });

  it('UnassignIpv6Addresses gives a /80 back to the subnet and refuses one the ENI does not hold', async () => {
    const { eniId } = await attachedEni('m5.large');
    const [prefix] = (await assignPrefixes(eniId, 1)).AssignedIpv6Prefixes ?? [];
    const unassigned = await ec2.send(
      new UnassignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6Prefixes: [prefix as string] }),
    );
    expect(unassigned.UnassignedIpv6Prefixes).toEqual([prefix]);
    expect(await describedPrefixes(eniId)).toEqual([]);
    await expectEc2Error(
      ec2.send(
        new UnassignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6Prefixes: [prefix as string] }),
      ),
      'InvalidParameterValue',
      /not assigned/,
    );
    expect((await assignPrefixes(eniId, 1)).AssignedIpv6Prefixes).toEqual([prefix]);
  });
});

describe('refusals', () => {
  it('refuses IPv6 in a subnet without an IPv6 block, on assign and on create, and takes nothing', async () => {
    const tiny = cluster.subnets.tinyA.subnetId;
    const eni = await createEni({ SubnetId: tiny });
    await expectEc2Error(
      assignPrefixes(eni.NetworkInterfaceId, 1),
      'InvalidParameterValue',
      /no IPv6 CIDR block/,
    );
    const before = emulator.state.availableIpAddressCount(tiny);
    const enisBefore = emulator.state.networkInterfaces().length;
    await expectEc2Error(
      createEni({ SubnetId: tiny, SecondaryPrivateIpAddressCount: 2, Ipv6PrefixCount: 1 }),
      'InvalidParameterValue',
      /no IPv6 CIDR block/,
    );
    expect(emulator.state.availableIpAddressCount(tiny)).toBe(before);
    expect(emulator.state.networkInterfaces()).toHaveLength(enisBefore);
  });

  it('counts each /80 as one IPv6 address against the attached type (m5.large: 10)', async () => {
    const { eniId } = await attachedEni('m5.large');
    await assignPrefixes(eniId, 10);
    await expectEc2Error(assignPrefixes(eniId, 1), 'PrivateIpAddressLimitExceeded', /IPv6/);
    expect(await describedPrefixes(eniId)).toHaveLength(10);
  });

  it('refuses /80s on a Xen type (no prefixes) and on a type without IPv6, and refuses to attach an ENI holding one there', async () => {
    const xen = await attachedEni('t2.medium');
    await expectEc2Error(assignPrefixes(xen.eniId, 1), 'InvalidParameterValue', /Nitro/);
    const old = await attachedEni('m3.medium');
    await expectEc2Error(assignPrefixes(old.eniId, 1), 'InvalidParameterValue', /does not support IPv6/);

    const withPrefix = await createEni({ Ipv6PrefixCount: 1 });
    const instance = emulator.state.launchInstance({
      instanceType: 'm3.medium',
      subnetId: cluster.subnets.nodesA.subnetId,
    });
    await expectEc2Error(
      ec2.send(
        new AttachNetworkInterfaceCommand({
          NetworkInterfaceId: withPrefix.NetworkInterfaceId,
          InstanceId: instance.instanceId,
          DeviceIndex: 1,
        }),
      ),
      'InvalidParameterValue',
      /does not support IPv6/,
    );
  });
});
