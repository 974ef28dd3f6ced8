import { describe, expect, it } from 'vitest';
import {
  bucketKeyFor,
  defaultBucketSpec,
  Ec2State,
  escapeXml,
  intToIp,
  mustParseCidr,
  QueryParams,
  renderDocument,
  SubnetAddressPool,
  ThrottleBuckets,
} from './index.ts';

describe('SubnetAddressPool', () => {
  it('keeps the 4 first and the last address reserved, as AWS does', () => {
    const pool = new SubnetAddressPool(mustParseCidr('10.0.3.0/28'));
    expect(pool.availableCount).toBe(11);
    expect(pool.findFreeAddresses(11)?.map(intToIp)).toEqual(
      Array.from({ length: 11 }, (_, offset) => `10.0.3.${offset + 4}`),
    );
    expect(pool.findFreeAddresses(12)).toBeUndefined();
  });

  it('hands out only aligned, wholly free /28 prefixes', () => {
    const pool = new SubnetAddressPool(mustParseCidr('10.0.0.0/26'));
    const single = pool.findFreeAddresses(1) ?? [];
    pool.take(single);
    expect(pool.findFreePrefixes(2)?.map(intToIp)).toEqual(['10.0.0.16', '10.0.0.32']);
    // 10.0.0.48/28 holds the broadcast address, so only two prefixes exist.
    expect(pool.findFreePrefixes(3)).toBeUndefined();
    pool.take([mustParseCidr('10.0.0.24/32').base]);
    expect(pool.findFreePrefixes(1)?.map(intToIp)).toEqual(['10.0.0.32']);
  });

  it('returns released addresses to the pool', () => {
    const pool = new SubnetAddressPool(mustParseCidr('10.0.0.0/24'));
    const taken = pool.findFreeAddresses(3) ?? [];
    pool.take(taken);
    expect(pool.availableCount).toBe(248);
    pool.release(taken.slice(0, 1));
    expect(pool.availableCount).toBe(249);
    expect(pool.findFreeAddresses(1)?.map(intToIp)).toEqual(['10.0.0.4']);
  });
});

describe('QueryParams', () => {
  const params = QueryParams.fromFormBody(
    [
      'Action=CreateNetworkInterface',
      'Filter.2.Name=tag%3Aowner',
      'Filter.2.Value.1=cilium',
      'Filter.1.Name=vpc-id',
      'Filter.1.Value.2=vpc-b',
      'Filter.1.Value.1=vpc-a',
      'TagSpecification.1.ResourceType=network-interface',
      'TagSpecification.1.Tag.1.Key=a',
      'TagSpecification.1.Tag.1.Value=1',
      'TagSpecification.1.Tag.2.Key=b',
      'SecurityGroupId.10=sg-10',
      'SecurityGroupId.2=sg-2',
      'Attachment.AttachmentId=eni-attach-1',
      'Attachment.DeleteOnTermination=true',
    ].join('&'),
  );

  it('reads filters, lists in index order, tag specifications and structures', () => {
    expect(params.filters()).toEqual([
      { name: 'vpc-id', values: ['vpc-a', 'vpc-b'] },
      { name: 'tag:owner', values: ['cilium'] },
    ]);
    expect(params.list('SecurityGroupId')).toEqual(['sg-2', 'sg-10']);
    expect(params.tagSpecifications()).toEqual([
      { resourceType: 'network-interface', tags: { a: '1', b: '' } },
    ]);
    const attachment = params.struct('Attachment');
    expect([attachment.get('AttachmentId'), attachment.boolean('DeleteOnTermination')]).toEqual([
      'eni-attach-1',
      true,
    ]);
  });

  it('raises MissingParameter and InvalidParameterValue as EC2 does', () => {
    expect(() => params.required('SubnetId')).toThrow(expect.objectContaining({ code: 'MissingParameter' }));
    const bad = new QueryParams([['DeviceIndex', 'one']]);
    expect(() => bad.integer('DeviceIndex')).toThrow(
      expect.objectContaining({ code: 'InvalidParameterValue' }),
    );
  });
});

describe('XML writer', () => {
  it('escapes text and writes lists as item elements', () => {
    expect(escapeXml(`a<b>&"c'`)).toBe('a&lt;b&gt;&amp;&quot;c&apos;');
    expect(renderDocument('R', { tagSet: [{ key: 'k', value: '<v>' }], empty: [], skipped: undefined })).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n<R><tagSet><item><key>k</key><value>&lt;v&gt;</value></item></tagSet><empty/></R>',
    );
  });
});

