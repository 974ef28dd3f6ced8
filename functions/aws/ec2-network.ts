import { EC2Client } from '@aws-sdk/client-ec2';
import { validateExtraTags } from '../core/eni-ownership.ts';
import { ConfigurationError } from '../core/errors.ts';
import type { Tags } from '../core/model.ts';
import type { Ec2NetworkPort } from '../core/ports.ts';
import type { Ec2Calls } from './ec2/call.ts';
import { Instances } from './ec2/instances.ts';
import { NetworkInterfaces } from './ec2/network-interfaces.ts';
import { describeSecurityGroups } from './ec2/security-groups.ts';
import { Subnets } from './ec2/subnets.ts';
import { createEc2RetryStrategy, type Ec2RetryOptions, type RetryWhileNotFoundOptions } from './ec2-retry.ts';

/**
 * The EC2 adapter: `Ec2NetworkPort` over @aws-sdk/client-ec2. Everything EC2-specific stays in this
 * file and the resource modules under ec2/, in one layer:
 *
 * 1. SDK shapes are mapped to the domain model at the boundary.
 * 2. Every SDK error becomes the domain's `Ec2Failure`, classified once (ec2-errors.ts).
 * 3. Throttling and 5xx are retried by the client's retry strategy (ec2-retry.ts). A `*.NotFound`
 *    on a resource the caller says it just created is retried here (`retryWhileNotFound`, one call
 *    at a time): only the caller knows the resource is fresh. One layer of retries per call, never
 *    nested ones that multiply the wait.
 * 4. Describes follow every page with the SDK's paginators.
 * 5. The caches: VPC CIDRs, route tables and subnet listings for a TTL, subnet CIDRs for good.
 *
 * Most port methods are one SDK call or one paginated describe; `describeSubnets` (subnets and
 * route tables) and `unassignIps` (after a replay, a re-read and narrower unassigns) make more.
 *
 * Describe calls are always filtered (never by bare id lists): EC2 charges unfiltered
 * DescribeInstances / DescribeNetworkInterfaces / DescribeSecurityGroups to a smaller bucket
 * (50 burst, 10/s) than filtered or paginated ones (100, 20/s), and whether an id list counts as a
 * filter is not documented. An empty filtered answer also means "not there" without the
 * `*.NotFound` / `*.Malformed` errors id lists raise.
 */

export interface Ec2ClientOptions {
  /** Retry tuning; tests and the bench shrink the delays. Defaults: `DEFAULT_EC2_RETRY_OPTIONS`. */
  readonly retry?: Partial<Ec2RetryOptions>;
}

/**
 * The EC2 client, built ONCE per container (call this at module scope and share the result):
 * the SDK keeps connections alive and its retry quota per client. Region, endpoint and
 * credentials come only from the SDK's standard configuration (`AWS_REGION`,
 * `AWS_ENDPOINT_URL_EC2`, the Lambda role), so the same code runs against AWS and the emulator.
 */
export function createEc2Client(options: Ec2ClientOptions = {}): EC2Client {
  return new EC2Client({ retryStrategy: createEc2RetryStrategy(options.retry) });
}

export interface Ec2NetworkAdapterOptions {
  readonly client: EC2Client;
  /** The EKS cluster name, written into our ENI tags and required on every ENI we adopt. */
  readonly clusterName: string;
  /** User-configured tags for every ENI we create; must not touch our own keys (`validateExtraTags`). */
  readonly extraTags?: Tags;
  /** MaxResults of the paginated describes, 5..1000 (route tables are capped at 100). Default 1000. */
  readonly describePageSize?: number;
  /** How long a VPC's CIDRs and route tables are remembered. Default 60 s; 0 asks EC2 every time. */
  readonly vpcCacheTtlMs?: number;
  /**
   * How long a VPC's subnet listing (every AZ) is remembered (`describeSubnets`). Default 60 s; 0 asks EC2
   * every time. Its free counts are kept current with what this container takes, and the listing
   * is dropped whenever EC2 refuses an address for lack of room.
   */
  readonly subnetCacheTtlMs?: number;
  /** Clock for the VPC cache; default the system clock. */
  readonly nowMs?: () => number;
  /**
   * The waits for a `*.NotFound` on a resource the caller just created (`justCreated`,
   * `justAttached`). Default `DEFAULT_NOT_FOUND_RETRY` with real timers; tests pass a fast `sleep`.
   */
  readonly notFoundRetry?: RetryWhileNotFoundOptions;
}

