import {
  AssignIpv6AddressesCommand,
  AssignPrivateIpAddressesCommand,
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  type CreateNetworkInterfaceCommandInput,
  CreateTagsCommand,
  DeleteNetworkInterfaceCommand,
  DescribeInstancesCommand,
  DetachNetworkInterfaceCommand,
  EC2Client,
  ModifyNetworkInterfaceAttributeCommand,
  UnassignPrivateIpAddressesCommand,
} from '@aws-sdk/client-ec2';
import { afterEach, describe, expect, it } from 'vitest';
import { ENI_TAG_KEYS, OWNER_TAG_VALUE } from '../../../functions/core/eni-ownership.ts';
import { SHARED_VPC_OWNER_ACCOUNT, stackFunctionIdentities } from '../../support/stack-policies.ts';
import { expectEc2Error } from './expect-ec2-error.ts';
import { type ClusterSeed, type Ec2Emulator, type Ec2EmulatorOptions, startEc2Emulator } from './index.ts';

/**
 * The EC2 emulator authorizes every call against the caller's identity policies, here the stack's
 * own policies as synthesized for the seeded cluster: for each statement, a call it allows and one
 * it does not. A denied call is UnauthorizedOperation (403) and changes nothing.
 */

const CLUSTER = 'test-cluster';
const ALLOCATE_KEY = 'AKIAALLOCATEFUNCTION';
const SYNC_KEY = 'AKIASYNCFUNCTION0000';
const OWNER_ACCOUNT = SHARED_VPC_OWNER_ACCOUNT;

let emulator: Ec2Emulator;
let cluster: ClusterSeed;
const clients: EC2Client[] = [];

async function start(options: Ec2EmulatorOptions = {}, context: Record<string, unknown> = {}) {
  emulator = await startEc2Emulator({ ...options, identities: {} });
  cluster = emulator.state.seedCluster({ clusterName: CLUSTER, dualStack: true });
  const identities = await stackFunctionIdentities({
    clusterName: CLUSTER,
    vpcId: cluster.vpc.vpcId,
    region: emulator.state.region,
    context,
  });
  emulator.setIdentity(ALLOCATE_KEY, identities.Allocate);
  emulator.setIdentity(SYNC_KEY, identities.Sync);
}

function clientAs(accessKeyId: string): EC2Client {
  const client = new EC2Client({
    region: emulator.state.region,
    endpoint: emulator.url,
    credentials: { accessKeyId, secretAccessKey: 'secret' },
    maxAttempts: 1,
  });
  clients.push(client);
  return client;
}

afterEach(async () => {
  for (const client of clients.splice(0)) client.destroy();
  await emulator.close();
  expect(emulator.unexpectedErrors).toEqual([]);
});

const ourTags = (instanceId = 'i-x') => ({
  [ENI_TAG_KEYS.clusterName]: CLUSTER,
  [ENI_TAG_KEYS.owner]: OWNER_TAG_VALUE,
  [ENI_TAG_KEYS.instanceId]: instanceId,
});

function createInput(
  tags: Record<string, string>,
  input: Partial<CreateNetworkInterfaceCommandInput> = {},
): CreateNetworkInterfaceCommandInput {
  return {
    SubnetId: cluster.subnets.podsA.subnetId,
    Groups: [cluster.securityGroups.pods.groupId],
    TagSpecifications: [
      {
        ResourceType: 'network-interface',
        Tags: Object.entries(tags).map(([Key, Value]) => ({ Key, Value })),
      },
    ],
    ...input,
  };
}

function launch(tags: Record<string, string> = { [`kubernetes.io/cluster/${CLUSTER}`]: 'owned' }) {
  return emulator.state.launchInstance({
    instanceType: 'm5.large',
    subnetId: cluster.subnets.nodesA.subnetId,
    tags,
  });
}

