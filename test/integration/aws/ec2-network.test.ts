import { afterEach, describe, expect, it } from 'vitest';
import { createEc2NetworkAdapter } from '../../../functions/aws/ec2-network.ts';
import { Ec2Failure, type Ec2FailureKind, isEc2Failure } from '../../../functions/core/ec2-failure.ts';
import { ENI_TAG_KEYS, ownershipTags, tagsForNewEni } from '../../../functions/core/eni-ownership.ts';
import { ConfigurationError } from '../../../functions/core/errors.ts';
import type { CreateEniRequest } from '../../../functions/core/ports.ts';
import { type Ec2Fixture, startEc2Fixture } from './ec2-fixture.ts';

let fixture: Ec2Fixture | undefined;

/** For `toSatisfy`: the error is an `Ec2Failure` of `kind`. */
const failureOf = (kind: Ec2FailureKind) => (error: unknown) => isEc2Failure(error, kind);

async function start(options?: Parameters<typeof startEc2Fixture>[0]): Promise<Ec2Fixture> {
  fixture = await startEc2Fixture(options);
  return fixture;
}

afterEach(async () => {
  if (fixture) expect(fixture.emulator.unexpectedErrors).toEqual([]);
  await fixture?.close();
  fixture = undefined;
});

function podEniRequest(
  f: Ec2Fixture,
  instanceId: string,
  overrides: Partial<CreateEniRequest> = {},
): CreateEniRequest {
  return {
    instanceId,
    subnetId: f.seed.subnets.podsA.subnetId,
    securityGroupIds: [f.seed.securityGroups.pods.groupId],
    description: `Cilium-CNI (${instanceId})`,
    ipCount: 3,
    tags: {},
    clientToken: `${instanceId}-eni-1`,
    ...overrides,
  };
}

/** Create, attach at `deviceIndex`, set delete-on-termination: the usual three calls. */
async function attachedPodEni(
  f: Ec2Fixture,
  instanceId: string,
  deviceIndex: number,
  request?: Partial<CreateEniRequest>,
) {
  const eni = await f.adapter.createEni(
    podEniRequest(f, instanceId, { clientToken: `${instanceId}-${deviceIndex}`, ...request }),
  );
  const attachmentId = await f.adapter.attachEni(eni.id, instanceId, deviceIndex);
  await f.adapter.setDeleteOnTermination(eni.id, attachmentId, true);
  return { eni, attachmentId };
}

describe('createEc2NetworkAdapter configuration', () => {
  it.each([
    { case: 'empty cluster name', options: { clusterName: '' } },
    { case: 'extra tag overriding ours', options: { extraTags: { [ENI_TAG_KEYS.owner]: 'me' } } },
    { case: 'page size above EC2 maximum', options: { describePageSize: 5000 } },
  ])('rejects $case', async ({ options }) => {
    const f = await start();
    expect(() => createEc2NetworkAdapter({ client: f.client, clusterName: 'c', ...options })).toThrow(
      ConfigurationError,
    );
  });
});

