import type {
  EniState,
  InstanceLimits,
  InstanceView,
  NodeRecord,
  SecurityGroupView,
  SubnetView,
  Tags,
  VpcView,
} from './model.ts';

/**
 * The node table, in domain terms. Implemented over DynamoDB by `functions/aws/node-table.ts`.
 */
export interface NodeRecordStore {
  /** Strongly consistent read of one record; `undefined` when the instance has none. */
  get(instanceId: string): Promise<NodeRecord | undefined>;
  /**
   * Writes `record` (whose `version` must be `expectedVersion + 1`, or 1 for a first write),
   * conditional on the stored version being `expectedVersion` (`undefined`: no record exists).
   * Throws `VersionConflictError` carrying the current record when the condition fails; any other
   * failure is rethrown as is. Not idempotent by design: a replay of the same write conflicts.
   */
  put(record: NodeRecord, expectedVersion: number | undefined): Promise<void>;
  /** One page of records (eventually consistent scan); pass `nextPageToken` back for the next. */
  listPage(pageToken?: string): Promise<{ records: NodeRecord[]; nextPageToken?: string }>;
}

/**
 * EC2, in domain terms. Implemented over @aws-sdk/client-ec2 by `functions/aws/ec2-network.ts`.
 * Every call is filtered or by id (never an unfiltered DescribeInstances/DescribeNetworkInterfaces,
 * which draw on EC2's smaller 50/10 token bucket). Throttling and 5xx are retried inside the adapter
 * with bounded, jittered backoff; what escapes is an `Ec2Error` (see `functions/aws/ec2-errors.ts`).
 */
export interface Ec2NetworkPort {
  /** The instance, or `undefined` when EC2 does not know it (InvalidInstanceID.NotFound). */
  describeInstance(instanceId: string): Promise<InstanceView | undefined>;
  /** Every ENI attached to the instance (filter attachment.instance-id), with tags. */
  describeAttachedEnis(instanceId: string, vpc: VpcView): Promise<EniState[]>;
  /**
   * ENIs created for this instance by us (our instance-id tag) that are NOT attached (status
   * `available`): left by a crash between create and attach, to be adopted instead of re-created.
   */
  findDetachedEnisCreatedFor(instanceId: string): Promise<DetachedEni[]>;
  describeVpc(vpcId: string): Promise<VpcView>;
  /** Subnets of the VPC in one AZ, with free address counts and route table ids. */
  describeSubnets(vpcId: string, availabilityZone: string): Promise<SubnetView[]>;
  describeSecurityGroups(vpcId: string): Promise<SecurityGroupView[]>;
  /** Networking limits of an instance type; `undefined` when EC2 does not know the type. */
  describeInstanceLimits(instanceType: string): Promise<InstanceLimits | undefined>;

  /**
   * CreateNetworkInterface with the IPs (or prefixes) and our tags in one call. Idempotent through
   * `clientToken`: a replay with the same token and parameters returns the same ENI.
   */
  createEni(request: CreateEniRequest): Promise<DetachedEni>;
  /** Returns the attachment id. Throws `Ec2Error` code `InvalidParameterValue` on a device-index conflict. */
  attachEni(eniId: string, instanceId: string, deviceIndex: number): Promise<string>;
  setDeleteOnTermination(eniId: string, attachmentId: string, deleteOnTermination: boolean): Promise<void>;
  /** Returns the IPs / prefixes EC2 assigned. Not idempotent: callers hold the node's mutation lease. */
  assignIps(eniId: string, request: { ipCount?: number; prefixCount?: number }): Promise<AssignedAddresses>;
  /** Releases IPs and/or prefixes; IPs already gone are not an error for the caller to handle twice. */
  unassignIps(eniId: string, addresses: AssignedAddresses): Promise<void>;
  detachEni(attachmentId: string): Promise<void>;
  /** Deletes an ENI; an ENI that is already gone counts as deleted. */
  deleteEni(eniId: string): Promise<void>;
}

export interface CreateEniRequest {
  readonly instanceId: string;
  readonly subnetId: string;
  readonly securityGroupIds: readonly string[];
  readonly description: string;
  readonly ipCount?: number;
  readonly prefixCount?: number;
  readonly tags: Tags;
  readonly clientToken: string;
}

/** An ENI that is not (yet) attached, as EC2 returned it. */
export interface DetachedEni {
  readonly id: string;
  readonly mac: string;
  readonly primaryIp: string;
  readonly secondaryIps: readonly string[];
  readonly prefixes: readonly string[];
  readonly subnetId: string;
  readonly securityGroupIds: readonly string[];
  readonly tags: Tags;
  readonly description: string;
  /** EC2 status: `available` once created and detached, `in-use` when attached. */
  readonly status: string;
}

export interface AssignedAddresses {
  readonly ips: readonly string[];
  readonly prefixes: readonly string[];
}
