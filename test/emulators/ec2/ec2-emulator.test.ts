import {
  type _InstanceType,
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  type CreateNetworkInterfaceCommandInput,
  CreateTagsCommand,
  DeleteNetworkInterfaceCommand,
  DeleteTagsCommand,
  DescribeInstancesCommand,
  DescribeInstanceTypesCommand,
  DescribeNetworkInterfacesCommand,
  DescribeRouteTablesCommand,
  DescribeSecurityGroupsCommand,
  DescribeSubnetsCommand,
  DescribeVpcsCommand,
  DetachNetworkInterfaceCommand,
  EC2Client,
  ModifyNetworkInterfaceAttributeCommand,
  UnassignPrivateIpAddressesCommand,
} from '@aws-sdk/client-ec2';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expectEc2Error } from './expect-ec2-error.ts';
import { type ClusterSeed, type Ec2Emulator, type InstanceStateName, startEc2Emulator } from './index.ts';
import { ec2ClientFor, FAKE_CREDENTIALS } from './sdk-client.ts';

let emulator: Ec2Emulator;
let ec2: EC2Client;
let cluster: ClusterSeed;

beforeEach(async () => {
  emulator = await startEc2Emulator();
  cluster = emulator.state.seedCluster();
  ec2 = ec2ClientFor(emulator);
});

afterEach(async () => {
  ec2.destroy();
  await emulator.close();
  expect(emulator.unexpectedErrors).toEqual([]);
});

function launch(
  instanceType = 'm5.large',
  subnetId = cluster.subnets.nodesA.subnetId,
  state?: InstanceStateName,
) {
  return emulator.state.launchInstance({
    instanceType,
    subnetId,
    tags: { 'kubernetes.io/cluster/test-cluster': 'owned' },
    ...(state ? { state } : {}),
  });
}

async function createEni(input: Partial<CreateNetworkInterfaceCommandInput> = {}) {
  const result = await ec2.send(
    new CreateNetworkInterfaceCommand({ SubnetId: cluster.subnets.podsA.subnetId, ...input }),
  );
  const eni = result.NetworkInterface;
  if (!eni?.NetworkInterfaceId) throw new Error('CreateNetworkInterface returned no ENI');
  return { ...eni, NetworkInterfaceId: eni.NetworkInterfaceId };
}

async function attach(networkInterfaceId: string, instanceId: string, deviceIndex: number): Promise<string> {
  const result = await ec2.send(
    new AttachNetworkInterfaceCommand({
      NetworkInterfaceId: networkInterfaceId,
      InstanceId: instanceId,
      DeviceIndex: deviceIndex,
    }),
  );
  if (!result.AttachmentId) throw new Error('AttachNetworkInterface returned no attachment id');
  return result.AttachmentId;
}

async function describeEni(networkInterfaceId: string) {
  const result = await ec2.send(
    new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [networkInterfaceId] }),
  );
  expect(result.NetworkInterfaces).toHaveLength(1);
  return result.NetworkInterfaces?.[0];
}

async function availableAddresses(subnetId: string): Promise<number | undefined> {
  const result = await ec2.send(new DescribeSubnetsCommand({ SubnetIds: [subnetId] }));
  return result.Subnets?.[0]?.AvailableIpAddressCount;
}