describe('describes', () => {
  it('describeInstance maps DescribeInstances, and answers undefined for an unknown instance', async () => {
    const f = await start();
    const instanceId = f.emulator.state.launchInstance({
      instanceType: 'm5.large',
      subnetId: f.seed.subnets.nodesA.subnetId,
      tags: { 'kubernetes.io/cluster/unit-cluster': 'owned' },
    }).instanceId;
    const record = f.emulator.state.instance(instanceId)!;

    expect(await f.adapter.describeInstance(instanceId)).toEqual({
      id: instanceId,
      instanceType: 'm5.large',
      state: 'running',
      availabilityZone: 'us-east-1a',
      vpcId: f.seed.vpc.vpcId,
      subnetId: f.seed.subnets.nodesA.subnetId,
      privateDnsName: record.privateDnsName,
      privateIp: record.privateIpAddress,
      tags: { 'kubernetes.io/cluster/unit-cluster': 'owned' },
    });
    expect(await f.adapter.describeInstance('i-0000000000000ffff')).toBeUndefined();
  });

  it('describeInstances describes several instances in one call, leaving out unknown ones', async () => {
    const f = await start();
    const launch = () =>
      f.emulator.state.launchInstance({
        instanceType: 'm5.large',
        subnetId: f.seed.subnets.nodesA.subnetId,
        tags: { 'kubernetes.io/cluster/unit-cluster': 'owned' },
      }).instanceId;
    const [first, second, other] = [launch(), launch(), launch()];
    const before = f.emulator.calls.count('DescribeInstances');
    const views = await f.adapter.describeInstances([first, 'i-0000000000000ffff', second]);
    expect(views.map((view) => view.id).sort()).toEqual([first, second].sort());
    expect(views.map((view) => view.id)).not.toContain(other);
    expect(f.emulator.calls.count('DescribeInstances') - before).toBe(1);
    expect(views.find((view) => view.id === first)).toEqual(await f.adapter.describeInstance(first));
  });

  it('describeVpc returns the primary CIDR and the associated secondary CIDRs only', async () => {
    const f = await start();
    expect(await f.adapter.describeVpc(f.seed.vpc.vpcId)).toEqual({
      id: f.seed.vpc.vpcId,
      primaryCidr: '10.0.0.0/16',
      secondaryCidrs: ['100.64.0.0/16'],
    });
    await expect(f.adapter.describeVpc('vpc-0000000000000ffff')).rejects.toSatisfy(failureOf('not-found'));
  });

  it('describeVpc remembers a VPC for its cache lifetime, then asks again (seeing a new CIDR)', async () => {
    let nowMs = 0;
    const f = await start({ adapter: { vpcCacheTtlMs: 60_000, nowMs: () => nowMs } });
    const vpcId = f.seed.vpc.vpcId;
    await f.adapter.describeVpc(vpcId);
    f.emulator.state.addVpcCidr(vpcId, '100.65.0.0/16');
    nowMs = 59_999;
    expect((await f.adapter.describeVpc(vpcId)).secondaryCidrs).toEqual(['100.64.0.0/16']);
    expect(f.emulator.calls.count('DescribeVpcs')).toBe(1);
    nowMs = 60_000;
    expect((await f.adapter.describeVpc(vpcId)).secondaryCidrs).toEqual(['100.64.0.0/16', '100.65.0.0/16']);
    expect(f.emulator.calls.count('DescribeVpcs')).toBe(2);
  });

  it('describeSubnets remembers a listing, keeps its free counts current, and drops it when EC2 refuses for room', async () => {
    let nowMs = 0;
    const f = await start({
      adapter: { vpcCacheTtlMs: 60_000, subnetCacheTtlMs: 60_000, nowMs: () => nowMs },
    });
    const { vpc, availabilityZones, subnets } = f.seed;
    const freeIn = async (subnetId: string) =>
      (await f.adapter.describeSubnets(vpc.vpcId, availabilityZones[0])).find((s) => s.id === subnetId)
        ?.availableAddresses;
    const podsFree = await freeIn(subnets.podsA.subnetId);
    const instanceId = f.emulator.state.launchInstance({
      instanceType: 'm5.large',
      subnetId: subnets.nodesA.subnetId,
      tags: { 'kubernetes.io/cluster/unit-cluster': 'owned' },
    }).instanceId;
    const { eni } = await attachedPodEni(f, instanceId, 1, { ipCount: 3 });
    expect(await freeIn(subnets.podsA.subnetId)).toBe((podsFree ?? 0) - 4);
    await f.adapter.assignIps(eni.id, { ipCount: 2 });
    expect(await freeIn(subnets.podsA.subnetId)).toBe((podsFree ?? 0) - 6);
    expect(f.emulator.calls.count('DescribeSubnets')).toBe(1);
    expect(f.emulator.calls.count('DescribeRouteTables')).toBe(1);

    await expect(
      f.adapter.createEni(
        podEniRequest(f, instanceId, {
          subnetId: subnets.tinyA.subnetId,
          ipCount: 14,
          clientToken: 'too-big',
        }),
      ),
    ).rejects.toThrow(/InsufficientFreeAddressesInSubnet|free/);
    await f.adapter.describeSubnets(vpc.vpcId, availabilityZones[0]);
    expect(f.emulator.calls.count('DescribeSubnets')).toBe(2);
    nowMs = 60_000;
    await f.adapter.describeSubnets(vpc.vpcId, availabilityZones[0]);
    expect(f.emulator.calls.count('DescribeSubnets')).toBe(3);
    expect(f.emulator.calls.count('DescribeRouteTables')).toBe(2);
  });

  it('describeSubnets lists the VPC subnets of one AZ with explicit or main route tables', async () => {
    const f = await start();
    const { subnets, routeTables, vpc } = f.seed;

    const found = await f.adapter.describeSubnets(vpc.vpcId, 'us-east-1a');

    expect(found.map((subnet) => [subnet.id, subnet.cidr, subnet.routeTableId])).toEqual([
      [subnets.nodesA.subnetId, '10.0.1.0/24', routeTables.main.routeTableId],
      [subnets.tinyA.subnetId, '10.0.3.0/28', routeTables.main.routeTableId],
      [subnets.podsA.subnetId, '100.64.0.0/24', routeTables.pods.routeTableId],
    ]);
    const pods = found.find((subnet) => subnet.id === subnets.podsA.subnetId);
    expect(pods).toMatchObject({
      vpcId: vpc.vpcId,
      availabilityZone: 'us-east-1a',
      availableAddresses: f.emulator.state.availableIpAddressCount(subnets.podsA.subnetId),
      tags: { 'cilium.io/pod-subnet': 'true' },
    });
  });

  it('describeSecurityGroups lists the groups of the VPC with tags', async () => {
    const f = await start();
    const other = f.emulator.state.addVpc({ cidrBlock: '172.16.0.0/16' });
    f.emulator.state.addSecurityGroup({ vpcId: other.vpcId, groupName: 'elsewhere' });

    const groups = await f.adapter.describeSecurityGroups(f.seed.vpc.vpcId);

    expect(groups.map((group) => group.id).sort()).toEqual(
      [
        f.seed.vpc.defaultSecurityGroupId,
        f.seed.securityGroups.nodes.groupId,
        f.seed.securityGroups.pods.groupId,
      ].sort(),
    );
    expect(groups.find((group) => group.id === f.seed.securityGroups.pods.groupId)).toEqual({
      id: f.seed.securityGroups.pods.groupId,
      vpcId: f.seed.vpc.vpcId,
      tags: { 'kubernetes.io/cluster/unit-cluster': 'owned', role: 'pods' },
    });
  });

  it('describeInstanceLimits maps NetworkInfo, hypervisor and bare metal, and undefined for unknown types', async () => {
    const f = await start();
    expect(await f.adapter.describeInstanceLimits('m5.large')).toEqual({
      maxInterfaces: 3,
      ipv4PerInterface: 10,
      ipv6PerInterface: 10,
      hypervisor: 'nitro',
      bareMetal: false,
    });
    expect(await f.adapter.describeInstanceLimits('c5.metal')).toEqual({
      maxInterfaces: 15,
      ipv4PerInterface: 50,
      ipv6PerInterface: 50,
      hypervisor: '',
      bareMetal: true,
    });
    // Ipv6Supported false: no IPv6 at all on this type.
    expect(await f.adapter.describeInstanceLimits('m3.medium')).toMatchObject({ ipv6PerInterface: 0 });
    expect(await f.adapter.describeInstanceLimits('zz9.plural')).toBeUndefined();
  });

  it("a cold container's concurrent subnet reads ask EC2 once: the VPC listing serves the attached ENIs' CIDRs too", async () => {
    const f = await start();
    const instanceId = f.launch('m5.large');
    f.emulator.calls.reset();

    const [listingA, listingB, enis] = await Promise.all([
      f.adapter.describeSubnets(f.seed.vpc.vpcId, f.seed.availabilityZones[0]),
      f.adapter.describeSubnets(f.seed.vpc.vpcId, f.seed.availabilityZones[1]),
      f.adapter.describeAttachedEnis(instanceId, f.seed.vpc.vpcId),
    ]);

    expect(f.emulator.calls.byAction()).toEqual({
      DescribeSubnets: 1,
      DescribeRouteTables: 1,
      DescribeNetworkInterfaces: 1,
    });
    expect(listingA.length).toBeGreaterThan(0);
    expect(listingB.length).toBeGreaterThan(0);
    const nodesA = f.seed.subnets.nodesA;
    expect(enis[0]?.subnetCidr).toBe(nodesA.cidrBlock);
  });

  it('describeAttachedEnis maps every attached ENI, with subnet CIDRs from ONE DescribeSubnets', async () => {
    const f = await start();
    const instanceId = f.launch('m5.large');
    const ipEni = await attachedPodEni(f, instanceId, 1);
    const assigned = await f.adapter.assignIps(ipEni.eni.id, { ipCount: 2 });
    const prefixEni = await attachedPodEni(f, instanceId, 2, {
      ipCount: 0,
      prefixCount: 1,
      subnetId: f.seed.subnets.nodesA.subnetId,
    });
    const vpc = await f.adapter.describeVpc(f.seed.vpc.vpcId);
    f.emulator.calls.reset();

    const enis = await f.adapter.describeAttachedEnis(instanceId, vpc.id);

    expect(f.emulator.calls.byAction()).toEqual({ DescribeNetworkInterfaces: 1, DescribeSubnets: 1 });
    expect(enis.map((eni) => eni.deviceIndex)).toEqual([0, 1, 2]);
    const [primary, withIps, withPrefix] = enis;
    const primaryRecord = f.emulator.state
      .networkInterfaces({ instanceId })
      .find((eni) => eni.attachment?.deviceIndex === 0)!;
    expect(primary).toEqual({
      id: primaryRecord.networkInterfaceId,
      mac: primaryRecord.macAddress,
      deviceIndex: 0,
      attachmentId: primaryRecord.attachment!.attachmentId,
      deleteOnTermination: true,
      primaryIp: primaryRecord.privateIpAddress,
      secondaryIps: [],
      prefixes: [],
      subnetId: f.seed.subnets.nodesA.subnetId,
      subnetCidr: '10.0.1.0/24',
      securityGroupIds: [f.seed.vpc.defaultSecurityGroupId],
      tags: {},
      description: '',
      // EC2 created eth0 untagged: not ours, never to be mutated.
      foreign: true,
    });
    expect(withIps).toEqual({
      id: ipEni.eni.id,
      mac: ipEni.eni.mac,
      deviceIndex: 1,
      attachmentId: ipEni.attachmentId,
      deleteOnTermination: true,
      primaryIp: ipEni.eni.primaryIp,
      secondaryIps: [...ipEni.eni.secondaryIps, ...assigned.ips],
      prefixes: [],
      subnetId: f.seed.subnets.podsA.subnetId,
      subnetCidr: '100.64.0.0/24',
      securityGroupIds: [f.seed.securityGroups.pods.groupId],
      tags: ownershipTags(f.clusterName, instanceId),
      description: `Cilium-CNI (${instanceId})`,
    });
    expect(withIps?.secondaryIps).toHaveLength(5);
    expect(withPrefix).toMatchObject({
      id: prefixEni.eni.id,
      deviceIndex: 2,
      secondaryIps: [],
      prefixes: prefixEni.eni.prefixes,
      subnetCidr: '10.0.1.0/24',
    });
    expect(withPrefix?.prefixes).toHaveLength(1);
    expect(withPrefix?.prefixes[0]).toMatch(/^10\.0\.1\.\d+\/28$/);
  });

  it('describeAttachedEnis follows NextToken across pages', async () => {
    const f = await start({ adapter: { describePageSize: 5 } });
    const instanceId = f.launch('m5.4xlarge');
    for (let deviceIndex = 1; deviceIndex <= 6; deviceIndex++)
      await attachedPodEni(f, instanceId, deviceIndex, { ipCount: 1 });
    const vpc = await f.adapter.describeVpc(f.seed.vpc.vpcId);
    f.emulator.calls.reset();

    const enis = await f.adapter.describeAttachedEnis(instanceId, vpc.id);

    expect(enis.map((eni) => eni.deviceIndex)).toEqual([0, 1, 2, 3, 4, 5, 6]);
    expect(f.emulator.calls.count('DescribeNetworkInterfaces')).toBe(2);
  });

  it('findDetachedEnisCreatedFor finds only our available ENIs for that instance, across pages', async () => {
    const f = await start({ adapter: { describePageSize: 5 } });
    const instanceId = f.launch();
    const otherInstanceId = f.launch();
    const detached: string[] = [];
    for (let slot = 0; slot < 6; slot++) {
      detached.push(
        (await f.adapter.createEni(podEniRequest(f, instanceId, { clientToken: `slot-${slot}` }))).id,
      );
    }
    await attachedPodEni(f, instanceId, 1, { clientToken: 'attached-one' });
    await f.adapter.createEni(podEniRequest(f, otherInstanceId, { clientToken: 'other-instance' }));
    // Another cluster's stack, with its own role, tagged an ENI for the same instance id.
    f.emulator.state.createNetworkInterface({
      subnetId: f.seed.subnets.podsA.subnetId,
      tags: tagsForNewEni('another-cluster', instanceId),
    });
    f.emulator.calls.reset();

    const found = await f.adapter.findDetachedEnisCreatedFor(instanceId);

    expect(found.map((eni) => eni.id)).toEqual(detached);
    expect(found.every((eni) => eni.status === 'available')).toBe(true);
    expect(f.emulator.calls.count('DescribeNetworkInterfaces')).toBe(2);
  });
});

