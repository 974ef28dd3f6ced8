import { formatIpv6Cidr, tryParseIpv6Cidr } from './ipv6-addresses.ts';
import type {
  AddSubnetInput,
  RouteTableRecord,
  SecurityGroupRecord,
  SubnetRecord,
  VpcRecord,
} from './records.ts';
import type { Ec2State } from './state.ts';

export interface ClusterSeedOptions {
  clusterName?: string;
  /** Default `us-east-1a`, `us-east-1b`. */
  availabilityZones?: [string, string];
  /**
   * A dual-stack VPC: an Amazon-provided IPv6 /56, and a /64 on each node and pod subnet (the tiny
   * subnet stays IPv4-only). Default false: every subnet is IPv4-only.
   */
  dualStack?: boolean;
}

/** What `seedCluster` built, by role, so tests need not look ids up. */
export interface ClusterSeed {
  readonly clusterName: string;
  readonly vpc: VpcRecord;
  readonly availabilityZones: readonly [string, string];
  readonly subnets: {
    /** 10.0.1.0/24 and 10.0.2.0/24: node subnets, main route table, tagged for the cluster. */
    readonly nodesA: SubnetRecord;
    readonly nodesB: SubnetRecord;
    /** 100.64.0.0/24 and 100.64.1.0/24 in the secondary CIDR: pod subnets with their own route table. */
    readonly podsA: SubnetRecord;
    readonly podsB: SubnetRecord;
    /** 10.0.3.0/28 in AZ a: 11 usable addresses, for exhaustion tests. */
    readonly tinyA: SubnetRecord;
  };
  readonly routeTables: { readonly main: RouteTableRecord; readonly pods: RouteTableRecord };
  readonly securityGroups: { readonly nodes: SecurityGroupRecord; readonly pods: SecurityGroupRecord };
}

/**
 * A typical EKS-style VPC: primary CIDR 10.0.0.0/16 and secondary 100.64.0.0/16, two AZs,
 * node subnets (main route table), pod subnets in the secondary CIDR with their own route table,
 * a tiny /28 subnet, and node and pod security groups, all tagged for the cluster.
 */
export function seedEksStyleCluster(state: Ec2State, options: ClusterSeedOptions = {}): ClusterSeed {
  const clusterName = options.clusterName ?? 'test-cluster';
  const [zoneA, zoneB] = options.availabilityZones ?? [`${state.region}a`, `${state.region}b`];
  const clusterTag = `kubernetes.io/cluster/${clusterName}`;
  const vpc = state.addVpc({
    cidrBlock: '10.0.0.0/16',
    secondaryCidrBlocks: ['100.64.0.0/16'],
    tags: { Name: `${clusterName}-vpc`, [clusterTag]: 'shared' },
    ...(options.dualStack ? { ipv6CidrBlock: true as const } : {}),
  });
  // Subnet n of a dual-stack seed gets the n-th /64 of the VPC's /56.
  let ipv6Subnets = 0;
  const ipv6Block = () => {
    const vpcBlock = vpc.ipv6CidrBlockAssociations[0]?.ipv6CidrBlock;
    if (!options.dualStack || vpcBlock === undefined) return {};
    ipv6Subnets += 1;
    return { ipv6CidrBlock: nthSubnetIpv6Block(vpcBlock, ipv6Subnets) };
  };
  const podRouteTable = state.addRouteTable({ vpcId: vpc.vpcId, tags: { Name: `${clusterName}-pods` } });
  const subnet = (name: string, zone: string, cidrBlock: string, extra: Partial<AddSubnetInput> = {}) =>
    state.addSubnet({
      vpcId: vpc.vpcId,
      availabilityZone: zone,
      cidrBlock,
      ...extra,
      tags: { Name: `${clusterName}-${name}`, [clusterTag]: 'shared', ...extra.tags },
    });
  const nodesA = subnet('nodes-a', zoneA, '10.0.1.0/24', {
    tags: { 'kubernetes.io/role/internal-elb': '1' },
    ...ipv6Block(),
  });
  const nodesB = subnet('nodes-b', zoneB, '10.0.2.0/24', {
    tags: { 'kubernetes.io/role/internal-elb': '1' },
    ...ipv6Block(),
  });
  const tinyA = subnet('tiny-a', zoneA, '10.0.3.0/28', { tags: { purpose: 'tiny' } });
  const podsA = subnet('pods-a', zoneA, '100.64.0.0/24', {
    routeTableId: podRouteTable.routeTableId,
    tags: { 'cilium.io/pod-subnet': 'true' },
    ...ipv6Block(),
  });
  const podsB = subnet('pods-b', zoneB, '100.64.1.0/24', {
    routeTableId: podRouteTable.routeTableId,
    tags: { 'cilium.io/pod-subnet': 'true' },
    ...ipv6Block(),
  });
  const nodesGroup = state.addSecurityGroup({
    vpcId: vpc.vpcId,
    groupName: `${clusterName}-nodes`,
    tags: { [clusterTag]: 'owned', role: 'nodes' },
  });
  const podsGroup = state.addSecurityGroup({
    vpcId: vpc.vpcId,
    groupName: `${clusterName}-pods`,
    tags: { [clusterTag]: 'owned', role: 'pods' },
  });
  return {
    clusterName,
    vpc,
    availabilityZones: [zoneA, zoneB],
    subnets: { nodesA, nodesB, podsA, podsB, tinyA },
    routeTables: {
      main: structuredClone(state.requireRouteTable(vpc.mainRouteTableId)),
      pods: podRouteTable,
    },
    securityGroups: { nodes: nodesGroup, pods: podsGroup },
  };
}

/** The `n`-th /64 of a VPC's /56 (`2600:1f18:4a01:ab00::/56`, 1 → `2600:1f18:4a01:ab01::/64`). */
function nthSubnetIpv6Block(vpcBlock: string, n: number): string {
  const parsed = tryParseIpv6Cidr(vpcBlock);
  if (parsed === undefined || n < 0 || n > 255) throw new Error(`no /64 number ${n} in ${vpcBlock}`);
  return formatIpv6Cidr({ networkAddress: parsed.networkAddress + (BigInt(n) << 64n), prefixLength: 64 });
}