describe('seeded network, read through Describe*', () => {
  it('DescribeVpcs lists the primary and the secondary CIDR', async () => {
    const { Vpcs } = await ec2.send(new DescribeVpcsCommand({ VpcIds: [cluster.vpc.vpcId] }));
    expect(Vpcs?.[0]?.CidrBlock).toBe('10.0.0.0/16');
    expect(Vpcs?.[0]?.CidrBlockAssociationSet?.map((association) => association.CidrBlock)).toEqual([
      '10.0.0.0/16',
      '100.64.0.0/16',
    ]);
  });

  it('DescribeSubnets filters by tag and AZ and reports usable addresses (AWS reserves 5 per subnet)', async () => {
    const { Subnets } = await ec2.send(
      new DescribeSubnetsCommand({
        Filters: [
          { Name: 'vpc-id', Values: [cluster.vpc.vpcId] },
          { Name: 'tag:cilium.io/pod-subnet', Values: ['true'] },
          { Name: 'availability-zone', Values: ['us-east-1b'] },
        ],
      }),
    );
    expect(
      Subnets?.map((subnet) => [subnet.SubnetId, subnet.CidrBlock, subnet.AvailableIpAddressCount]),
    ).toEqual([[cluster.subnets.podsB.subnetId, '100.64.1.0/24', 251]]);
  });

  it('DescribeRouteTables finds explicit subnet associations only, as EC2 does', async () => {
    const byPodSubnet = await ec2.send(
      new DescribeRouteTablesCommand({
        Filters: [{ Name: 'association.subnet-id', Values: [cluster.subnets.podsA.subnetId] }],
      }),
    );
    expect(byPodSubnet.RouteTables?.map((table) => table.RouteTableId)).toEqual([
      cluster.routeTables.pods.routeTableId,
    ]);
    const byNodeSubnet = await ec2.send(
      new DescribeRouteTablesCommand({
        Filters: [{ Name: 'association.subnet-id', Values: [cluster.subnets.nodesA.subnetId] }],
      }),
    );
    expect(byNodeSubnet.RouteTables).toEqual([]);
    const main = await ec2.send(
      new DescribeRouteTablesCommand({ Filters: [{ Name: 'association.main', Values: ['true'] }] }),
    );
    expect(main.RouteTables?.map((table) => table.RouteTableId)).toEqual([
      cluster.routeTables.main.routeTableId,
    ]);
  });

  it('DescribeSecurityGroups filters by tag with a wildcard', async () => {
    const { SecurityGroups } = await ec2.send(
      new DescribeSecurityGroupsCommand({
        Filters: [
          { Name: 'vpc-id', Values: [cluster.vpc.vpcId] },
          { Name: 'tag:role', Values: ['pod*'] },
        ],
      }),
    );
    expect(SecurityGroups?.map((group) => [group.GroupId, group.GroupName])).toEqual([
      [cluster.securityGroups.pods.groupId, 'test-cluster-pods'],
    ]);
  });

  it('DescribeInstanceTypes answers the static limits table', async () => {
    const { InstanceTypes } = await ec2.send(
      new DescribeInstanceTypesCommand({ InstanceTypes: ['m5.large', 't2.medium', 'c5.metal'] }),
    );
    const summary = InstanceTypes?.map((type) => [
      type.InstanceType,
      type.NetworkInfo?.MaximumNetworkInterfaces,
      type.NetworkInfo?.Ipv4AddressesPerInterface,
      type.Hypervisor,
      type.BareMetal,
    ]);
    expect(summary).toEqual([
      ['c5.metal', 15, 50, undefined, true],
      ['m5.large', 3, 10, 'nitro', false],
      ['t2.medium', 3, 6, 'xen', false],
    ]);
  });
});

describe('reaching the emulator', () => {
  it('through AWS_ENDPOINT_URL_EC2 with no endpoint in code', async () => {
    const previous = process.env.AWS_ENDPOINT_URL_EC2;
    process.env.AWS_ENDPOINT_URL_EC2 = emulator.url;
    const client = new EC2Client({ region: 'us-east-1', credentials: FAKE_CREDENTIALS, maxAttempts: 1 });
    try {
      const { Vpcs } = await client.send(new DescribeVpcsCommand({}));
      expect(Vpcs?.map((vpc) => vpc.VpcId)).toEqual([cluster.vpc.vpcId]);
      expect(emulator.calls.log).toEqual([
        {
          action: 'DescribeVpcs',
          atMs: expect.any(Number),
          outcome: 'ok',
          resources: ['*'],
          accessKeyId: FAKE_CREDENTIALS.accessKeyId,
        },
      ]);
    } finally {
      client.destroy();
      if (previous === undefined) delete process.env.AWS_ENDPOINT_URL_EC2;
      else process.env.AWS_ENDPOINT_URL_EC2 = previous;
    }
  });
});