describe('ENI lifecycle', () => {
  it('createEni puts IPs, groups, description and all tags on the ENI in one call', async () => {
    const f = await start({ adapter: { extraTags: { team: 'net' } } });
    const instanceId = f.launch();

    const eni = await f.adapter.createEni(podEniRequest(f, instanceId, { tags: { slot: '1' } }));

    expect(f.emulator.calls.byAction()).toEqual({ CreateNetworkInterface: 1 });
    expect(eni).toMatchObject({
      subnetId: f.seed.subnets.podsA.subnetId,
      securityGroupIds: [f.seed.securityGroups.pods.groupId],
      description: `Cilium-CNI (${instanceId})`,
      status: 'available',
      prefixes: [],
      tags: { ...ownershipTags(f.clusterName, instanceId), team: 'net', slot: '1' },
    });
    expect(eni.secondaryIps).toHaveLength(3);
    expect(f.emulator.state.networkInterface(eni.id)?.tags).toEqual(eni.tags);
  });

  it('createEni replayed with the same ClientToken returns the same ENI; other parameters are a mismatch', async () => {
    const f = await start();
    const instanceId = f.launch();
    const request = podEniRequest(f, instanceId);

    const first = await f.adapter.createEni(request);
    const replay = await f.adapter.createEni(request);

    expect(replay.id).toBe(first.id);
    expect(replay.secondaryIps).toEqual(first.secondaryIps);
    expect(
      f.emulator.state.networkInterfaceHistory().filter((eni) => eni.clientToken === request.clientToken),
    ).toHaveLength(1);
    await expect(f.adapter.createEni({ ...request, ipCount: 4 })).rejects.toSatisfy(
      failureOf('idempotency-mismatch'),
    );
  });

  it('a create whose answer was lost is retried by the SDK and the token replay yields ONE ENI', async () => {
    const f = await start();
    const instanceId = f.launch();
    f.emulator.faults.inject({ action: 'CreateNetworkInterface', kind: 'lost-response' });

    const eni = await f.adapter.createEni(podEniRequest(f, instanceId));

    expect(f.emulator.calls.count('CreateNetworkInterface')).toBe(2);
    expect(
      f.emulator.state
        .networkInterfaces({ subnetId: f.seed.subnets.podsA.subnetId })
        .map((record) => record.networkInterfaceId),
    ).toEqual([eni.id]);
  });

  it('createEni classifies a full subnet and missing /28 capacity', async () => {
    const f = await start();
    const instanceId = f.launch();
    await expect(
      f.adapter.createEni(
        podEniRequest(f, instanceId, {
          subnetId: f.seed.subnets.tinyA.subnetId,
          ipCount: 20,
          securityGroupIds: [],
        }),
      ),
    ).rejects.toSatisfy(failureOf('subnet-full'));
    f.emulator.state.setSubnetFragmented(f.seed.subnets.podsA.subnetId, true);
    await expect(
      f.adapter.createEni(
        podEniRequest(f, instanceId, { ipCount: 0, prefixCount: 1, clientToken: 'prefix' }),
      ),
    ).rejects.toSatisfy(failureOf('prefix-capacity'));
  });

  it('attach, set delete-on-termination, assign and unassign IPs and prefixes', async () => {
    const f = await start();
    const instanceId = f.launch('m5.xlarge');
    const eni = await f.adapter.createEni(podEniRequest(f, instanceId, { ipCount: 1 }));

    const attachmentId = await f.adapter.attachEni(eni.id, instanceId, 1);
    await f.adapter.setDeleteOnTermination(eni.id, attachmentId, true);
    const ips = await f.adapter.assignIps(eni.id, { ipCount: 3 });
    const prefixes = await f.adapter.assignIps(eni.id, { prefixCount: 2 });

    let record = f.emulator.state.networkInterface(eni.id)!;
    expect(record.attachment).toMatchObject({
      attachmentId,
      instanceId,
      deviceIndex: 1,
      networkCardIndex: 0,
      deleteOnTermination: true,
    });
    expect(ips.prefixes).toEqual([]);
    expect(ips.ips).toHaveLength(3);
    expect(prefixes.ips).toEqual([]);
    expect(prefixes.prefixes).toHaveLength(2);
    expect(record.secondaryPrivateIpAddresses).toEqual([...eni.secondaryIps, ...ips.ips]);
    expect(record.ipv4Prefixes).toEqual(prefixes.prefixes);

    await f.adapter.unassignIps(eni.id, {
      ips: ips.ips.slice(0, 2),
      prefixes: prefixes.prefixes.slice(0, 1),
    });

    record = f.emulator.state.networkInterface(eni.id)!;
    expect(record.secondaryPrivateIpAddresses).toEqual([...eni.secondaryIps, ips.ips[2]]);
    expect(record.ipv4Prefixes).toEqual(prefixes.prefixes.slice(1));
  });

  it('assignIps with nothing to assign makes no call', async () => {
    const f = await start();
    const instanceId = f.launch();
    const eni = await f.adapter.createEni(podEniRequest(f, instanceId));
    f.emulator.calls.reset();
    expect(await f.adapter.assignIps(eni.id, { ipCount: 0 })).toEqual({ ips: [], prefixes: [] });
    expect(f.emulator.calls.count()).toBe(0);
  });

  it('unassignIps is idempotent: a replay, or a partly released list, releases only what is still held', async () => {
    const f = await start();
    const instanceId = f.launch();
    const { eni } = await attachedPodEni(f, instanceId, 1);
    const [first, second, third] = eni.secondaryIps;

    await f.adapter.unassignIps(eni.id, { ips: [first!], prefixes: [] });
    await f.adapter.unassignIps(eni.id, { ips: [first!], prefixes: [] });
    await f.adapter.unassignIps(eni.id, { ips: [first!, second!], prefixes: [] });

    expect(f.emulator.state.networkInterface(eni.id)?.secondaryPrivateIpAddresses).toEqual([third]);
  });

  it('a replayed unassign completes while Describe still lists what was unassigned (eventual consistency)', async () => {
    const f = await start();
    const instanceId = f.launch();
    const { eni } = await attachedPodEni(f, instanceId, 1);
    const [first, second, third] = eni.secondaryIps;
    f.emulator.setEventualConsistencyMs(5_000);

    await f.adapter.unassignIps(eni.id, { ips: [first!], prefixes: [] });
    // Describe lags: the address is gone from the ENI but still listed.
    const listed = (await f.adapter.describeAttachedEnis(instanceId, f.seed.vpc.vpcId)).find(
      (candidate) => candidate.id === eni.id,
    );
    expect(listed?.secondaryIps).toContain(first);
    await f.adapter.unassignIps(eni.id, { ips: [first!, second!], prefixes: [] });

    expect(f.emulator.state.networkInterface(eni.id)?.secondaryPrivateIpAddresses).toEqual([third]);
    f.clock.advance(5_000);
    const settled = (await f.adapter.describeAttachedEnis(instanceId, f.seed.vpc.vpcId)).find(
      (candidate) => candidate.id === eni.id,
    );
    expect(settled?.secondaryIps).toEqual([third]);
  });

  it('detach and delete; both count an ENI or attachment that is already gone as done', async () => {
    const f = await start();
    const instanceId = f.launch();
    const { eni, attachmentId } = await attachedPodEni(f, instanceId, 1);

    await expect(f.adapter.deleteEni(eni.id)).rejects.toSatisfy(failureOf('in-use'));
    await f.adapter.detachEni(attachmentId);
    await f.adapter.detachEni(attachmentId);
    await f.adapter.deleteEni(eni.id);
    await f.adapter.deleteEni(eni.id);
    await f.adapter.deleteEni('eni-0000000000000ffff');

    expect(f.emulator.state.networkInterface(eni.id)?.deletedAtMs).toBeDefined();
    expect(f.emulator.state.networkInterfaces({ subnetId: f.seed.subnets.podsA.subnetId })).toEqual([]);
  });

  it('attach at a taken device index is classified as a device-index conflict', async () => {
    const f = await start();
    const instanceId = f.launch();
    const eni = await f.adapter.createEni(podEniRequest(f, instanceId));

    const failure = await f.adapter.attachEni(eni.id, instanceId, 0).catch((error: unknown) => error);

    expect(failure).toBeInstanceOf(Ec2Failure);
    expect(isEc2Failure(failure, 'device-index-taken')).toBe(true);
    expect(f.emulator.state.networkInterface(eni.id)?.attachment).toBeUndefined();
  });

  it('attach past the instance type ENI limit is classified as an attachment limit', async () => {
    const f = await start();
    const instanceId = f.launch('t3.micro');
    await attachedPodEni(f, instanceId, 1, { ipCount: 1 });
    const third = await f.adapter.createEni(
      podEniRequest(f, instanceId, { ipCount: 1, clientToken: 'third' }),
    );

    await expect(f.adapter.attachEni(third.id, instanceId, 2)).rejects.toSatisfy(
      failureOf('attachment-limit'),
    );
  });
});

