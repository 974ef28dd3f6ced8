import type { PlanRefusals } from '../../../functions/core/allocation-plan.ts';
import { UNCONFIGURED_KNOBS } from '../../../functions/core/knobs.ts';
import type {
  EniState,
  InstanceLimits,
  InstanceView,
  NodeKnobs,
  SecurityGroupView,
  SubnetView,
  Tags,
} from '../../../functions/core/model.ts';

/**
 * Builders for core unit tests: one VPC (10.0.0.0/16) in one zone, a node subnet 10.0.0.0/20, and
 * ENIs whose addresses are derived from their device index so every test can name them:
 * primary 10.0.<d>.4, secondaries 10.0.<d>.10, .11, ..., prefixes 10.0.<d>.128/28, .144/28, ...
 */

export const VPC_ID = 'vpc-0a1b2c';
const ZONE = 'us-east-1a';
export const INSTANCE_ID = 'i-0123456789abcdef0';
const NODE_SUBNET_ID = 'subnet-node';

export const M5_LARGE: InstanceLimits = {
  maxInterfaces: 3,
  ipv4PerInterface: 10,
  hypervisor: 'nitro',
  bareMetal: false,
};
export const T3_MEDIUM: InstanceLimits = {
  maxInterfaces: 3,
  ipv4PerInterface: 6,
  hypervisor: 'nitro',
  bareMetal: false,
};
export const M5_4XLARGE: InstanceLimits = {
  maxInterfaces: 8,
  ipv4PerInterface: 30,
  hypervisor: 'nitro',
  bareMetal: false,
};
export const T3_NANO: InstanceLimits = {
  maxInterfaces: 2,
  ipv4PerInterface: 2,
  hypervisor: 'nitro',
  bareMetal: false,
};
export const T2_MEDIUM: InstanceLimits = {
  maxInterfaces: 3,
  ipv4PerInterface: 6,
  hypervisor: 'xen',
  bareMetal: false,
};
export const M5_METAL: InstanceLimits = {
  maxInterfaces: 15,
  ipv4PerInterface: 50,
  hypervisor: '',
  bareMetal: true,
};

export function knobs(overrides: Partial<NodeKnobs> = {}): NodeKnobs {
  return { ...UNCONFIGURED_KNOBS, ...overrides };
}

export function subnet(
  id: string,
  availableAddresses: number,
  overrides: Partial<Omit<SubnetView, 'id' | 'availableAddresses'>> = {},
): SubnetView {
  return {
    id,
    cidr: '10.0.64.0/20',
    vpcId: VPC_ID,
    availabilityZone: ZONE,
    availableAddresses,
    tags: {},
    routeTableId: 'rtb-other',
    ...overrides,
  };
}

export const NODE_SUBNET: SubnetView = subnet(NODE_SUBNET_ID, 4000, {
  cidr: '10.0.0.0/20',
  routeTableId: 'rtb-main',
});

export interface EniSpec {
  readonly deviceIndex: number;
  readonly secondaryCount?: number;
  readonly prefixCount?: number;
  readonly id?: string;
  readonly subnetId?: string;
  readonly tags?: Tags;
  readonly securityGroupIds?: readonly string[];
}

/** `10.0.<deviceIndex>.<host>` */
export function ipOn(deviceIndex: number, host: number): string {
  return `10.0.${deviceIndex}.${host}`;
}

function secondaryIpsOn(deviceIndex: number, count: number): string[] {
  return Array.from({ length: count }, (_, offset) => ipOn(deviceIndex, 10 + offset));
}

function prefixesOn(deviceIndex: number, count: number): string[] {
  return Array.from({ length: count }, (_, offset) => `${ipOn(deviceIndex, 128 + offset * 16)}/28`);
}

export function eni(spec: EniSpec): EniState {
  const { deviceIndex } = spec;
  return {
    id: spec.id ?? `eni-${deviceIndex}`,
    mac: `02:00:00:00:00:0${deviceIndex}`,
    deviceIndex,
    attachmentId: `eni-attach-${deviceIndex}`,
    deleteOnTermination: true,
    primaryIp: ipOn(deviceIndex, 4),
    secondaryIps: secondaryIpsOn(deviceIndex, spec.secondaryCount ?? 0),
    prefixes: prefixesOn(deviceIndex, spec.prefixCount ?? 0),
    subnetId: spec.subnetId ?? NODE_SUBNET_ID,
    subnetCidr: '10.0.0.0/20',
    securityGroupIds: spec.securityGroupIds ?? ['sg-node-b', 'sg-node-a'],
    tags: spec.tags ?? {},
    description: deviceIndex === 0 ? '' : `Cilium-CNI (${INSTANCE_ID})`,
  };
}

export function instance(overrides: Partial<InstanceView> = {}): InstanceView {
  return {
    id: INSTANCE_ID,
    instanceType: 'm5.large',
    state: 'running',
    availabilityZone: ZONE,
    vpcId: VPC_ID,
    subnetId: NODE_SUBNET_ID,
    privateDnsName: 'ip-10-0-0-4.ec2.internal',
    privateIp: '10.0.0.4',
    tags: {},
    ...overrides,
  };
}

export function securityGroup(id: string, tags: Tags, vpcId = VPC_ID): SecurityGroupView {
  return { id, vpcId, tags };
}

/** What refused during an invocation: nothing, but for `overrides`. */
export function refused(overrides: Partial<PlanRefusals> = {}): PlanRefusals {
  return {
    fullSubnetIds: [],
    prefixRefusedSubnetIds: [],
    ipv6RefusedSubnetIds: [],
    fullEniIds: [],
    ...overrides,
  };
}