describe('DescribeInstances', () => {
  it('shows the primary ENI at device index 0 with DeleteOnTermination and an EC2-style DNS name', async () => {
    const instance = launch();
    const { Reservations } = await ec2.send(
      new DescribeInstancesCommand({ InstanceIds: [instance.instanceId] }),
    );
    const described = Reservations?.[0]?.Instances?.[0];
    expect(described?.State).toEqual({ Code: 16, Name: 'running' });
    expect(described?.PrivateDnsName).toBe(
      `ip-${instance.privateIpAddress.replaceAll('.', '-')}.ec2.internal`,
    );
    expect(
      described?.NetworkInterfaces?.map((eni) => [
        eni.Attachment?.DeviceIndex,
        eni.Attachment?.DeleteOnTermination,
      ]),
    ).toEqual([[0, true]]);
  });

  it('filters by state, tag and private DNS name and pages with MaxResults/NextToken', async () => {
    const running = Array.from({ length: 12 }, () => launch());
    launch('m5.large', cluster.subnets.nodesB.subnetId, 'stopped');
    const filters = [
      { Name: 'instance-state-name', Values: ['running', 'pending'] },
      { Name: 'tag-key', Values: ['kubernetes.io/cluster/test-cluster'] },
    ];
    const pages: string[][] = [];
    let nextToken: string | undefined;
    do {
      const page = await ec2.send(
        new DescribeInstancesCommand({ Filters: filters, MaxResults: 5, NextToken: nextToken }),
      );
      pages.push(
        (page.Reservations ?? [])
          .flatMap((reservation) => reservation.Instances ?? [])
          .map((i) => i.InstanceId ?? ''),
      );
      nextToken = page.NextToken;
    } while (nextToken);
    expect(pages.map((page) => page.length)).toEqual([5, 5, 2]);
    expect(pages.flat().sort()).toEqual(running.map((instance) => instance.instanceId).sort());

    const target = running[3];
    const byDns = await ec2.send(
      new DescribeInstancesCommand({
        Filters: [{ Name: 'private-dns-name', Values: [target?.privateDnsName ?? ''] }],
      }),
    );
    expect(
      byDns.Reservations?.flatMap((reservation) => reservation.Instances ?? []).map((i) => i.InstanceId),
    ).toEqual([target?.instanceId]);
  });
});

describe('CreateNetworkInterface', () => {
  it('allocates addresses from the subnet and returns the full ENI', async () => {
    const before = await availableAddresses(cluster.subnets.podsA.subnetId);
    const eni = await createEni({
      SecondaryPrivateIpAddressCount: 3,
      Groups: [cluster.securityGroups.pods.groupId],
      Description: 'Cilium-CNI (i-1) <&"\'>',
      TagSpecifications: [
        { ResourceType: 'network-interface', Tags: [{ Key: 'cilium.io/node', Value: 'n1' }] },
      ],
    });
    expect(eni.Status).toBe('available');
    expect(eni.Description).toBe('Cilium-CNI (i-1) <&"\'>');
    expect(eni.PrivateIpAddresses?.map((address) => [address.PrivateIpAddress, address.Primary])).toEqual([
      ['100.64.0.4', true],
      ['100.64.0.5', false],
      ['100.64.0.6', false],
      ['100.64.0.7', false],
    ]);
    expect(eni.Groups).toEqual([
      { GroupId: cluster.securityGroups.pods.groupId, GroupName: 'test-cluster-pods' },
    ]);
    expect(eni.TagSet).toEqual([{ Key: 'cilium.io/node', Value: 'n1' }]);
    expect(eni.MacAddress).toMatch(/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/);
    expect(await availableAddresses(cluster.subnets.podsA.subnetId)).toBe((before ?? 0) - 4);
  });

  it('replays a ClientToken: same ENI, no second ENI, no addresses consumed', async () => {
    const request = { SecondaryPrivateIpAddressCount: 2, ClientToken: 'node-i-1-slot-1' };
    const first = await createEni(request);
    const afterFirst = await availableAddresses(cluster.subnets.podsA.subnetId);
    const replay = await createEni(request);
    expect(replay.NetworkInterfaceId).toBe(first.NetworkInterfaceId);
    expect(replay.PrivateIpAddresses).toEqual(first.PrivateIpAddresses);
    expect(await availableAddresses(cluster.subnets.podsA.subnetId)).toBe(afterFirst);
    expect(
      emulator.state.networkInterfaceHistory().filter((eni) => eni.clientToken === 'node-i-1-slot-1'),
    ).toHaveLength(1);
  });

  it('refuses a ClientToken reused with other parameters (IdempotentParameterMismatch)', async () => {
    await createEni({ SecondaryPrivateIpAddressCount: 2, ClientToken: 'token-a' });
    await expectEc2Error(
      createEni({ SecondaryPrivateIpAddressCount: 3, ClientToken: 'token-a' }),
      'IdempotentParameterMismatch',
    );
    expect(emulator.state.networkInterfaces({ subnetId: cluster.subnets.podsA.subnetId })).toHaveLength(1);
  });

  it('fails with InsufficientFreeAddressesInSubnet and takes nothing when the subnet is short', async () => {
    const tiny = cluster.subnets.tinyA.subnetId;
    expect(await availableAddresses(tiny)).toBe(11);
    await expectEc2Error(
      createEni({ SubnetId: tiny, SecondaryPrivateIpAddressCount: 11 }),
      'InsufficientFreeAddressesInSubnet',
    );
    expect(await availableAddresses(tiny)).toBe(11);
    await createEni({ SubnetId: tiny, SecondaryPrivateIpAddressCount: 10 });
    expect(await availableAddresses(tiny)).toBe(0);
    await expectEc2Error(createEni({ SubnetId: tiny }), 'InsufficientFreeAddressesInSubnet');
  });

  it('delegates aligned /28 prefixes and counts 16 addresses each', async () => {
    const eni = await createEni({ Ipv4PrefixCount: 2 });
    expect(eni.Ipv4Prefixes?.map((prefix) => prefix.Ipv4Prefix)).toEqual([
      '100.64.0.16/28',
      '100.64.0.32/28',
    ]);
    expect(await availableAddresses(cluster.subnets.podsA.subnetId)).toBe(251 - 1 - 32);
  });

  it('fails prefixes with InsufficientCidrBlocks on a fragmented subnet while single IPs still work', async () => {
    emulator.state.setSubnetFragmented(cluster.subnets.podsA.subnetId, true);
    await expectEc2Error(createEni({ Ipv4PrefixCount: 1 }), 'InsufficientCidrBlocks');
    const eni = await createEni({ SecondaryPrivateIpAddressCount: 1 });
    expect(eni.PrivateIpAddresses).toHaveLength(2);
    // A /28 subnet never has a whole aligned /28 free (AWS reserves 5 of its addresses).
    await expectEc2Error(
      createEni({ SubnetId: cluster.subnets.tinyA.subnetId, Ipv4PrefixCount: 1 }),
      'InsufficientCidrBlocks',
    );
  });
});