/** Builds the adapter; throws `ConfigurationError` for an empty cluster name or unusable extra tags. */
export function createEc2NetworkAdapter(options: Ec2NetworkAdapterOptions): Ec2NetworkPort {
  if (!options.clusterName) throw new ConfigurationError('clusterName must not be empty');
  const tagProblems = validateExtraTags(options.extraTags ?? {});
  if (tagProblems.length > 0)
    throw new ConfigurationError(`invalid extra ENI tags: ${tagProblems.join('; ')}`);
  const pageSize = options.describePageSize ?? 1000;
  if (!Number.isInteger(pageSize) || pageSize < 5 || pageSize > 1000) {
    throw new ConfigurationError(`describePageSize must be an integer in 5..1000, got ${pageSize}`);
  }
  return composeAdapter(options, pageSize);
}

/**
 * The port, one EC2 resource module behind each of its methods, as karpenter keeps a provider per
 * resource: instances and instance types (ec2/instances.ts); VPCs, route tables and subnets with
 * their caches (ec2/subnets.ts); security groups (ec2/security-groups.ts); network interfaces and
 * their addresses (ec2/network-interfaces.ts). The network interfaces keep the subnet listing's
 * free counts current, so they share the container's one `Subnets`.
 */
function composeAdapter(options: Ec2NetworkAdapterOptions, pageSize: number): Ec2NetworkPort {
  const calls: Ec2Calls = { client: options.client, pageSize };
  const instances = new Instances(calls);
  const subnets = new Subnets(calls, {
    vpcCacheTtlMs: options.vpcCacheTtlMs ?? 60_000,
    subnetCacheTtlMs: options.subnetCacheTtlMs ?? 60_000,
    nowMs: options.nowMs ?? Date.now,
  });
  const interfaces = new NetworkInterfaces(calls, subnets, {
    clusterName: options.clusterName,
    extraTags: options.extraTags ?? {},
    notFoundRetry: options.notFoundRetry ?? {},
  });
  return {
    describeInstance: (instanceId) => instances.describeInstance(instanceId),
    describeInstances: (instanceIds) => instances.describeInstances(instanceIds),
    listClusterInstances: (tagKey, tagValues, states) =>
      instances.listClusterInstances(tagKey, tagValues, states),
    describeInstanceLimits: (instanceType) => instances.describeInstanceLimits(instanceType),
    describeVpc: (vpcId) => subnets.describeVpc(vpcId),
    describeSubnets: (vpcId, availabilityZone) => subnets.describeSubnets(vpcId, availabilityZone),
    describeSecurityGroups: (vpcId) => describeSecurityGroups(calls, vpcId),
    describeAttachedEnis: (instanceId, vpcId) => interfaces.describeAttachedEnis(instanceId, vpcId),
    findDetachedEnisCreatedFor: (instanceId) => interfaces.findDetachedEnisCreatedFor(instanceId),
    findDetachedEnisOfCluster: () => interfaces.findDetachedEnisOfCluster(),
    createEni: (request) => interfaces.createEni(request),
    attachEni: (eniId, instanceId, deviceIndex, attachOptions) =>
      interfaces.attachEni(eniId, instanceId, deviceIndex, attachOptions),
    setDeleteOnTermination: (eniId, attachmentId, deleteOnTermination, modifyOptions) =>
      interfaces.setDeleteOnTermination(eniId, attachmentId, deleteOnTermination, modifyOptions),
    assignIps: (eniId, request) => interfaces.assignIps(eniId, request),
    assignIpv6Prefixes: (eniId, prefixCount) => interfaces.assignIpv6Prefixes(eniId, prefixCount),
    unassignIps: (eniId, addresses) => interfaces.unassignIps(eniId, addresses),
    detachEni: (attachmentId) => interfaces.detachEni(attachmentId),
    deleteEni: (eniId) => interfaces.deleteEni(eniId),
  };
}