describe('retries', () => {
  it('throttled calls are retried with backoff until EC2 lets them through (token buckets on)', async () => {
    const f = await start({ retry: { maxAttempts: 20, baseDelayMs: 5, maxDelayMs: 40 } });
    const instanceId = f.launch();
    f.emulator.setClock(Date.now);
    f.emulator.setThrottling({ buckets: { CreateNetworkInterface: { burst: 2, refillPerSecond: 20 } } });

    const enis = await Promise.all(
      [1, 2, 3, 4, 5, 6].map((slot) =>
        f.adapter.createEni(podEniRequest(f, instanceId, { ipCount: 1, clientToken: `burst-${slot}` })),
      ),
    );

    expect(new Set(enis.map((eni) => eni.id)).size).toBe(6);
    expect(f.emulator.calls.throttled('CreateNetworkInterface')).toBeGreaterThan(0);
    expect(f.emulator.state.networkInterfaces({ subnetId: f.seed.subnets.podsA.subnetId })).toHaveLength(6);
  });

  it('throttling that outlasts maxAttempts surfaces as a classified Ec2Failure', async () => {
    const f = await start({ retry: { maxAttempts: 3 } });
    f.emulator.faults.inject({ action: 'DescribeVpcs', kind: 'throttle', times: Number.POSITIVE_INFINITY });

    const failure = await f.adapter.describeVpc(f.seed.vpc.vpcId).catch((error: unknown) => error);

    expect(isEc2Failure(failure, 'throttled')).toBe(true);
    expect(f.emulator.calls.count('DescribeVpcs')).toBe(3);
  });

  it('5xx answers are retried until success', async () => {
    const f = await start();
    const instanceId = f.launch();
    const eni = await f.adapter.createEni(podEniRequest(f, instanceId));
    f.emulator.faults.inject({ action: 'AttachNetworkInterface', kind: 'server-error', times: 2 });

    const attachmentId = await f.adapter.attachEni(eni.id, instanceId, 1);

    expect(f.emulator.calls.countWithOutcome('server-error', 'AttachNetworkInterface')).toBe(2);
    expect(f.emulator.state.networkInterface(eni.id)?.attachment?.attachmentId).toBe(attachmentId);
  });

  it('right after create, attach may answer NotFound (eventual consistency)', async () => {
    const f = await start();
    const instanceId = f.launch();
    f.emulator.setEventualConsistencyMs(1_000);
    const eni = await f.adapter.createEni(podEniRequest(f, instanceId));

    await expect(f.adapter.attachEni(eni.id, instanceId, 1)).rejects.toSatisfy(failureOf('not-found'));
    expect(f.emulator.state.networkInterface(eni.id)?.attachment).toBeUndefined();
  });

  it('justCreated / justAttached carry attach and delete-on-termination through NotFound after our create', async () => {
    const f = await start({ adapter: { notFoundRetry: { attempts: 6, delayMs: 100 } } });
    const instanceId = f.launch();
    f.emulator.setEventualConsistencyMs(250);

    const eni = await f.adapter.createEni(podEniRequest(f, instanceId));
    const attachmentId = await f.adapter.attachEni(eni.id, instanceId, 1, { justCreated: true });
    await f.adapter.setDeleteOnTermination(eni.id, attachmentId, true, { justAttached: true });

    expect(f.sleeps).toEqual([100, 200]);
    expect(
      f.emulator.calls.log
        .filter((call) => call.action === 'AttachNetworkInterface')
        .map((call) => call.errorCode),
    ).toEqual(['InvalidNetworkInterfaceID.NotFound', 'InvalidNetworkInterfaceID.NotFound', undefined]);
    expect(f.emulator.state.networkInterface(eni.id)?.attachment).toMatchObject({
      attachmentId,
      deleteOnTermination: true,
    });
  });
});