describe('AttachNetworkInterface and ModifyNetworkInterfaceAttribute', () => {
  it('attaches, then sets DeleteOnTermination through the attachment id', async () => {
    const instance = launch();
    const eni = await createEni();
    const attachmentId = await attach(eni.NetworkInterfaceId, instance.instanceId, 1);
    const attached = await describeEni(eni.NetworkInterfaceId);
    expect(attached?.Status).toBe('in-use');
    expect(attached?.Attachment).toMatchObject({
      AttachmentId: attachmentId,
      InstanceId: instance.instanceId,
      DeviceIndex: 1,
      NetworkCardIndex: 0,
      Status: 'attached',
      DeleteOnTermination: false,
    });
    await ec2.send(
      new ModifyNetworkInterfaceAttributeCommand({
        NetworkInterfaceId: eni.NetworkInterfaceId,
        Attachment: { AttachmentId: attachmentId, DeleteOnTermination: true },
      }),
    );
    expect((await describeEni(eni.NetworkInterfaceId))?.Attachment?.DeleteOnTermination).toBe(true);
    await expectEc2Error(
      ec2.send(
        new ModifyNetworkInterfaceAttributeCommand({
          NetworkInterfaceId: eni.NetworkInterfaceId,
          Attachment: { AttachmentId: 'eni-attach-0123456789abcdef0', DeleteOnTermination: true },
        }),
      ),
      'InvalidAttachmentID.NotFound',
    );
  });

  it('rejects a taken device index with the text cilium matches', async () => {
    const instance = launch();
    const first = await createEni();
    const second = await createEni();
    await attach(first.NetworkInterfaceId, instance.instanceId, 1);
    await expectEc2Error(
      attach(second.NetworkInterfaceId, instance.instanceId, 1),
      'InvalidParameterValue',
      new RegExp(`Instance '${instance.instanceId}' already has an interface attached at device index '1'`),
    );
  });

  it('enforces the instance type ENI limit (m5.large: 3)', async () => {
    const instance = launch('m5.large');
    const enis = await Promise.all([createEni(), createEni(), createEni()]);
    await attach(enis[0].NetworkInterfaceId, instance.instanceId, 1);
    await attach(enis[1].NetworkInterfaceId, instance.instanceId, 2);
    await expectEc2Error(
      attach(enis[2].NetworkInterfaceId, instance.instanceId, 3),
      'AttachmentLimitExceeded',
    );
    expect(emulator.state.networkInterfaces({ instanceId: instance.instanceId })).toHaveLength(3);
  });

  it('refuses an ENI that is already attached, a pending instance and another AZ', async () => {
    const instance = launch();
    const other = launch();
    const eni = await createEni();
    await attach(eni.NetworkInterfaceId, instance.instanceId, 1);
    await expectEc2Error(
      attach(eni.NetworkInterfaceId, other.instanceId, 1),
      'InvalidNetworkInterface.InUse',
    );

    const pending = launch('m5.large', cluster.subnets.nodesA.subnetId, 'pending');
    await expectEc2Error(
      attach((await createEni()).NetworkInterfaceId, pending.instanceId, 1),
      'IncorrectInstanceState',
    );

    const otherZone = await createEni({ SubnetId: cluster.subnets.podsB.subnetId });
    await expectEc2Error(
      attach(otherZone.NetworkInterfaceId, instance.instanceId, 2),
      'InvalidParameterValue',
      /same availability zone/,
    );
  });
});