/** An ENI of ours (made through the API as the allocator), attached at index 1 of a cluster instance. */
async function attachedOwnEni(ec2: EC2Client) {
  const instance = launch();
  const created = await ec2.send(
    new CreateNetworkInterfaceCommand(createInput(ourTags(instance.instanceId))),
  );
  const eniId = created.NetworkInterface?.NetworkInterfaceId as string;
  const attached = await ec2.send(
    new AttachNetworkInterfaceCommand({
      NetworkInterfaceId: eniId,
      InstanceId: instance.instanceId,
      DeviceIndex: 1,
    }),
  );
  return { instance, eniId, attachmentId: attached.AttachmentId as string };
}

/** An ENI someone else made (as VPC CNI tags its ENIs), attached at index 1. */
function attachedForeignEni(tags: Record<string, string>) {
  const instance = launch();
  const eni = emulator.state.createNetworkInterface({
    subnetId: cluster.subnets.podsA.subnetId,
    tags,
  }).networkInterface;
  emulator.state.attachNetworkInterface({
    networkInterfaceId: eni.networkInterfaceId,
    instanceId: instance.instanceId,
    deviceIndex: 1,
  });
  return { instance, eniId: eni.networkInterfaceId };
}

const UNAUTHORIZED = 'UnauthorizedOperation';

describe('DescribeNetworking: Describe* on *', () => {
  it('allows the allocator to describe, and denies the sync role (it has no EC2 statement)', async () => {
    await start();
    await clientAs(ALLOCATE_KEY).send(new DescribeInstancesCommand({}));
    const error = await expectEc2Error(
      clientAs(SYNC_KEY).send(new DescribeInstancesCommand({})),
      UNAUTHORIZED,
    );
    expect(error.$metadata.httpStatusCode).toBe(403);
    expect(error.message).toMatch(/not authorized to perform: ec2:DescribeInstances on resource: \*/);
  });
});

describe('CreateTaggedEni, CreateEniInClusterVpc and TagOnlyOnCreate: creating our tagged ENIs in the cluster VPC', () => {
  it('allows a create carrying our cluster and owner tags, in a cluster subnet with a cluster security group', async () => {
    await start();
    const created = await clientAs(ALLOCATE_KEY).send(
      new CreateNetworkInterfaceCommand(createInput(ourTags())),
    );
    expect(created.NetworkInterface?.TagSet).toEqual(
      expect.arrayContaining([{ Key: ENI_TAG_KEYS.owner, Value: OWNER_TAG_VALUE }]),
    );
  });

  it.each<{ case: string; tags: Record<string, string>; arn: RegExp }>([
    {
      case: 'without the owner tag (aws:RequestTag)',
      tags: { [ENI_TAG_KEYS.clusterName]: CLUSTER },
      arn: /network-interface\/\*/,
    },
    {
      case: 'with another cluster’s tag',
      tags: { ...ourTags(), [ENI_TAG_KEYS.clusterName]: 'other' },
      arn: /network-interface\/\*/,
    },
    { case: 'without any tag', tags: {}, arn: /network-interface\/\*/ },
  ])('denies a create $case and creates nothing', async ({ tags, arn }) => {
    await start();
    const error = await expectEc2Error(
      clientAs(ALLOCATE_KEY).send(new CreateNetworkInterfaceCommand(createInput(tags))),
      UNAUTHORIZED,
    );
    expect(error.message).toMatch(arn);
    expect(
      emulator.state.networkInterfaces().filter((eni) => eni.subnetId === cluster.subnets.podsA.subnetId),
    ).toEqual([]);
  });

  it('denies a create in a subnet or with a security group of another VPC (ec2:Vpc)', async () => {
    await start();
    const otherVpc = emulator.state.addVpc({ cidrBlock: '172.16.0.0/16' });
    const otherSubnet = emulator.state.addSubnet({
      vpcId: otherVpc.vpcId,
      availabilityZone: 'us-east-1a',
      cidrBlock: '172.16.0.0/20',
    });
    const otherGroup = emulator.state.addSecurityGroup({ vpcId: otherVpc.vpcId, groupName: 'other' });
    const ec2 = clientAs(ALLOCATE_KEY);
    await expectEc2Error(
      ec2.send(new CreateNetworkInterfaceCommand(createInput(ourTags(), { SubnetId: otherSubnet.subnetId }))),
      UNAUTHORIZED,
      /subnet\//,
    );
    await expectEc2Error(
      ec2.send(new CreateNetworkInterfaceCommand(createInput(ourTags(), { Groups: [otherGroup.groupId] }))),
      UNAUTHORIZED,
      /security-group\//,
    );
  });

  it('denies CreateTags on an existing ENI, even our own (tags only at creation: ec2:CreateAction)', async () => {
    await start();
    const ec2 = clientAs(ALLOCATE_KEY);
    const { eniId } = await attachedOwnEni(ec2);
    const instance = launch();
    const eth0 = emulator.state.instanceNetworkInterfaces(instance.instanceId)[0]
      ?.networkInterfaceId as string;
    for (const resource of [eniId, eth0]) {
      await expectEc2Error(
        ec2.send(
          new CreateTagsCommand({
            Resources: [resource],
            Tags: [{ Key: ENI_TAG_KEYS.owner, Value: OWNER_TAG_VALUE }],
          }),
        ),
        UNAUTHORIZED,
        /ec2:CreateTags/,
      );
    }
    expect(emulator.state.networkInterface(eth0)?.tags).toEqual({});
  });
});

