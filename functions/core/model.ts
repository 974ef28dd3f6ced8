/**
 * The domain model shared by every function: what we know of an instance and its ENIs, the per-node
 * knobs, and the node record (the ONE DynamoDB item per instance that is the source of truth for
 * the CiliumNode). Plain data only: no SDK types, no behaviour.
 */

/** Tags as EC2 and Cilium use them: key to value. */
export type Tags = Readonly<Record<string, string>>;

/** What DescribeInstanceTypes says about an instance type's networking (cilium `ipamTypes.Limits`). */
export interface InstanceLimits {
  /** MaximumNetworkInterfaces: ENIs the instance can hold, eth0 included. */
  readonly maxInterfaces: number;
  /** Ipv4AddressesPerInterface: IPv4 addresses per ENI, the ENI's primary address included. */
  readonly ipv4PerInterface: number;
  /**
   * Ipv6AddressesPerInterface: IPv6 addresses per ENI, each delegated /80 counting as one; 0 for a
   * type without IPv6. Absent when unknown: AWS gives as many as `ipv4PerInterface`.
   */
  readonly ipv6PerInterface?: number;
  /** "nitro", "xen", or "" (bare metal reports no hypervisor). */
  readonly hypervisor: string;
  readonly bareMetal: boolean;
}

export interface SubnetView {
  readonly id: string;
  readonly cidr: string;
  readonly vpcId: string;
  readonly availabilityZone: string;
  /** AvailableIpAddressCount as EC2 last reported it. */
  readonly availableAddresses: number;
  readonly tags: Tags;
  /** The route table the subnet is associated with (explicitly or through the VPC's main table). */
  readonly routeTableId?: string;
  /**
   * The subnet's associated IPv6 block (a /64, canonical text) when it is dual-stack; absent for an
   * IPv4-only subnet. Only a dual-stack subnet's ENIs can hold a /80.
   */
  readonly ipv6Cidr?: string;
}

export interface VpcView {
  readonly id: string;
  readonly primaryCidr: string;
  /** Associated secondary IPv4 CIDRs; never contains the primary CIDR or empty strings. */
  readonly secondaryCidrs: readonly string[];
}

export interface SecurityGroupView {
  readonly id: string;
  readonly vpcId: string;
  readonly tags: Tags;
}

/** An ENI attached to the instance, exactly as EC2 last confirmed it. */
export interface EniState {
  readonly id: string;
  readonly mac: string;
  /** Attachment device index; 0 is the instance's primary ENI (eth0). */
  readonly deviceIndex: number;
  readonly attachmentId: string;
  readonly deleteOnTermination: boolean;
  /** The ENI's own primary private IPv4 address. */
  readonly primaryIp: string;
  /** Secondary private IPv4 addresses (the primary excluded, prefixes not expanded). */
  readonly secondaryIps: readonly string[];
  /** Delegated IPv4 /28 prefixes, as CIDRs. Stored as prefixes, never expanded, to bound item size. */
  readonly prefixes: readonly string[];
  /**
   * Delegated IPv6 /80 prefixes, canonical text (RFC 5952). Absent when the ENI holds none, which
   * is also how records written before IPv6 read. Never released (cilium keeps the /80 for good).
   */
  readonly ipv6Prefixes?: readonly string[];
  readonly subnetId: string;
  readonly subnetCidr: string;
  readonly securityGroupIds: readonly string[];
  readonly tags: Tags;
  readonly description: string;
  /**
   * True for an ENI we did not create (it lacks our ownership tags): eth0 as EC2 made it, another
   * controller's (VPC CNI, cilium-operator before the hand-over). Our role may not mutate it, so
   * it is never filled, released, detached or deleted; it still takes its device slot and is
   * published in `status.eni.enis`. Absent means ours.
   */
  readonly foreign?: boolean;
  /**
   * When one of our own mutating calls (create, attach, assign, unassign) last changed this ENI and
   * EC2's response confirmed it. Within EC2's eventual-consistency window after that, a Describe
   * that disagrees is not proof: the record's view of this ENI wins (see `mergeObservedEnis`).
   */
  readonly lastMutatedAtEpochMs?: number;
}

/** What DescribeInstances tells us about one instance. */
export interface InstanceView {
  readonly id: string;
  readonly instanceType: string;
  /** EC2 instance state name: pending, running, stopping, stopped, shutting-down, terminated. */
  readonly state: string;
  readonly availabilityZone: string;
  readonly vpcId: string;
  /** The subnet of the primary ENI (cilium `spec.eni.node-subnet-id`). */
  readonly subnetId: string;
  readonly privateDnsName: string;
  readonly privateIp: string;
  readonly tags: Tags;
}

/**
 * The per-node knobs cilium-operator reads from the CiliumNode (`spec.ipam.*`, `spec.eni.*`), with
 * zero values resolved the way the operator resolves them (see `resolveKnobs` callers).
 */
export interface NodeKnobs {
  /** `spec.ipam.pre-allocate`; 0 means "use cilium's default" (8, capped for tiny instances). */
  readonly preAllocate: number;
  readonly minAllocate: number;
  /** 0 means no cap beyond what the instance can hold. */
  readonly maxAllocate: number;
  readonly maxAboveWatermark: number;
  /** ENIs below this device index are never touched; new ENIs go at or above it. */
  readonly firstInterfaceIndex: number;
  readonly subnetIds: readonly string[];
  readonly subnetTags: Tags;
  readonly securityGroups: readonly string[];
  readonly securityGroupTags: Tags;
  /** An ENI whose tags match ALL of these is never touched. Empty means no exclusion. */
  readonly excludeInterfaceTags: Tags;
  readonly usePrimaryAddress: boolean;
  readonly disablePrefixDelegation: boolean;
  readonly deleteOnTermination: boolean;
  /**
   * Knobs the CiliumNode sets to a value of the wrong shape, each as `<field path>: <problem>`
   * (`knobsFromCiliumNode`); absent when there is none. Such a knob is never guessed at: its field
   * above holds the default, and the planner refuses to allocate (`MalformedKnob`) until it is fixed.
   */
  readonly malformed?: readonly string[];
}