describe('AssignPrivateIpAddresses and UnassignPrivateIpAddresses', () => {
  it('caps secondary IPs per ENI by the attached instance type (m5.large: 9)', async () => {
    const instance = launch('m5.large');
    const eni = await createEni({ SecondaryPrivateIpAddressCount: 5 });
    await attach(eni.NetworkInterfaceId, instance.instanceId, 1);
    const assigned = await ec2.send(
      new AssignPrivateIpAddressesCommand({
        NetworkInterfaceId: eni.NetworkInterfaceId,
        SecondaryPrivateIpAddressCount: 4,
      }),
    );
    expect(assigned.AssignedPrivateIpAddresses?.map((address) => address.PrivateIpAddress)).toEqual([
      '100.64.0.10',
      '100.64.0.11',
      '100.64.0.12',
      '100.64.0.13',
    ]);
    await expectEc2Error(
      ec2.send(
        new AssignPrivateIpAddressesCommand({
          NetworkInterfaceId: eni.NetworkInterfaceId,
          SecondaryPrivateIpAddressCount: 1,
        }),
      ),
      'PrivateIpAddressLimitExceeded',
    );
    expect((await describeEni(eni.NetworkInterfaceId))?.PrivateIpAddresses).toHaveLength(10);
  });

  it('assigns prefixes on Nitro, each taking one slot, and refuses them on Xen', async () => {
    const nitro = launch('m5.large');
    const eni = await createEni();
    await attach(eni.NetworkInterfaceId, nitro.instanceId, 1);
    const assigned = await ec2.send(
      new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eni.NetworkInterfaceId, Ipv4PrefixCount: 9 }),
    );
    expect(assigned.AssignedIpv4Prefixes).toHaveLength(9);
    expect(assigned.AssignedIpv4Prefixes?.[0]?.Ipv4Prefix).toBe('100.64.0.16/28');
    await expectEc2Error(
      ec2.send(
        new AssignPrivateIpAddressesCommand({
          NetworkInterfaceId: eni.NetworkInterfaceId,
          Ipv4PrefixCount: 1,
        }),
      ),
      'PrivateIpAddressLimitExceeded',
    );

    const xen = launch('t2.medium');
    const xenEni = await createEni();
    await attach(xenEni.NetworkInterfaceId, xen.instanceId, 1);
    await expectEc2Error(
      ec2.send(
        new AssignPrivateIpAddressesCommand({
          NetworkInterfaceId: xenEni.NetworkInterfaceId,
          Ipv4PrefixCount: 1,
        }),
      ),
      'InvalidParameterValue',
      /Nitro/,
    );
  });

  it('unassigns addresses and prefixes back to the subnet and refuses unknown ones', async () => {
    const podsA = cluster.subnets.podsA.subnetId;
    const eni = await createEni({ SecondaryPrivateIpAddressCount: 2 });
    await ec2.send(
      new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eni.NetworkInterfaceId, Ipv4PrefixCount: 1 }),
    );
    expect(await availableAddresses(podsA)).toBe(251 - 3 - 16);
    await ec2.send(
      new UnassignPrivateIpAddressesCommand({
        NetworkInterfaceId: eni.NetworkInterfaceId,
        PrivateIpAddresses: ['100.64.0.5'],
        Ipv4Prefixes: ['100.64.0.16/28'],
      }),
    );
    expect(await availableAddresses(podsA)).toBe(251 - 2);
    const described = await describeEni(eni.NetworkInterfaceId);
    expect(described?.PrivateIpAddresses?.map((address) => address.PrivateIpAddress)).toEqual([
      '100.64.0.4',
      '100.64.0.6',
    ]);
    expect(described?.Ipv4Prefixes).toEqual([]);
    await expectEc2Error(
      ec2.send(
        new UnassignPrivateIpAddressesCommand({
          NetworkInterfaceId: eni.NetworkInterfaceId,
          PrivateIpAddresses: ['100.64.0.99'],
        }),
      ),
      'InvalidParameterValue',
      /not assigned/,
    );
  });
});