describe('MutateOwnEnis: assign (IPv4 and IPv6), unassign, modify, detach, delete only on ENIs carrying our owner and cluster tags', () => {
  it('allows every mutation of our own ENI', async () => {
    await start();
    const ec2 = clientAs(ALLOCATE_KEY);
    const { eniId, attachmentId } = await attachedOwnEni(ec2);
    const assigned = await ec2.send(
      new AssignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, SecondaryPrivateIpAddressCount: 2 }),
    );
    const ips = (assigned.AssignedPrivateIpAddresses ?? []).map((a) => a.PrivateIpAddress as string);
    await ec2.send(
      new UnassignPrivateIpAddressesCommand({ NetworkInterfaceId: eniId, PrivateIpAddresses: ips }),
    );
    const ipv6 = await ec2.send(
      new AssignIpv6AddressesCommand({ NetworkInterfaceId: eniId, Ipv6PrefixCount: 1 }),
    );
    expect(ipv6.AssignedIpv6Prefixes).toHaveLength(1);
    await ec2.send(
      new ModifyNetworkInterfaceAttributeCommand({
        NetworkInterfaceId: eniId,
        Attachment: { AttachmentId: attachmentId, DeleteOnTermination: true },
      }),
    );
    await ec2.send(new DetachNetworkInterfaceCommand({ AttachmentId: attachmentId }));
    await ec2.send(new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: eniId }));
    expect(emulator.state.networkInterfaces().map((eni) => eni.networkInterfaceId)).not.toContain(eniId);
  });

  it.each<{ case: string; tags: Record<string, string> | undefined }>([
    { case: 'an untagged eth0', tags: undefined },
    {
      case: 'an ENI of VPC CNI (cluster tag, not our owner tag)',
      tags: { [ENI_TAG_KEYS.clusterName]: CLUSTER },
    },
    {
      case: 'an ENI of cilium-operator',
      tags: { 'io.cilium/cilium-managed': 'true', 'io.cilium/cluster-name': CLUSTER },
    },
  ])('denies every mutation of $case and leaves it as it was', async ({ tags }) => {
    await start();
    const ec2 = clientAs(ALLOCATE_KEY);
    const target =
      tags === undefined
        ? (() => {
            const instance = launch();
            return {
              instance,
              eniId: emulator.state.instanceNetworkInterfaces(instance.instanceId)[0]
                ?.networkInterfaceId as string,
            };
          })()
        : attachedForeignEni(tags);
    const before = emulator.state.networkInterface(target.eniId);
    const attachmentId = before?.attachment?.attachmentId as string;
    const calls = [
      new AssignPrivateIpAddressesCommand({
        NetworkInterfaceId: target.eniId,
        SecondaryPrivateIpAddressCount: 1,
      }),
      new UnassignPrivateIpAddressesCommand({
        NetworkInterfaceId: target.eniId,
        PrivateIpAddresses: ['10.0.0.1'],
      }),
      new AssignIpv6AddressesCommand({ NetworkInterfaceId: target.eniId, Ipv6PrefixCount: 1 }),
      new ModifyNetworkInterfaceAttributeCommand({
        NetworkInterfaceId: target.eniId,
        Attachment: { AttachmentId: attachmentId, DeleteOnTermination: false },
      }),
      new DetachNetworkInterfaceCommand({ AttachmentId: attachmentId }),
      new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: target.eniId }),
    ];
    for (const call of calls) {
      // biome-ignore lint/suspicious/noExplicitAny: one loop over several command types
      await expectEc2Error(ec2.send(call as any), UNAUTHORIZED, /network-interface\/eni-/);
    }
    expect(emulator.state.networkInterface(target.eniId)).toEqual(before);
  });
});