describe('IPv6', () => {
  it('describeSubnets gives a dual-stack subnet its /64 and an IPv4-only one none', async () => {
    const f = await start({ dualStack: true });
    const subnets = await f.adapter.describeSubnets(f.seed.vpc.vpcId, 'us-east-1a');
    const byId = Object.fromEntries(subnets.map((subnet) => [subnet.id, subnet.ipv6Cidr]));
    expect(byId).toEqual({
      [f.seed.subnets.nodesA.subnetId]: '2600:1f18:4a01:ab01::/64',
      [f.seed.subnets.podsA.subnetId]: '2600:1f18:4a01:ab03::/64',
      [f.seed.subnets.tinyA.subnetId]: undefined,
    });
  });

  it('a /80 on create and by assignIpv6Prefixes reaches the ENI state in canonical text, Describe and the cluster listing alike', async () => {
    const f = await start({ dualStack: true });
    const instanceId = f.launch('m5.large');
    const created = await attachedPodEni(f, instanceId, 1, { ipCount: 2, ipv6PrefixCount: 1 });
    expect(created.eni.ipv6Prefixes).toEqual(['2600:1f18:4a01:ab03:1::/80']);
    const plain = await attachedPodEni(f, instanceId, 2, { ipCount: 1 });
    expect(plain.eni).not.toHaveProperty('ipv6Prefixes');
    expect(await f.adapter.assignIpv6Prefixes(plain.eni.id, 1)).toEqual(['2600:1f18:4a01:ab03:2::/80']);

    const enis = await f.adapter.describeAttachedEnis(instanceId, f.seed.vpc.vpcId);
    expect(enis.map((eni) => [eni.deviceIndex, eni.ipv6Prefixes])).toEqual([
      [0, undefined],
      [1, ['2600:1f18:4a01:ab03:1::/80']],
      [2, ['2600:1f18:4a01:ab03:2::/80']],
    ]);
    expect(enis[0]).not.toHaveProperty('ipv6Prefixes');
    const [listed] = await f.adapter.listClusterInstances(
      `kubernetes.io/cluster/${f.clusterName}`,
      ['owned'],
      ['running'],
    );
    expect(listed?.attachedEnis.map((eni) => eni.ipv6Prefixes)).toEqual([
      undefined,
      ['2600:1f18:4a01:ab03:1::/80'],
      ['2600:1f18:4a01:ab03:2::/80'],
    ]);
  });

  it('classifies IPv6 refusals: no IPv6 block in the subnet, on assign and on create; the limit', async () => {
    const f = await start({ dualStack: true });
    const instanceId = f.launch('m5.large');
    const tiny = { subnetId: f.seed.subnets.tinyA.subnetId, ipCount: 1 };
    const { eni } = await attachedPodEni(f, instanceId, 1, tiny);
    await expect(f.adapter.assignIpv6Prefixes(eni.id, 1)).rejects.toSatisfy(failureOf('ipv6-refused'));
    await expect(
      f.adapter.createEni(podEniRequest(f, instanceId, { ...tiny, ipv6PrefixCount: 1, clientToken: 'v6' })),
    ).rejects.toSatisfy(failureOf('ipv6-refused'));
    const dualStack = await attachedPodEni(f, instanceId, 2, { ipCount: 1 });
    await f.adapter.assignIpv6Prefixes(dualStack.eni.id, 10);
    await expect(f.adapter.assignIpv6Prefixes(dualStack.eni.id, 1)).rejects.toSatisfy(
      failureOf('ipv6-refused'),
    );
    // Not an IPv6 refusal: an IPv4 subnet running out stays what it was.
    await expect(
      f.adapter.createEni(podEniRequest(f, instanceId, { ...tiny, ipCount: 40, clientToken: 'full' })),
    ).rejects.not.toSatisfy(failureOf('ipv6-refused'));
  });
});