describe('DetachNetworkInterface, DeleteNetworkInterface and termination', () => {
  it('refuses to delete an attached ENI, detaches it, then deletes it and frees its addresses', async () => {
    const instance = launch();
    const podsA = cluster.subnets.podsA.subnetId;
    const eni = await createEni({ SecondaryPrivateIpAddressCount: 4 });
    const attachmentId = await attach(eni.NetworkInterfaceId, instance.instanceId, 1);
    await expectEc2Error(
      ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eni.NetworkInterfaceId })),
      'InvalidParameterValue',
      new RegExp(`Network interface '${eni.NetworkInterfaceId}' is currently in use`),
    );
    await ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: attachmentId }));
    expect((await describeEni(eni.NetworkInterfaceId))?.Status).toBe('available');
    await ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eni.NetworkInterfaceId }));
    expect(await availableAddresses(podsA)).toBe(251);
    await expectEc2Error(describeEni(eni.NetworkInterfaceId), 'InvalidNetworkInterfaceID.NotFound');
    expect(
      emulator.state.networkInterfaceHistory().find((e) => e.networkInterfaceId === eni.NetworkInterfaceId)
        ?.deletedAtMs,
    ).toBeTypeOf('number');
  });

  it('never detaches the primary ENI (OperationNotPermitted)', async () => {
    const instance = launch();
    const [primary] = emulator.state.networkInterfaces({ instanceId: instance.instanceId });
    await expectEc2Error(
      ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: primary?.attachment?.attachmentId })),
      'OperationNotPermitted',
    );
  });

  it('termination deletes DeleteOnTermination ENIs and leaves the others available', async () => {
    const instance = launch();
    const kept = await createEni({ SecondaryPrivateIpAddressCount: 1 });
    const dropped = await createEni({ SecondaryPrivateIpAddressCount: 1 });
    await attach(kept.NetworkInterfaceId, instance.instanceId, 1);
    const droppedAttachment = await attach(dropped.NetworkInterfaceId, instance.instanceId, 2);
    await ec2.send(
      new ModifyNetworkInterfaceAttributeCommand({
        NetworkInterfaceId: dropped.NetworkInterfaceId,
        Attachment: { AttachmentId: droppedAttachment, DeleteOnTermination: true },
      }),
    );
    const nodesBefore = await availableAddresses(cluster.subnets.nodesA.subnetId);
    emulator.state.setInstanceState(instance.instanceId, 'terminated');

    const { NetworkInterfaces } = await ec2.send(
      new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'vpc-id', Values: [cluster.vpc.vpcId] }] }),
    );
    expect(NetworkInterfaces?.map((eni) => [eni.NetworkInterfaceId, eni.Status, eni.Attachment])).toEqual([
      [kept.NetworkInterfaceId, 'available', undefined],
    ]);
    expect(await availableAddresses(cluster.subnets.nodesA.subnetId)).toBe((nodesBefore ?? 0) + 1);
    expect(await availableAddresses(cluster.subnets.podsA.subnetId)).toBe(251 - 2);
    const { Reservations } = await ec2.send(
      new DescribeInstancesCommand({ InstanceIds: [instance.instanceId] }),
    );
    expect(Reservations?.[0]?.Instances?.[0]?.State).toEqual({ Code: 48, Name: 'terminated' });
    expect(Reservations?.[0]?.Instances?.[0]?.NetworkInterfaces).toEqual([]);
  });
});