describe('AttachToClusterInstances: attach, detach and modify only on instances tagged for the cluster', () => {
  it('denies attaching our ENI to an instance outside the cluster', async () => {
    await start();
    const ec2 = clientAs(ALLOCATE_KEY);
    const stranger = launch({ Name: 'not-in-the-cluster' });
    const created = await ec2.send(
      new CreateNetworkInterfaceCommand(createInput(ourTags(stranger.instanceId))),
    );
    const eniId = created.NetworkInterface?.NetworkInterfaceId as string;
    await expectEc2Error(
      ec2.send(
        new AttachNetworkInterfaceCommand({
          NetworkInterfaceId: eniId,
          InstanceId: stranger.instanceId,
          DeviceIndex: 1,
        }),
      ),
      UNAUTHORIZED,
      new RegExp(`instance/${stranger.instanceId}`),
    );
    expect(emulator.state.networkInterface(eniId)?.attachment).toBeUndefined();
  });
});

describe('ARNs name the Region and the account', () => {
  it('denies every mutation in another Region than the stack’s (ARN matching)', async () => {
    emulator = await startEc2Emulator({ region: 'eu-west-1', identities: {} });
    cluster = emulator.state.seedCluster({ clusterName: CLUSTER });
    const identities = await stackFunctionIdentities({
      clusterName: CLUSTER,
      vpcId: cluster.vpc.vpcId,
      region: 'us-east-1',
    });
    emulator.setIdentity(ALLOCATE_KEY, identities.Allocate);
    const ec2 = clientAs(ALLOCATE_KEY);
    await ec2.send(new DescribeInstancesCommand({}));
    await expectEc2Error(ec2.send(new CreateNetworkInterfaceCommand(createInput(ourTags()))), UNAUTHORIZED);
  });

  it('allows a create in a shared (RAM) VPC only with eni-ipam:vpcOwnerAccountId naming its owner', async () => {
    await start({ vpcOwnerAccountId: OWNER_ACCOUNT });
    await expectEc2Error(
      clientAs(ALLOCATE_KEY).send(new CreateNetworkInterfaceCommand(createInput(ourTags()))),
      UNAUTHORIZED,
    );
    await emulator.close();
    await start({ vpcOwnerAccountId: OWNER_ACCOUNT }, { 'eni-ipam:vpcOwnerAccountId': OWNER_ACCOUNT });
    await clientAs(ALLOCATE_KEY).send(new CreateNetworkInterfaceCommand(createInput(ourTags())));
  });
});

describe('identities', () => {
  it('answers AuthFailure to an access key it does not know', async () => {
    await start();
    await expectEc2Error(
      clientAs('AKIAUNKNOWN000000000').send(new DescribeInstancesCommand({})),
      'AuthFailure',
    );
  });

  it('answers UnauthorizedOperation before DryRun, and DryRunOperation when allowed', async () => {
    await start();
    await expectEc2Error(
      clientAs(SYNC_KEY).send(new DescribeInstancesCommand({ DryRun: true })),
      UNAUTHORIZED,
    );
    await expectEc2Error(
      clientAs(ALLOCATE_KEY).send(new DescribeInstancesCommand({ DryRun: true })),
      'DryRunOperation',
    );
  });
});
