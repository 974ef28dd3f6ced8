/**
 * The parts of a `cilium.io/v2` CiliumNode that the sync reads or writes, with cilium's exact JSON
 * names (https://github.com/cilium/cilium/blob/507103c61f/pkg/k8s/apis/cilium.io/v2/types.go, https://github.com/cilium/cilium/blob/507103c61f/pkg/ipam/types/types.go,
 * https://github.com/cilium/cilium/blob/507103c61f/pkg/aws/eni/types/types.go). Objects come from the API server, written by agents of
 * any version from 1.12 on, so every field is optional and readers must tolerate its absence; the
 * index signatures keep the fields we neither read nor write (they pass through untouched).
 */

/** The annotation holding the node-record version whose spec (and claim) the CiliumNode carries. */
export const RECORD_VERSION_ANNOTATION = 'serverless-eni-ipam.io/record-version';

/**
 * The table generation the record-version annotation counts in: `<table name>@<creation time>`
 * (`table-generation.ts`). A new or restored table starts its records at version 1 again: a version
 * from another table says nothing about this one's, so the sync treats it as absent and claims the
 * node afresh, from an OLDER table only; a CiliumNode claimed from a NEWER table is left alone (the
 * sync asking is one of a deployment the table switch left behind). A bare table name (written by
 * an earlier release) counts as that table's and as older than any other; a CiliumNode with a
 * version but no table (written before tables were named) counts as the sync's own table's.
 */
export const RECORD_TABLE_ANNOTATION = 'serverless-eni-ipam.io/record-table';

/**
 * cilium-operator (1.18 and newer) skips a CiliumNode carrying this annotation set to `true`
 * (cilium `annotation.IPAMIgnore`, checked in `operator/cmd/cilium_node.go`): the sync sets it on
 * every CiliumNode it creates and re-asserts it whenever it is missing, so the two allocators
 * never both act on a node we serve.
 */
export const IPAM_IGNORE_ANNOTATION = 'ipam.cilium.io/ignore';

export const CILIUM_API_GROUP = 'cilium.io';
export const CILIUM_API_VERSION = 'v2';
export const CILIUM_NODE_PLURAL = 'ciliumnodes';
export const CILIUM_NODE_KIND = 'CiliumNode';

/** One entry of `spec.ipam.pool` or `status.ipam.used` (cilium `ipamTypes.AllocationIP`). */
interface AllocationIp {
  /** Empty in the pool; the pod (or `router`, `health`) once the agent uses the IP. */
  owner?: string;
  /** In ENI mode: the id of the ENI the IP belongs to. */
  resource?: string;
}

/** IP address to its allocation entry. */
export type AllocationMap = Record<string, AllocationIp>;

/** Values of `status.ipam.release-ips` (cilium `ipamOption.IPReleaseStatus`). */
export type ReleaseStatus = 'marked-for-release' | 'ready-for-release' | 'do-not-release' | 'released';

/** `status.eni.enis[id].subnet` (cilium `AwsSubnet`). */
interface CiliumEniSubnet {
  id?: string;
  cidr?: string;
}

/** `status.eni.enis[id].vpc` (cilium `AwsVPC`): `cidrs` holds secondary CIDRs only. */
interface CiliumEniVpc {
  id?: string;
  'primary-cidr'?: string;
  cidrs?: string[];
}

/**
 * One ENI of `status.eni.enis` (cilium `eniTypes.ENI`). Every field is `omitempty` in cilium, so
 * `number` is absent for device index 0 and empty lists, maps and strings are absent.
 */
export interface CiliumEni {
  id?: string;
  ip?: string;
  mac?: string;
  'availability-zone'?: string;
  description?: string;
  number?: number;
  subnet?: CiliumEniSubnet;
  vpc?: CiliumEniVpc;
  /** Secondary IPs plus every IP of every prefix (and the primary with use-primary-address). */
  addresses?: string[];
  /** IPv4 /28 delegated prefixes. */
  prefixes?: string[];
  /** IPv6 /80 delegated prefixes (CRD 1.20 and later; older CRDs prune the field). */
  'ipv6-prefixes'?: string[];
  'security-groups'?: string[];
  tags?: Record<string, string>;
  'public-ip'?: string;
}

