import { eniDescription } from '../../functions/core/allocation-plan.ts';
import { tagsForNewEni } from '../../functions/core/eni-ownership.ts';
import { UNCONFIGURED_KNOBS } from '../../functions/core/knobs.ts';
import type { EniState, NodeKnobs, NodeRecord } from '../../functions/core/model.ts';
import { dynamoItemSizeBytes } from '../support/item-size.ts';

/**
 * A realistic node record for a fully allocated instance, shaped as the allocator writes it:
 * 17-hex-digit ids, our ownership tags (plus a created-at tag) on every ENI we created, the knobs,
 * the VPC, and, as worst case for size, a lease and a recorded error. `prefixes: true` fills every
 * secondary slot with a /28 prefix instead of an IP (stored as prefixes, never expanded).
 */
export const DYNAMODB_ITEM_LIMIT_BYTES = 400 * 1024;

export interface FullRecordShape {
  readonly instanceType: string;
  readonly maxInterfaces: number;
  readonly ipv4PerInterface: number;
  readonly prefixes: boolean;
  readonly clusterName?: string;
}

const KNOBS: NodeKnobs = { ...UNCONFIGURED_KNOBS, preAllocate: 8 };

export function fullNodeRecord(shape: FullRecordShape): NodeRecord {
  const instanceId = 'i-0a1b2c3d4e5f60718';
  const clusterName = shape.clusterName ?? 'production-cluster';
  const slots = shape.ipv4PerInterface - 1;
  const hex = (value: number, width: number) => value.toString(16).padStart(width, '0');
  const enis: EniState[] = Array.from({ length: shape.maxInterfaces }, (_, deviceIndex) => {
    const thirdOctet = 64 + deviceIndex * 4;
    return {
      id: `eni-0${hex(0xabcdef0000 + deviceIndex, 16)}`,
      mac: `0e:${hex(deviceIndex, 2)}:3f:a1:b2:c3`,
      deviceIndex,
      attachmentId: `eni-attach-0${hex(0x1234500000 + deviceIndex, 16)}`,
      deleteOnTermination: true,
      primaryIp: `10.0.${thirdOctet}.${10 + deviceIndex}`,
      secondaryIps: shape.prefixes
        ? []
        : Array.from({ length: slots }, (_, index) => `10.0.${thirdOctet + 1}.${100 + index}`),
      prefixes: shape.prefixes
        ? Array.from(
            { length: slots },
            (_, index) => `10.${1 + deviceIndex}.${index}.${(index % 16) * 16}/28`,
          )
        : [],
      subnetId: 'subnet-0f1e2d3c4b5a69788',
      subnetCidr: '10.0.64.0/18',
      securityGroupIds: ['sg-0123456789abcdef0'],
      tags:
        deviceIndex === 0
          ? {}
          : tagsForNewEni(clusterName, instanceId, { 'io.cilium/created-at': '1767225600000' }),
      description: deviceIndex === 0 ? '' : eniDescription(instanceId),
      lastMutatedAtEpochMs: 1_767_225_600_000 + deviceIndex,
    };
  });
  return {
    instanceId,
    version: 1234,
    nodeName: 'ip-10-0-64-10.ec2.internal',
    instanceType: shape.instanceType,
    availabilityZone: 'us-east-1a',
    nodeSubnetId: 'subnet-0f1e2d3c4b5a69788',
    vpc: { id: 'vpc-0123456789abcdef0', primaryCidr: '10.0.0.0/16', secondaryCidrs: ['100.64.0.0/16'] },
    enis,
    knobs: KNOBS,
    prefixDelegation: shape.prefixes,
    lastError: {
      code: 'InsufficientFreeAddressesInSubnet',
      message: 'The specified subnet subnet-0f1e2d3c4b5a69788 has insufficient free addresses.',
      atEpochMs: 1_767_225_600_000,
    },
    lease: { holder: '6f1c3f0e-2d5b-4a7e-9c1d-0b8e7f6a5d4c', expiresAtEpochMs: 1_767_225_780_000 },
    lifecycle: 'active',
    createdAtEpochMs: 1_767_225_600_000,
    updatedAtEpochMs: 1_767_225_600_000,
  };
}

export interface ItemSizes {
  readonly ipsBytes: number;
  readonly prefixesBytes: number;
  /** What the prefixed node would cost with every prefix expanded to 16 single IPs (the design's "don't"). */
  readonly prefixesExpandedBytes: number;
  readonly records: { readonly ips: NodeRecord; readonly prefixes: NodeRecord };
}

/** m5.24xlarge: 15 ENIs x 50 IPv4 (https://github.com/aws/amazon-vpc-cni-k8s/blob/b52188387/pkg/vpc/vpc_ip_resource_limit.go). */
export function m5x24ItemSizes(): ItemSizes {
  const shape = { instanceType: 'm5.24xlarge', maxInterfaces: 15, ipv4PerInterface: 50 };
  const ips = fullNodeRecord({ ...shape, prefixes: false });
  const prefixes = fullNodeRecord({ ...shape, prefixes: true });
  const expanded: NodeRecord = {
    ...prefixes,
    enis: prefixes.enis.map((eni) => ({
      ...eni,
      secondaryIps: eni.prefixes.flatMap((prefix) => expandPrefix(prefix)),
      prefixes: [],
    })),
  };
  return {
    ipsBytes: dynamoItemSizeBytes(ips),
    prefixesBytes: dynamoItemSizeBytes(prefixes),
    prefixesExpandedBytes: dynamoItemSizeBytes(expanded),
    records: { ips, prefixes },
  };
}

function expandPrefix(prefix: string): string[] {
  const [address = ''] = prefix.split('/');
  const octets = address.split('.').map(Number);
  const last = octets[3] ?? 0;
  return Array.from({ length: 16 }, (_, index) => `${octets[0]}.${octets[1]}.${octets[2]}.${last + index}`);
}
