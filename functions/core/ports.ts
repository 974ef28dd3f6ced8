import type { CiliumNode } from './ciliumnode.ts';
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
import type { WatchTrigger } from './watch-plan.ts';

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
 * EC2, in domain terms. Implemented over @aws-sdk/client-ec2 by `functions/aws/ec2-network.ts`, one
 * module per EC2 resource under `functions/aws/ec2/`.
 * Every describe is filtered (never an unfiltered DescribeInstances/DescribeNetworkInterfaces,
 * which draw on EC2's smaller 50/10 token bucket). The adapter keeps, in one layer behind this port:
 *
 * 1. Errors: every EC2 error answer escapes as an `Ec2Failure` (./ec2-failure.ts), classified by
 *    `kind`; callers branch on the kind only. Anything else that escapes is a network error once
 *    the retries are spent, or a bug.
 * 2. Retries: throttling and 5xx, with bounded, jittered backoff; and a `*.NotFound` on a resource
 *    the caller says it just created (`justCreated`, `justAttached`), with bounded waits.
 * 3. Pagination: every describe returns all pages.
 * 4. Caches: VPC CIDRs, route tables, subnet listings and subnet CIDRs (see each method).
 */
export interface Ec2NetworkPort {
  /**
   * The instance, or `undefined` when EC2 returns none (never existed, or terminated long enough
   * ago to have vanished). Right after launch EC2 may not show it yet: `undefined` is then not
   * proof of absence. Read-only.
   */
  describeInstance(instanceId: string): Promise<InstanceView | undefined>;
  /** The instances EC2 knows of these (one filtered DescribeInstances per 200); unknown ones are left out. */
  describeInstances(instanceIds: readonly string[]): Promise<InstanceView[]>;
  /**
   * Every ENI attached to the instance (filter attachment.instance-id, all pages), eth0 and ENIs
   * that are not ours included, sorted by device index, with tags and subnet CIDRs (one
   * DescribeSubnets for all of them). `vpc` is the instance's VPC: an attached ENI in another VPC
   * (a multi-VPC attachment) cannot be described in the node's one VPC, so it fails with
   * `InvalidInputError` rather than publish a wrong VPC for it. Empty for an unknown instance.
   */
  describeAttachedEnis(instanceId: string, vpcId: string): Promise<EniState[]>;
  /**
   * Instances whose tag `tagKey` has one of `tagValues` and whose state is one of `states`
   * (filtered DescribeInstances, paginated): how the sweep finds nodes whose events were missed.
   */
  listClusterInstances(
    tagKey: string,
    tagValues: readonly string[],
    states: readonly string[],
  ): Promise<ClusterInstance[]>;
  /**
   * ENIs created for this instance by us (our instance-id and cluster tags, `isOurs`) that are NOT
   * attached (status `available`): left by a crash between create and attach, to be adopted
   * instead of re-created. Shortly after a create EC2 may not list the new ENI yet.
   */
  findDetachedEnisCreatedFor(instanceId: string): Promise<DetachedEni[]>;
  /** Every detached (`available`) ENI carrying our ownership tags for this cluster: ENI GC's candidates. */
  findDetachedEnisOfCluster(): Promise<DetachedEni[]>;
  /**
   * Primary CIDR and associated secondary CIDRs (never the primary again, never empty strings,
   * never CIDRs being associated or disassociated). Fails with kind `not-found` for an unknown VPC.
   */
  describeVpc(vpcId: string): Promise<VpcView>;
  /**
   * Subnets of the VPC in one AZ, with free address counts and route table ids (the explicit
   * association, else the VPC's main route table).
   */
  describeSubnets(vpcId: string, availabilityZone: string): Promise<SubnetView[]>;
  describeSecurityGroups(vpcId: string): Promise<SecurityGroupView[]>;
  /**
   * Networking limits of an instance type straight from DescribeInstanceTypes; `undefined` when
   * EC2 does not know the type. Uncached: use `InstanceLimitsCatalog` (functions/aws/instance-limits.ts),
   * which caches per container and falls back to the static table.
   */
  describeInstanceLimits(instanceType: string): Promise<InstanceLimits | undefined>;

  /**
   * CreateNetworkInterface with the IPs (or prefixes) and tags in one call, so the ENI never exists
   * untagged. The adapter adds our ownership tags (./eni-ownership.ts) on top of the
   * configured extra tags and `request.tags`. Idempotent through `clientToken`: a replay with the
   * same token and parameters returns the same ENI (its `status` may have moved on to `in-use`); the
   * same token with other parameters fails with kind `idempotency-mismatch`.
   * Refusals: `subnet-full`, `prefix-capacity`, and `ipv6-refused` for the IPv6 part.
   */
  createEni(request: CreateEniRequest): Promise<DetachedEni>;
  /**
   * AttachNetworkInterface on network card 0; returns the attachment id. Right after createEni a
   * `*.NotFound` is EC2's eventual consistency: pass `{ justCreated: true }` and the adapter waits
   * it out (bounded) before failing with kind `not-found`. NOT idempotent (EC2 takes no client
   * token): a replay after a lost answer fails with `in-use` or `device-index-taken`, so after an
   * ambiguous failure re-read `describeAttachedEnis` before acting. Other kinds to branch on:
   * `attachment-limit`, `incorrect-instance-state`.
   */
  attachEni(
    eniId: string,
    instanceId: string,
    deviceIndex: number,
    options?: { readonly justCreated?: boolean },
  ): Promise<string>;
  /**
   * ModifyNetworkInterfaceAttribute on the attachment. Idempotent (sets a value). A `*.NotFound`
   * right after attachEni may be eventual consistency: pass `{ justAttached: true }` and the
   * adapter waits it out (bounded); otherwise it means the ENI or attachment is gone.
   */
  setDeleteOnTermination(
    eniId: string,
    attachmentId: string,
    deleteOnTermination: boolean,
    options?: { readonly justAttached?: boolean },
  ): Promise<void>;
  /**
   * AssignPrivateIpAddresses by count; returns the IPs / prefixes EC2 assigned. Makes no call when
   * both counts are 0. Not idempotent: callers hold the node's mutation lease. Fails with kind
   * `eni-address-limit` past the per-ENI limit; refusals `subnet-full`, `prefix-capacity`.
   */
  assignIps(eniId: string, request: { ipCount?: number; prefixCount?: number }): Promise<AssignedAddresses>;
  /**
   * AssignIpv6Addresses with `Ipv6PrefixCount`; returns the /80s EC2 assigned, canonical text. Not
   * idempotent: callers hold the node's mutation lease. A refusal of the IPv6 part (the subnet has
   * no IPv6 block, the type none or no room for it) fails with kind `ipv6-refused`.
   */
  assignIpv6Prefixes(eniId: string, prefixCount: number): Promise<string[]>;
  /**
   * Releases IPs and/or prefixes. Idempotent: addresses the ENI no longer holds are skipped (after
   * a re-read of the ENI), and an ENI that is gone holds nothing.
   */
  unassignIps(eniId: string, addresses: AssignedAddresses): Promise<void>;
  /**
   * Starts a detach; EC2 completes it asynchronously (the ENI is `in-use` until then). Idempotent:
   * an attachment that is already gone counts as detached. eth0 cannot be detached.
   */
  detachEni(attachmentId: string): Promise<void>;
  /**
   * Deletes an ENI; an ENI that is already gone counts as deleted (as amazon-vpc-cni's deleteENI).
   * Right after create a NotFound may be eventual consistency; such an ENI is still tagged and is
   * found again by `findDetachedEnisCreatedFor`. Fails with kind `in-use` while still attached.
   */
  deleteEni(eniId: string): Promise<void>;
}

/** An instance with the addresses of its attached ENIs, as DescribeInstances lists them (no tags). */
export interface ClusterInstance {
  readonly instance: InstanceView;
  readonly attachedEnis: readonly AttachedEniSummary[];
}

export interface AttachedEniSummary {
  readonly id: string;
  readonly deviceIndex: number;
  readonly secondaryIps: readonly string[];
  readonly prefixes: readonly string[];
  /** IPv6 /80s (canonical text); absent when none. */
  readonly ipv6Prefixes?: readonly string[];
}

export interface CreateEniRequest {
  /** The instance the ENI is for; written into our instance-id tag. */
  readonly instanceId: string;
  readonly subnetId: string;
  readonly securityGroupIds: readonly string[];
  readonly description: string;
  readonly ipCount?: number;
  readonly prefixCount?: number;
  /** IPv6 /80 prefixes to create the ENI with (`Ipv6PrefixCount`; the subnet must be dual-stack). */
  readonly ipv6PrefixCount?: number;
  /** Tags for this ENI beyond the ones the adapter always sets (which win on a key clash). */
  readonly tags: Tags;
  /** Deterministic per ENI slot (at most 64 ASCII characters), so a retried create is a replay. */
  readonly clientToken: string;
}

/** An ENI that is not (yet) attached, as EC2 returned it. */
export interface DetachedEni {
  readonly id: string;
  readonly mac: string;
  readonly primaryIp: string;
  readonly secondaryIps: readonly string[];
  readonly prefixes: readonly string[];
  /** IPv6 /80s (canonical text); absent when none. */
  readonly ipv6Prefixes?: readonly string[];
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

/** Reads CiliumNodes (knobs, demand). Implemented with client-node by `functions/k8s/`. */
export interface CiliumNodeReader {
  /** The CiliumNode named `name`, or `undefined` when it does not exist (yet). */
  get(name: string): Promise<CiliumNode | undefined>;
  /** Every CiliumNode (one paged LIST: the sweep reads demand for all nodes at once). */
  list(): Promise<CiliumNode[]>;
}

/**
 * One ConfigMap of the cluster (the agent's `cilium-config`): its `data`, or `undefined` when it
 * does not exist. `name` is `namespace/name`, for messages.
 */
export interface ConfigMapReader {
  readonly name: string;
  read(): Promise<Readonly<Record<string, string>> | undefined>;
}

export interface CiliumNodeList {
  readonly items: CiliumNode[];
  /** Where a watch continues from this list. Opaque. */
  readonly resourceVersion: string;
}

/**
 * One event of a CiliumNode watch. `EXPIRED`: the server no longer keeps the history the watch
 * asked to start from (410 Gone); the watcher must list again.
 */
export type CiliumNodeWatchEvent =
  | { readonly type: 'ADDED' | 'MODIFIED' | 'DELETED'; readonly object: CiliumNode }
  | { readonly type: 'BOOKMARK'; readonly resourceVersion: string }
  | { readonly type: 'EXPIRED' };

/** Lists and watches CiliumNodes. Implemented with client-node by `functions/k8s/`. */
export interface CiliumNodeWatchPort {
  listWithResourceVersion(): Promise<CiliumNodeList>;
  /** Resolves when the stream ends or `signal` aborts; rejects when the connection fails. */
  watch(
    resourceVersion: string,
    onEvent: (event: CiliumNodeWatchEvent) => void,
    signal: AbortSignal,
  ): Promise<void>;
}

/** Structured logging; fields must never carry credentials or tokens. */
export interface Log {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** The watcher's lease item as stored. */
export interface WatchLeaseView {
  readonly holder?: string | undefined;
  readonly leaseExpiresAtEpochMs?: number | undefined;
  /** When the holder means to hand the lease back (its deadline): a successor may stand by. */
  readonly endsAtEpochMs?: number | undefined;
  /** Where the next watcher resumes (opaque). */
  readonly resourceVersion?: string | undefined;
}

/**
 * Serves nodes for the watcher in ONE allocate-function invocation, all at once: for each, the
 * release step and/or the allocation, through the same paths as the sweep. Synchronous, so the
 * watcher's resume point passes an event only once the work it started is done. Resolves with the
 * nodes whose serving failed (each with why; the others were served); rejects when the invocation
 * itself failed or could not be made (then none is known served). The sweep is the safety net.
 */
export interface NodeServicePort {
  serve(triggers: readonly WatchTrigger[]): Promise<NodeServiceResult>;
}

interface NodeServiceFailure {
  readonly instanceId: string;
  readonly error: string;
}

/** What one serve call came to: the nodes that failed, and those another invocation held. */
export interface NodeServiceResult {
  readonly failures: readonly NodeServiceFailure[];
  /** Nodes whose allocation found another invocation's lease, and when that lease runs out unless renewed. */
  readonly held: readonly { readonly instanceId: string; readonly leaseExpiresAtEpochMs: number }[];
}

/** Single flight and the resume point of the CiliumNode watcher (conditional writes). */
export interface WatchLeaseStore {
  read(): Promise<WatchLeaseView>;
  /** Takes the lease when free, expired or already ours; `undefined` when another holds it. */
  acquire(
    holder: string,
    nowEpochMs: number,
    leaseMs: number,
    endsAtEpochMs: number,
  ): Promise<WatchLeaseView | undefined>;
  /** Extends our lease and stores the resume point; `false` when it is no longer ours. */
  renew(holder: string, nowEpochMs: number, leaseMs: number, resourceVersion?: string): Promise<boolean>;
  /** Hands the lease back with the resume point; `false` when it was no longer ours. */
  release(holder: string, resourceVersion?: string): Promise<boolean>;
}