/** `spec.eni` (cilium `ENISpec`): written by the agent, read by us for the per-node knobs. */
export interface CiliumEniSpec {
  /** Obsolete: older agents put the instance id here; absent from the 1.20 CRD. */
  'instance-id'?: string;
  'instance-type'?: string;
  'first-interface-index'?: number;
  'security-groups'?: string[];
  'security-group-tags'?: Record<string, string>;
  'subnet-ids'?: string[];
  'subnet-tags'?: Record<string, string>;
  'node-subnet-id'?: string;
  'vpc-id'?: string;
  'availability-zone'?: string;
  'exclude-interface-tags'?: Record<string, string>;
  'delete-on-termination'?: boolean;
  'use-primary-address'?: boolean;
  'disable-prefix-delegation'?: boolean;
  [field: string]: unknown;
}

/** `spec.ipam` (cilium `IPAMSpec`): we write `pool` only; the agent owns the rest. */
interface CiliumIpamSpec {
  pool?: AllocationMap;
  'pre-allocate'?: number;
  'min-allocate'?: number;
  'max-allocate'?: number;
  'max-above-watermark'?: number;
  [field: string]: unknown;
}

interface CiliumNodeSpec {
  'instance-id'?: string;
  eni?: CiliumEniSpec;
  ipam?: CiliumIpamSpec;
  [field: string]: unknown;
}

/** `status.ipam` (cilium `IPAMStatus`): the agent owns `used` and answers in `release-ips`. */
interface CiliumIpamStatus {
  used?: AllocationMap;
  'release-ips'?: Record<string, ReleaseStatus>;
  'operator-status'?: { error?: string };
  [field: string]: unknown;
}

interface CiliumNodeStatus {
  eni?: { enis?: Record<string, CiliumEni> };
  ipam?: CiliumIpamStatus;
  [field: string]: unknown;
}

interface CiliumNodeMetadata {
  name: string;
  resourceVersion?: string;
  uid?: string;
  generation?: number;
  annotations?: Record<string, string>;
  labels?: Record<string, string>;
  [field: string]: unknown;
}

export interface CiliumNode {
  apiVersion?: string;
  kind?: string;
  metadata: CiliumNodeMetadata;
  spec?: CiliumNodeSpec;
  status?: CiliumNodeStatus;
}

/** RFC 6902 operations, as the sync emits them (`add` also replaces an existing member). */
export type JsonPatchOperation =
  | { op: 'add' | 'replace' | 'test'; path: string; value: unknown }
  | { op: 'remove'; path: string };

/** RFC 6901 escaping of one path token (`~` to `~0`, `/` to `~1`), e.g. for annotation keys. */
export function jsonPointerToken(token: string): string {
  return token.replaceAll('~', '~0').replaceAll('/', '~1');
}

/**
 * The CiliumNode API, in the sync's terms. Implemented over @kubernetes/client-node by
 * `functions/k8s/ciliumnode-api.ts`. Writes are JSON Patches whose first operation tests the
 * resourceVersion they were planned from; none of them is retried inside the adapter, since only
 * the caller can re-plan.
 */
export interface CiliumNodePort {
  /** The CiliumNode, or `undefined` when there is none with that name. */
  get(name: string): Promise<CiliumNode | undefined>;
  /** Creates it and returns the stored object. `ResourceVersionConflictError` when the name is taken. */
  create(object: CiliumNode): Promise<CiliumNode>;
  /**
   * Patches the main resource (metadata and spec; the server ignores status here) and returns the
   * stored object. `ResourceVersionConflictError` when the object changed since it was read (409,
   * or 422 from the failed resourceVersion `test`); `CiliumNodeNotFoundError` when it is gone.
   */
  patchMain(name: string, operations: readonly JsonPatchOperation[]): Promise<CiliumNode>;
  /** Patches the /status subresource (the server ignores everything else); errors as `patchMain`. */
  patchStatus(name: string, operations: readonly JsonPatchOperation[]): Promise<CiliumNode>;
  /** Every CiliumNode (paged underneath). */
  list(): Promise<CiliumNode[]>;
}

/**
 * Someone else wrote the CiliumNode between our read and our write (or created it first). Expected
 * under contention with agents and other syncs: re-read and re-plan.
 */
export class ResourceVersionConflictError extends Error {
  override readonly name = 'ResourceVersionConflictError';
  constructor(
    readonly ciliumNodeName: string,
    message: string,
    options?: ErrorOptions,
  ) {
    super(`CiliumNode ${ciliumNodeName}: ${message}`, options);
  }
}

/** The CiliumNode was deleted between our read and our write. */
export class CiliumNodeNotFoundError extends Error {
  override readonly name = 'CiliumNodeNotFoundError';
  constructor(
    readonly ciliumNodeName: string,
    options?: ErrorOptions,
  ) {
    super(`CiliumNode ${ciliumNodeName} not found`, options);
  }
}