describe('DescribeNetworkInterfaces filters and pagination, tags', () => {
  it('pages a filtered listing without duplicates or gaps', async () => {
    const created = [];
    for (let index = 0; index < 7; index++) created.push((await createEni()).NetworkInterfaceId);
    await createEni({ SubnetId: cluster.subnets.podsB.subnetId });
    const seen: string[] = [];
    let nextToken: string | undefined;
    let pages = 0;
    do {
      const page = await ec2.send(
        new DescribeNetworkInterfacesCommand({
          Filters: [{ Name: 'subnet-id', Values: [cluster.subnets.podsA.subnetId] }],
          MaxResults: 5,
          NextToken: nextToken,
        }),
      );
      seen.push(...(page.NetworkInterfaces ?? []).map((eni) => eni.NetworkInterfaceId ?? ''));
      nextToken = page.NextToken;
      pages += 1;
    } while (nextToken);
    expect(pages).toBe(2);
    expect(seen).toEqual(created);
  });

  it('filters by attachment.instance-id, status, tag and description', async () => {
    const instance = launch();
    const tagged = await createEni({
      Description: 'Cilium-CNI (x)',
      TagSpecifications: [{ ResourceType: 'network-interface', Tags: [{ Key: 'owner', Value: 'cilium' }] }],
    });
    await createEni();
    await attach(tagged.NetworkInterfaceId, instance.instanceId, 1);
    const query = (name: string, values: string[]) =>
      ec2
        .send(new DescribeNetworkInterfacesCommand({ Filters: [{ Name: name, Values: values }] }))
        .then((result) => result.NetworkInterfaces?.map((eni) => eni.NetworkInterfaceId));
    expect(await query('attachment.instance-id', [instance.instanceId])).toHaveLength(2);
    expect(await query('tag:owner', ['cilium'])).toEqual([tagged.NetworkInterfaceId]);
    expect(await query('description', ['Cilium-CNI*'])).toEqual([tagged.NetworkInterfaceId]);
    expect(await query('status', ['available'])).toHaveLength(1);
  });

  it('CreateTags and DeleteTags change the tags Describe* report', async () => {
    const eni = await createEni();
    await ec2.send(
      new CreateTagsCommand({
        Resources: [eni.NetworkInterfaceId, cluster.subnets.podsA.subnetId],
        Tags: [
          { Key: 'a', Value: '1' },
          { Key: 'b', Value: '2' },
        ],
      }),
    );
    await ec2.send(
      new DeleteTagsCommand({
        Resources: [eni.NetworkInterfaceId],
        Tags: [{ Key: 'a' }, { Key: 'b', Value: 'other' }],
      }),
    );
    expect((await describeEni(eni.NetworkInterfaceId))?.TagSet).toEqual([{ Key: 'b', Value: '2' }]);
    const { Subnets } = await ec2.send(
      new DescribeSubnetsCommand({ Filters: [{ Name: 'tag:a', Values: ['1'] }] }),
    );
    expect(Subnets?.map((subnet) => subnet.SubnetId)).toEqual([cluster.subnets.podsA.subnetId]);
    await expectEc2Error(
      ec2.send(
        new CreateTagsCommand({ Resources: ['eni-0123456789abcdef0'], Tags: [{ Key: 'a', Value: '1' }] }),
      ),
      'InvalidNetworkInterfaceID.NotFound',
    );
  });
});

interface ErrorCase {
  case: string;
  code: string;
  call: () => Promise<unknown>;
}

const UNKNOWN_ENI = 'eni-0123456789abcdef0';
const UNKNOWN_INSTANCE = 'i-0123456789abcdef0';