/** An error recorded on the node item; the sync surfaces it in `status.ipam.operator-status.error`. */
export interface RecordedError {
  /** A stable machine-readable code, e.g. `NoSubnetWithFreeAddresses` or an EC2 error code. */
  readonly code: string;
  readonly message: string;
  readonly atEpochMs: number;
}

/**
 * A claim on the node by one invocation that is about to mutate EC2. Concurrent invocations that
 * see an unexpired lease held by someone else back off instead of mutating: EC2's
 * AssignPrivateIpAddresses is not idempotent, so two planners acting on the same version would
 * otherwise both add IPs. A crashed holder's lease simply expires; its work is re-derived from EC2.
 */
export interface MutationLease {
  readonly holder: string;
  readonly expiresAtEpochMs: number;
}

/** Release handshake state of one IP, durable on the node item (cilium `status.ipam.release-ips`). */
export type ReleaseState = 'marked-for-release' | 'ready-for-release' | 'do-not-release' | 'released';

export interface ExcessMark {
  /** When the IP was first seen in the excess set, continuously since. */
  readonly sinceEpochMs: number;
  readonly state?: ReleaseState;
  /**
   * `excluded-eni`: the IP leaves the pool because its ENI became excluded (a knob such as
   * `first-interface-index` changed after we filled it). It goes through the handshake so an agent
   * allocating at that moment cannot hand it out as it leaves, but it stays on EC2 (excluded ENIs
   * are never touched). Absent: an excess IP, released in EC2 at the end of the handshake.
   */
  readonly cause?: 'excluded-eni';
}

/**
 * Release progress of one CIDR of a multi-pool (1.20) node, durable on the node item (see
 * `planCidrRelease`): `pending` while the agent has left it out of `spec.ipam.pools.allocated`
 * for less than the delay, `withdrawing` while the sync takes it out of the CiliumNode (still on
 * EC2), `released` once unassigned (a tombstone: a lagging Describe that lists it is not believed).
 */
export interface CidrRelease {
  readonly eniId: string;
  readonly state: 'pending' | 'withdrawing' | 'released';
  /** When the CIDR was first seen missing from `allocated`, continuously since. */
  readonly sinceEpochMs: number;
  readonly releasedAtEpochMs?: number;
  /**
   * The record version whose write made the entry `withdrawing` (W): it is unassigned only once
   * the CiliumNode carries W or a newer version of the same table (see `planCidrRelease`). Kept
   * on the tombstone. Absent on entries an earlier release wrote: such an entry asks for the
   * record's current version, and the next release write stamps it with its own.
   */
  readonly withdrawnInVersion?: number;
}

/** The node record: ONE DynamoDB item per instance, the whole IPAM state of that node. */
export interface NodeRecord {
  readonly instanceId: string;
  /** Increases by exactly one on every write; every write is conditional on the version read. */
  readonly version: number;
  /** The CiliumNode's name (EKS naming: the instance's PrivateDnsName). */
  readonly nodeName: string;
  readonly instanceType: string;
  readonly availabilityZone: string;
  readonly nodeSubnetId: string;
  readonly vpc: VpcView;
  /** Every ENI attached to the instance, eth0 and excluded ones included, sorted by device index. */
  readonly enis: readonly EniState[];
  /** The knobs in force when the record was written. */
  readonly knobs: NodeKnobs;
  /** Whether the node allocates /28 prefixes (decided once per node, as cilium does). */
  readonly prefixDelegation: boolean;
  readonly lastError?: RecordedError;
  readonly lease?: MutationLease;
  /** IPs in the excess set and their handshake progress, keyed by IP. */
  readonly excessMarks?: Readonly<Record<string, ExcessMark>>;
  /** Multi-pool release progress, keyed by CIDR (`10.0.1.5/32`, `10.0.2.16/28`). */
  readonly cidrReleases?: Readonly<Record<string, CidrRelease>>;
  /**
   * The IPAM protocol the node's agent spoke at the last observation of its CiliumNode
   * (`agentProtocolOf`): `crd` (1.12 to 1.19) or `multi-pool` (1.20, 1.21). Absent until a
   * CiliumNode was seen. Decided afresh on every observation; kept here so transitions are visible.
   */
  readonly agentProtocol?: 'crd' | 'multi-pool';
  /** When `agentProtocol` last changed (or was first observed). */
  readonly agentProtocolSinceEpochMs?: number;
  /**
   * The node-table generation (`<table>@<creation time>`, see `table-generation.ts`) in which the
   * allocator last observed EC2 for this node and wrote what it saw. Only the allocator sets it;
   * every other writer keeps it. A point-in-time restore copies the item, stamp included, into a
   * new table, so a restored record names the old table until the allocator has reconciled it with
   * EC2 in the new one; the sync publishes nothing from it before that (`planSyncStep`).
   */
  readonly reconciledInTable?: string;
  /**
   * `active`: allocated and synced. `draining`: a spot interruption warning arrived, no new
   * allocation. `retired`: the instance terminated; kept for audit until `expiresAtEpochSeconds`.
   */
  readonly lifecycle: 'active' | 'draining' | 'retired';
  readonly createdAtEpochMs: number;
  readonly updatedAtEpochMs: number;
  /** DynamoDB TTL (epoch seconds) for retired records, kept for audit until then. */
  readonly expiresAtEpochSeconds?: number;
}