describe('throttling buckets', () => {
  it.each([
    {
      case: 'filtered DescribeNetworkInterfaces',
      action: 'DescribeNetworkInterfaces',
      params: ['Filter.1.Name'],
      burst: 100,
      refill: 20,
    },
    {
      case: 'paginated DescribeInstances',
      action: 'DescribeInstances',
      params: ['MaxResults'],
      burst: 100,
      refill: 20,
    },
    { case: 'unfiltered DescribeInstances', action: 'DescribeInstances', params: [], burst: 50, refill: 10 },
    {
      case: 'DescribeSecurityGroups by id only',
      action: 'DescribeSecurityGroups',
      params: ['GroupId.1'],
      burst: 50,
      refill: 10,
    },
    {
      case: 'DescribeSubnets (never the small bucket)',
      action: 'DescribeSubnets',
      params: [],
      burst: 100,
      refill: 20,
    },
    { case: 'AttachNetworkInterface', action: 'AttachNetworkInterface', params: [], burst: 50, refill: 5 },
    { case: 'DetachNetworkInterface', action: 'DetachNetworkInterface', params: [], burst: 50, refill: 5 },
    { case: 'CreateNetworkInterface', action: 'CreateNetworkInterface', params: [], burst: 100, refill: 5 },
    {
      case: 'ModifyNetworkInterfaceAttribute',
      action: 'ModifyNetworkInterfaceAttribute',
      params: [],
      burst: 100,
      refill: 5,
    },
    {
      case: 'AssignPrivateIpAddresses',
      action: 'AssignPrivateIpAddresses',
      params: [],
      burst: 100,
      refill: 5,
    },
    { case: 'AssignIpv6Addresses', action: 'AssignIpv6Addresses', params: [], burst: 100, refill: 5 },
    { case: 'UnassignIpv6Addresses', action: 'UnassignIpv6Addresses', params: [], burst: 50, refill: 5 },
    { case: 'CreateTags', action: 'CreateTags', params: [], burst: 100, refill: 10 },
  ])('$case: $burst burst, $refill/s', ({ action, params, burst, refill }) => {
    expect(defaultBucketSpec(bucketKeyFor(action, params))).toEqual({ burst, refillPerSecond: refill });
  });

  it('refills continuously: a token is usable as soon as it arrives', () => {
    let now = 0;
    const buckets = new ThrottleBuckets(() => now, { buckets: { X: { burst: 2, refillPerSecond: 5 } } });
    expect([buckets.tryTake('X'), buckets.tryTake('X'), buckets.tryTake('X')]).toEqual([true, true, false]);
    now += 199;
    expect(buckets.tryTake('X')).toBe(false);
    now += 1;
    expect(buckets.tryTake('X')).toBe(true);
    now += 60_000;
    expect(buckets.tokens('X')).toBe(2);
  });
});

describe('Ec2State seeding', () => {
  it('seedCluster builds two AZs, node and pod subnets and tagged security groups', () => {
    const state = new Ec2State();
    const cluster = state.seedCluster({ clusterName: 'blue' });
    expect(
      state.vpc(cluster.vpc.vpcId)?.cidrBlockAssociations.map((association) => association.cidrBlock),
    ).toEqual(['10.0.0.0/16', '100.64.0.0/16']);
    expect(cluster.availabilityZones).toEqual(['us-east-1a', 'us-east-1b']);
    expect(cluster.subnets.podsB.availabilityZone).toBe('us-east-1b');
    expect(cluster.securityGroups.nodes.tags).toEqual({
      'kubernetes.io/cluster/blue': 'owned',
      role: 'nodes',
    });
    expect(state.subnet(cluster.subnets.tinyA.subnetId)?.availableIpAddressCount).toBe(11);
  });

  it('refuses a subnet outside the VPC CIDRs', () => {
    const state = new Ec2State();
    const vpc = state.addVpc({ cidrBlock: '10.1.0.0/16' });
    expect(() =>
      state.addSubnet({ vpcId: vpc.vpcId, availabilityZone: 'us-east-1a', cidrBlock: '10.2.0.0/24' }),
    ).toThrow(/outside/);
  });

  it('defineInstanceType adds a custom limit used by attach', () => {
    const state = new Ec2State();
    const cluster = state.seedCluster();
    state.defineInstanceType('tiny.one', { maxInterfaces: 1, ipv4PerInterface: 2, hypervisor: 'nitro' });
    const instance = state.launchInstance({
      instanceType: 'tiny.one',
      subnetId: cluster.subnets.nodesA.subnetId,
    });
    const { networkInterface } = state.createNetworkInterface({ subnetId: cluster.subnets.nodesA.subnetId });
    expect(() =>
      state.attachNetworkInterface({
        networkInterfaceId: networkInterface.networkInterfaceId,
        instanceId: instance.instanceId,
        deviceIndex: 1,
      }),
    ).toThrow(expect.objectContaining({ code: 'AttachmentLimitExceeded' }));
  });
});