describe('error codes reach the caller as EC2ServiceException named by the code', () => {
  const cases: ErrorCase[] = [
    {
      case: 'unknown ENI id',
      code: 'InvalidNetworkInterfaceID.NotFound',
      call: () => ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [UNKNOWN_ENI] })),
    },
    {
      case: 'malformed ENI id',
      code: 'InvalidNetworkInterfaceID.Malformed',
      call: () => ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: 'eni-nothex' })),
    },
    {
      case: 'unknown instance id',
      code: 'InvalidInstanceID.NotFound',
      call: () => ec2.send(new DescribeInstancesCommand({ InstanceIds: [UNKNOWN_INSTANCE] })),
    },
    {
      case: 'malformed instance id',
      code: 'InvalidInstanceID.Malformed',
      call: () => ec2.send(new DescribeInstancesCommand({ InstanceIds: ['node-1'] })),
    },
    {
      case: 'attach to an unknown instance',
      code: 'InvalidInstanceID.NotFound',
      call: async () => attach((await createEni()).NetworkInterfaceId, UNKNOWN_INSTANCE, 1),
    },
    {
      case: 'unknown subnet',
      code: 'InvalidSubnetID.NotFound',
      call: () => ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: 'subnet-0123456789abcdef0' })),
    },
    {
      case: 'unknown security group',
      code: 'InvalidGroup.NotFound',
      call: () => createEni({ Groups: ['sg-0123456789abcdef0'] }),
    },
    {
      case: 'unknown VPC',
      code: 'InvalidVpcID.NotFound',
      call: () => ec2.send(new DescribeVpcsCommand({ VpcIds: ['vpc-0123456789abcdef0'] })),
    },
    {
      case: 'unknown attachment',
      code: 'InvalidAttachmentID.NotFound',
      call: () =>
        ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: 'eni-attach-0123456789abcdef0' })),
    },
    {
      case: 'unknown instance type',
      code: 'InvalidInstanceType',
      call: () => ec2.send(new DescribeInstanceTypesCommand({ InstanceTypes: ['m5.huge' as _InstanceType] })),
    },
    {
      case: 'unknown filter name',
      code: 'InvalidParameterValue',
      call: () =>
        ec2.send(
          new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'client-token', Values: ['x'] }] }),
        ),
    },
    {
      case: 'MaxResults below the minimum',
      code: 'InvalidParameterValue',
      call: () => ec2.send(new DescribeNetworkInterfacesCommand({ MaxResults: 3 })),
    },
    {
      case: 'MaxResults with an id list',
      code: 'InvalidParameterCombination',
      call: () => ec2.send(new DescribeInstancesCommand({ InstanceIds: [UNKNOWN_INSTANCE], MaxResults: 5 })),
    },
    {
      case: 'an IP count and a prefix count together',
      code: 'InvalidParameterCombination',
      call: () => createEni({ SecondaryPrivateIpAddressCount: 1, Ipv4PrefixCount: 1 }),
    },
    {
      case: 'more secondary slots than any ENI has',
      code: 'PrivateIpAddressLimitExceeded',
      call: () => createEni({ SecondaryPrivateIpAddressCount: 50 }),
    },
    {
      case: 'missing SubnetId',
      code: 'MissingParameter',
      call: () => ec2.send(new CreateNetworkInterfaceCommand({} as CreateNetworkInterfaceCommandInput)),
    },
  ];

  it.each(cases)('$case -> $code', async ({ code, call }) => {
    await expectEc2Error(call(), code);
  });

  it('answers InvalidAction for an action it does not speak, and AuthFailure without a signature', async () => {
    const post = (body: string, headers: Record<string, string>) =>
      fetch(emulator.url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body,
      });
    const signed = { authorization: 'AWS4-HMAC-SHA256 Credential=x/20260101/us-east-1/ec2/aws4_request' };
    const unknown = await post('Action=RunInstances&Version=2016-11-15', signed);
    expect(unknown.status).toBe(400);
    expect(unknown.headers.get('x-amzn-requestid')).toMatch(/^[0-9a-f-]{36}$/);
    expect(await unknown.text()).toMatch(
      /<Response><Errors><Error><Code>InvalidAction<\/Code><Message>.*<\/Message><\/Error><\/Errors><RequestID>[0-9a-f-]{36}<\/RequestID><\/Response>/,
    );
    const unsigned = await post('Action=DescribeVpcs&Version=2016-11-15', {});
    expect(unsigned.status).toBe(401);
    expect(await unsigned.text()).toContain('<Code>AuthFailure</Code>');
  });
});
