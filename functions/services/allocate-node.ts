import { type AgentDemand, agentDemandOf } from '../core/agent-protocol.ts';
import { type AllocationPlan, computePoolDemand, planAllocation } from '../core/allocation-plan.ts';
import { tombstonedCidrs, withoutTombstoned } from '../core/cidr-release-plan.ts';
import type { CiliumNode } from '../core/ciliumnode.ts';
import { eniClientToken } from '../core/client-token.ts';
import { isClusterMember, nodeNameFor } from '../core/cluster-membership.ts';
import { nextFreeIndexAfter } from '../core/device-index.ts';
import { describeDenial, type Ec2Failure, isEc2Failure } from '../core/ec2-failure.ts';
import { ENI_TAG_KEYS, isOurs, tagsForNewEni } from '../core/eni-ownership.ts';
import { VersionConflictError } from '../core/errors.ts';
import { ADDRESSES_PER_IPV4_PREFIX } from '../core/ip-math.ts';
import { instanceIdOfCiliumNode, knobsFromCiliumNode } from '../core/knobs.ts';
import type {
  CidrRelease,
  EniState,
  InstanceLimits,
  InstanceView,
  NodeKnobs,
  NodeRecord,
  RecordedError,
  SecurityGroupView,
  SubnetView,
  VpcView,
} from '../core/model.ts';
import {
  isLeasedByOther,
  mergeObservedEnis,
  type NodeRecordContent,
  nextNodeRecord,
  recordWouldChange,
  withEni,
} from '../core/node-record.ts';
import type { CiliumNodeReader, DetachedEni, Ec2NetworkPort, Log, NodeRecordStore } from '../core/ports.ts';

/**
 * Allocation for one node: observe (EC2, the record, the CiliumNode), plan with the pure core, act
 * through the EC2 port, record what EC2 confirmed with a conditional write. Used by the EC2-event
 * function and by the sweep alike.
 *
 * Concurrency: before its first EC2 mutation an invocation claims the node with a lease written
 * conditionally on the version it read; any other invocation that sees an unexpired lease backs off
 * (`busy`). So twenty copies of one event yield one allocator, and AssignPrivateIpAddresses (which
 * is not idempotent) is never called twice for one need. A crashed holder's lease expires and the
 * next invocation re-derives everything from EC2: attached ENIs by Describe, a created but
 * unattached ENI by our instance tag (adopted, never duplicated).
 */

export interface AllocationSettings {
  readonly clusterName: string;
  readonly clusterTagValues: readonly string[];
  readonly nodeNaming: 'private-dns-name' | 'instance-id';
  /** Knobs for nodes whose CiliumNode does not exist yet (or does not set them). */
  readonly defaultKnobs: NodeKnobs;
  readonly prefixDelegationEnabled: boolean;
  /** User-configured tags for new ENIs (our ownership tags are always added on top). */
  readonly eniTags: Readonly<Record<string, string>>;
  /** How long a claim on a node lasts; longer than one invocation can run. */
  readonly leaseDurationMs: number;
  /** How long after our own mutation a disagreeing Describe is not trusted. */
  readonly consistencyGraceMs: number;
  /** Plan/act rounds in one invocation (one ENI or one assign per round). */
  readonly maxRoundsPerInvocation: number;
  /** Attach attempts at successive device indexes after index conflicts (cilium: 5). */
  readonly maxAttachAttempts: number;
  /**
   * The stack is paused (`eni-ipam:paused`: the hand-over from cilium-operator, or the rollback to
   * it): nothing is read or written for the node; the outcome says so. Default false.
   */
  readonly paused?: boolean;
}

export interface AllocationDependencies {
  readonly store: NodeRecordStore;
  readonly ec2: Ec2NetworkPort;
  readonly ciliumNodes: CiliumNodeReader;
  readonly settings: AllocationSettings;
  readonly clock: () => number;
  readonly log: Log;
  /** Identifies this invocation as a lease holder (e.g. the Lambda request id). */
  readonly invocationId: string;
  /**
   * The knobs for fields the node's CiliumNode does not set (before its agent registers): the
   * cluster's `cilium-config` over the stack's defaults, read at most once per invocation
   * (`preAgentKnobsForInvocation`). Absent: `settings.defaultKnobs`.
   */
  readonly preAgentKnobs?: () => Promise<NodeKnobs>;
  /**
   * The node table's generation (`<table>@<creation time>`, read once per container with
   * DescribeTable): every record this invocation writes is stamped with it, saying that its content
   * was observed from EC2 for this table (`NodeRecord.reconciledInTable`). Absent: no stamp is
   * written (the recorded one is kept).
   */
  readonly tableGeneration?: () => Promise<string>;
  /**
   * Publishes a record version this invocation wrote to the CiliumNode, starting from the
   * CiliumNode the observation read (a `syncNode` with a `SyncStart`): the new addresses are usable
   * without waiting for the stream's sync, which stays the guarantee (it then finds nothing to do).
   * Absent: only the stream's sync publishes. A failure is logged, never thrown.
   */
  readonly publish?: (record: NodeRecord, ciliumNode: CiliumNode | undefined) => Promise<unknown>;
}

export type AllocationOutcome =
  | {
      readonly kind: 'ignored';
      readonly reason: 'unknown-instance' | 'not-in-cluster' | 'not-running' | 'not-active' | 'paused';
      readonly detail: string;
    }
  | { readonly kind: 'busy'; readonly leaseHolder: string }
  | {
      readonly kind: 'reconciled';
      readonly recordVersion: number | undefined;
      readonly actions: readonly string[];
      readonly neededIps: number;
      readonly blocked?: RecordedError;
      /** The agent's protocol as observed (absent without a trusted CiliumNode). */
      readonly agentProtocol?: AgentDemand['protocol'];
      /** Set when this observation changed the recorded protocol (an upgrade or a downgrade). */
      readonly protocolTransition?: { readonly from: string; readonly to: AgentDemand['protocol'] };
      /** The EC2 action IAM denied during this invocation (`UnauthorizedOperation`), if any. */
      readonly deniedAction?: string;
    };

/** A failed attach whose cleanup (deleting the fresh ENI) may have failed too; both are kept. */
export class EniAttachError extends Error {
  override readonly name = 'EniAttachError';
  constructor(
    readonly eniId: string,
    readonly attachError: unknown,
    readonly cleanupError: unknown,
  ) {
    super(
      `unable to attach ENI ${eniId}: ${errorMessage(attachError)}` +
        (cleanupError === undefined
          ? '; the ENI was deleted'
          : `; deleting it failed too (${errorMessage(cleanupError)}), garbage collection will remove it`),
      { cause: attachError },
    );
  }
}

const MAX_RECORD_CONFLICT_RETRIES = 3;

/**
 * After IAM denied one of our calls on a node, how long its allocation makes no further EC2
 * mutation: the same call cannot succeed before someone changes the policy, and retrying it on
 * every sweep would only repeat the denial (the node shows the error meanwhile).
 */
export const UNAUTHORIZED_RETRY_DELAY_MS = 10 * 60_000;

/**
 * `listedInstance`: the instance as the caller just read it from DescribeInstances (the sweep's
 * cluster listing), so it is not described again; re-planning after a conflict describes it afresh.
 */
export async function allocateNode(
  instanceId: string,
  deps: AllocationDependencies,
  listedInstance?: InstanceView,
): Promise<AllocationOutcome> {
  if (deps.settings.paused) {
    return ignored(
      'paused',
      `the stack is paused; instance ${instanceId} is left to its current allocator`,
      deps,
    );
  }
  for (let attempt = 1; ; attempt++) {
    try {
      return await allocateOnce(instanceId, deps, attempt === 1 ? listedInstance : undefined);
    } catch (error) {
      // Somebody wrote the record between our read and our write: re-read and re-plan, unless
      // the conflicting write was another invocation's claim on the node (then it does the work).
      if (!(error instanceof VersionConflictError) || attempt >= MAX_RECORD_CONFLICT_RETRIES) throw error;
      if (isLeasedByOther(error.current, deps.invocationId, deps.clock())) {
        return { kind: 'busy', leaseHolder: error.current?.lease?.holder ?? '' };
      }
      deps.log.info('node record changed under us; re-planning', { instanceId, attempt });
    }
  }
}

interface Observation {
  readonly instance: InstanceView;
  readonly nodeName: string;
  readonly knobs: NodeKnobs;
  /** The agent's demand (protocol and used count); `undefined` without a trusted CiliumNode. */
  readonly demand: AgentDemand | undefined;
  readonly usedIpCount: number;
  readonly vpc: VpcView;
  readonly limits: InstanceLimits | undefined;
  readonly subnets: SubnetView[];
  readonly securityGroups: readonly SecurityGroupView[];
  /** The CiliumNode as read (foreign or not), for publishing what this invocation writes. */
  readonly ciliumNode: CiliumNode | undefined;
  /**
   * Whether an ENI created for this instance may sit detached: the record keeps a claim its holder
   * never released (a crash between create and the record write) or an error (an attach whose
   * cleanup failed). Only then is EC2 asked for such ENIs before a create; a node without a record
   * has never had a create (the claim is written before the first one).
   */
  readonly mayHaveOrphanEnis: boolean;
  /**
   * CIDRs the record says this allocator released (`ip/32` of released excess marks, tombstoned
   * multi-pool CIDRs): a Describe that still lists one lags, and it is never adopted back.
   */
  readonly releasedCidrs: ReadonlySet<string>;
}

async function allocateOnce(
  instanceId: string,
  deps: AllocationDependencies,
  listedInstance: InstanceView | undefined,
): Promise<AllocationOutcome> {
  const { ec2, store, settings, log } = deps;
  const instance =
    listedInstance?.id === instanceId ? listedInstance : await ec2.describeInstance(instanceId);
  if (!instance) {
    return ignored('unknown-instance', `EC2 does not know instance ${instanceId}`, deps);
  }
  if (!isClusterMember(instance, settings.clusterName, settings.clusterTagValues)) {
    return ignored(
      'not-in-cluster',
      `instance ${instanceId} is not tagged as a member of ${settings.clusterName}`,
      deps,
    );
  }
  if (instance.state !== 'running') {
    return ignored('not-running', `instance ${instanceId} is ${instance.state}, not running`, deps);
  }

  // Everything else is read at once: the sequential round trips from the event to a usable pool
  // are what a node waits for.
  const [storedRecord, observed, observedEnis, table] = await Promise.all([
    store.get(instanceId),
    observe(instance, deps),
    ec2.describeAttachedEnis(instanceId, instance.vpcId),
    deps.tableGeneration?.(),
  ]);
  const observation: Observation = {
    ...observed,
    mayHaveOrphanEnis: storedRecord?.lease !== undefined || storedRecord?.lastError !== undefined,
    releasedCidrs: releasedCidrsOf(storedRecord),
  };
  let record = storedRecord;
  if (record && record.lifecycle !== 'active') {
    return ignored('not-active', `node ${instanceId} is ${record.lifecycle}; no new allocation`, deps);
  }
  if (isLeasedByOther(record, deps.invocationId, deps.clock())) {
    log.info('another invocation holds the node; backing off', { instanceId, lease: record?.lease });
    return { kind: 'busy', leaseHolder: record?.lease?.holder ?? '' };
  }
  // A CIDR released from a multi-pool node stays tombstoned for a while: a Describe still listing it lags.
  const tombstoned = tombstonedCidrs(record);
  let enis = withoutTombstoned(
    mergeObservedEnis(record?.enis ?? [], observedEnis, deps.clock(), settings.consistencyGraceMs),
    tombstoned,
  );
  /** Tombstoned CIDRs EC2 just assigned to us again (the response is proof): their tombstones go. */
  const reassigned = new Set<string>();
  const protocolTransition = transitionOf(record?.agentProtocol, observation.demand);
  if (protocolTransition) {
    log.info('agent IPAM protocol changed', {
      instanceId,
      nodeName: observation.nodeName,
      ...protocolTransition,
    });
  }

  const actions: string[] = [];
  const refusals: SubnetRefusals = {
    failedSubnetIds: [],
    prefixRefusedSubnetIds: [],
    ipv6RefusedSubnetIds: [],
    fullEniIds: [],
  };
  let blocked: RecordedError | undefined = recentDenial(record, deps.clock());
  let deniedAction: string | undefined;
  let leased = false;
  let unrecordedChanges = false;
  const content = (lease: boolean): NodeRecordContent => ({
    instance,
    nodeName: observation.nodeName,
    vpc: observation.vpc,
    enis,
    knobs: observation.knobs,
    prefixDelegation: demandFor(observation, enis, settings).prefixDelegation,
    ...(observation.demand ? { agentProtocol: observation.demand.protocol } : {}),
    // Every write below records what this invocation observed from EC2 (or EC2's responses to it),
    // so it is reconciled in this table; a restored record that differs only in its stamp is
    // rewritten too (`recordWouldChange`), which is what lets the sync publish it.
    ...(table === undefined ? {} : { reconciledInTable: table }),
    ...(reassigned.size > 0 ? { cidrReleases: withoutEntries(record?.cidrReleases, reassigned) } : {}),
    ...(blocked ? { lastError: blocked } : {}),
    ...(lease
      ? { lease: { holder: deps.invocationId, expiresAtEpochMs: deps.clock() + settings.leaseDurationMs } }
      : {}),
  });
  const write = async (lease: boolean) => {
    const next = nextNodeRecord(record, content(lease), deps.clock());
    await store.put(next, record?.version);
    record = next;
  };

  try {
    const rounds = blocked === undefined ? settings.maxRoundsPerInvocation : 0;
    for (let round = 0; round < rounds; round++) {
      const repair = enisMissingDeleteOnTermination(
        enis,
        observation.knobs,
        instanceId,
        settings.clusterName,
      );
      const plan = planAllocation({
        instance,
        limits: observation.limits,
        enis,
        subnets: observation.subnets,
        securityGroups: observation.securityGroups,
        knobs: observation.knobs,
        usedIpCount: observation.usedIpCount,
        wantsIpv6: observation.demand?.wantsIpv6,
        prefixDelegationEnabled: settings.prefixDelegationEnabled,
        excludedSubnetIds: refusals.failedSubnetIds,
        prefixRefusedSubnetIds: refusals.prefixRefusedSubnetIds,
        ipv6RefusedSubnetIds: refusals.ipv6RefusedSubnetIds,
        fullEniIds: refusals.fullEniIds,
      });
      if (plan.kind === 'blocked') {
        blocked = { code: plan.code, message: plan.message, atEpochMs: deps.clock() };
        log.warn('allocation blocked', { instanceId, code: plan.code, message: plan.message });
      }
      if ((plan.kind === 'none' || plan.kind === 'blocked') && repair === undefined) break;

      if (!leased) {
        await write(true); // the claim: conditional on the version we read
        leased = true;
      } else if (unrecordedChanges) {
        // Progress: what EC2 confirmed so far is durable before the next mutation. After the
        // last one, the write that releases the claim records it.
        await write(true);
        unrecordedChanges = false;
      }
      if (repair) {
        await ec2.setDeleteOnTermination(repair.id, repair.attachmentId, true);
        enis = withEni(enis, { ...repair, deleteOnTermination: true, lastMutatedAtEpochMs: deps.clock() });
        actions.push(`repair-delete-on-termination:${repair.id}`);
      } else if (plan.kind === 'assign') {
        logPrefixFallback(plan, refusals.prefixRefusedSubnetIds, instanceId, log);
        const assigned = await assignPlanned(plan, enis, observation, refusals, deps);
        if (assigned) {
          for (const cidr of assigned.cidrs) if (tombstoned.has(cidr)) reassigned.add(cidr);
          enis = withEni(enis, assigned.eni);
          actions.push(...assigned.actions);
        }
      } else if (plan.kind === 'create-eni') {
        logPrefixFallback(plan, refusals.prefixRefusedSubnetIds, instanceId, log);
        const created = await createAndAttachEni(
          plan,
          enis,
          observation,
          refusals,
          record?.version ?? 0,
          deps,
        );
        if (created) {
          enis = withEni(enis, created);
          actions.push(`create-eni:${created.id}:${created.deviceIndex}`);
        }
      }
      unrecordedChanges = true;
    }
  } catch (error) {
    const denied = deniedCall(error);
    blocked = denied
      ? { code: 'UnauthorizedOperation', message: describeDenial(denied), atEpochMs: deps.clock() }
      : { code: errorCode(error), message: errorMessage(error), atEpochMs: deps.clock() };
    if (denied === undefined) throw error;
    deniedAction = denied.action ?? 'unknown';
    log.error('EC2 denied a call to our role; no further mutation on this node for a while', {
      instanceId,
      action: deniedAction,
      retryAfterMs: UNAUTHORIZED_RETRY_DELAY_MS,
      message: blocked.message,
    });
  } finally {
    if (leased) {
      // Release the claim, keeping everything EC2 confirmed; on a conflict the lease simply expires.
      await write(false).catch((error: unknown) =>
        log.error('could not release the node lease; it will expire', {
          instanceId,
          error: errorMessage(error),
        }),
      );
    }
  }

  // Nothing was mutated: write only when the observation differs from the record (a new node,
  // drift, changed knobs, a new or cleared error), so a no-op invocation wakes no sync.
  if (!leased && recordWouldChange(record, content(false))) await write(false);
  if (record !== undefined && record !== storedRecord) await publish(record, observation.ciliumNode, deps);
  return {
    kind: 'reconciled',
    recordVersion: record?.version,
    actions,
    neededIps: demandFor(observation, enis, settings).neededIps,
    ...(blocked ? { blocked } : {}),
    ...(observation.demand ? { agentProtocol: observation.demand.protocol } : {}),
    ...(protocolTransition ? { protocolTransition } : {}),
    ...(deniedAction === undefined ? {} : { deniedAction }),
  };
}

/** The change from the recorded protocol to the observed one; `none` stands for "never observed". */
function transitionOf(
  recorded: AgentDemand['protocol'] | undefined,
  observed: AgentDemand | undefined,
): { from: string; to: AgentDemand['protocol'] } | undefined {
  if (observed === undefined || observed.protocol === recorded) return undefined;
  return { from: recorded ?? 'none', to: observed.protocol };
}

/** The node's recorded IAM denial while it is younger than `UNAUTHORIZED_RETRY_DELAY_MS`. */
function recentDenial(record: NodeRecord | undefined, nowEpochMs: number): RecordedError | undefined {
  const error = record?.lastError;
  if (error?.code !== 'UnauthorizedOperation') return undefined;
  return nowEpochMs - error.atEpochMs < UNAUTHORIZED_RETRY_DELAY_MS ? error : undefined;
}

/** The UnauthorizedOperation behind a failure: of the call itself, or of a fresh ENI's attach. */
function deniedCall(error: unknown): Ec2Failure | undefined {
  const candidate = error instanceof EniAttachError ? error.attachError : error;
  return isEc2Failure(candidate, 'unauthorized') ? candidate : undefined;
}

async function observe(
  instance: InstanceView,
  deps: AllocationDependencies,
): Promise<Omit<Observation, 'mayHaveOrphanEnis' | 'releasedCidrs'>> {
  const { ec2, settings, log } = deps;
  const nodeName = nodeNameFor(instance, settings.nodeNaming);
  const [ciliumNode, vpc, limits, subnets, defaultKnobs] = await Promise.all([
    deps.ciliumNodes.get(nodeName),
    ec2.describeVpc(instance.vpcId),
    ec2.describeInstanceLimits(instance.instanceType),
    ec2.describeSubnets(instance.vpcId, instance.availabilityZone),
    deps.preAgentKnobs?.() ?? settings.defaultKnobs,
  ]);
  const ownerOfCiliumNode = ciliumNode ? instanceIdOfCiliumNode(ciliumNode) : undefined;
  const foreign = ownerOfCiliumNode !== undefined && ownerOfCiliumNode !== instance.id;
  if (foreign) {
    log.error('CiliumNode belongs to another instance; using stack defaults for this node', {
      instanceId: instance.id,
      nodeName,
      ciliumNodeInstanceId: ownerOfCiliumNode,
    });
  }
  const trusted = foreign ? undefined : ciliumNode;
  const knobs = knobsFromCiliumNode(trusted, defaultKnobs);
  const demand = trusted ? agentDemandOf(trusted) : undefined;
  // Security groups by tag are the one lookup that depends on the knobs (and the rarest).
  const securityGroups =
    Object.keys(knobs.securityGroupTags).length > 0 && knobs.securityGroups.length === 0
      ? await ec2.describeSecurityGroups(instance.vpcId)
      : [];
  return {
    instance,
    nodeName,
    knobs,
    demand,
    usedIpCount: demand?.usedIpCount ?? 0,
    vpc,
    limits,
    subnets,
    securityGroups,
    ciliumNode,
  };
}

async function publish(
  record: NodeRecord,
  ciliumNode: CiliumNode | undefined,
  deps: AllocationDependencies,
): Promise<void> {
  if (!deps.publish) return;
  await deps.publish(record, ciliumNode).catch((error: unknown) =>
    deps.log.warn('could not publish the record version; the stream sync will', {
      instanceId: record.instanceId,
      recordVersion: record.version,
      error: errorMessage(error),
    }),
  );
}

function demandFor(observation: Observation, enis: readonly EniState[], settings: AllocationSettings) {
  return computePoolDemand({
    limits: observation.limits,
    enis,
    knobs: observation.knobs,
    usedIpCount: observation.usedIpCount,
    prefixDelegationEnabled: settings.prefixDelegationEnabled,
  });
}

/**
 * An ENI we created for this instance whose attachment lacks delete-on-termination although the
 * node wants it: what a crash between attach and ModifyNetworkInterfaceAttribute leaves behind.
 */
function enisMissingDeleteOnTermination(
  enis: readonly EniState[],
  knobs: NodeKnobs,
  instanceId: string,
  clusterName: string,
): EniState | undefined {
  if (!knobs.deleteOnTermination) return undefined;
  return enis.find(
    (eni) =>
      eni.deviceIndex > 0 &&
      !eni.deleteOnTermination &&
      isOurs(eni.tags, clusterName) &&
      eni.tags[ENI_TAG_KEYS.instanceId] === instanceId,
  );
}

type AssignPlan = Extract<AllocationPlan, { kind: 'assign' }>;
type CreatePlan = Extract<AllocationPlan, { kind: 'create-eni' }>;

/** Says so when the planner fell back from /28 prefixes to single IPs (cilium PRs #20822, #31016). */
function logPrefixFallback(
  plan: AssignPlan | CreatePlan,
  prefixRefusedSubnetIds: readonly string[],
  instanceId: string,
  log: Log,
): void {
  if (!plan.prefixFallback) return;
  log.warn('no suitable subnet can give a /28 prefix; falling back to single IPs', {
    instanceId,
    plan: plan.kind,
    prefixRefusedSubnetIds: [...prefixRefusedSubnetIds],
  });
}

/**
 * Subnets that refused during this invocation, shared by every round so the planner routes around
 * them: `failedSubnetIds` had too few free addresses (InsufficientFreeAddressesInSubnet),
 * `prefixRefusedSubnetIds` had no free aligned /28 (InsufficientCidrBlocks, a fragmented subnet)
 * though they may still give single IPs, and `ipv6RefusedSubnetIds` refused a /80 (`ipv6-refused`)
 * though they still give IPv4. All are forgotten at the end of the invocation: subnets get
 * addresses back, defragment and gain IPv6 blocks, so the next invocation asks again.
 */
interface SubnetRefusals {
  readonly failedSubnetIds: string[];
  readonly prefixRefusedSubnetIds: string[];
  readonly ipv6RefusedSubnetIds: string[];
  /** ENIs that refused IPv4 addresses for their own limit (`eni-address-limit`). */
  readonly fullEniIds: string[];
}

/**
 * An `assign` plan carried out: its IPv4 addresses (`assignToEni`), then its /80
 * (`assignIpv6PrefixToEni`). IPv4 goes first, unlike cilium (which asks for the /80 first and
 * stops at its failure): a refused /80 must not cost the node the IPv4 addresses it needs anyway.
 * `cidrs` are the IPv4 CIDRs EC2 assigned (for tombstones); `undefined` when EC2 gave nothing.
 */
async function assignPlanned(
  plan: AssignPlan,
  enis: readonly EniState[],
  observation: Observation,
  refusals: SubnetRefusals,
  deps: AllocationDependencies,
): Promise<{ eni: EniState; actions: string[]; cidrs: string[] } | undefined> {
  const planned = enis.find((candidate) => candidate.id === plan.eniId);
  if (!planned) throw new Error(`planned ENI ${plan.eniId} is not attached to ${observation.instance.id}`);
  let eni = planned;
  const actions: string[] = [];
  const cidrs: string[] = [];
  if ((plan.ipCount ?? 0) > 0 || (plan.prefixCount ?? 0) > 0) {
    const assigned = await assignToEni(plan, eni, observation, refusals, deps);
    if (assigned) eni = assigned.eni;
    if (assigned && assigned.count > 0) {
      actions.push(`assign:${plan.eniId}:${assigned.count}`);
      cidrs.push(...assigned.ips.map((ip) => `${ip}/32`), ...assigned.prefixes);
    }
  }
  if (plan.ipv6PrefixCount !== undefined) {
    const withPrefix = await assignIpv6PrefixToEni(eni, plan.ipv6PrefixCount, refusals, deps);
    if (withPrefix) {
      eni = withPrefix;
      actions.push(`assign-ipv6-prefix:${plan.eniId}`);
    }
  }
  return eni !== planned ? { eni, actions, cidrs } : undefined;
}

/**
 * AssignIpv6Addresses with `Ipv6PrefixCount` on the ENI (cilium `AssignENIIPv6Prefix`). A refusal
 * of the IPv6 part (`ipv6-refused`: the subnet has no IPv6 block after all, the type no room) is
 * remembered for the subnet and nothing is assigned; the planner's next round puts the /80
 * elsewhere or reports `NoDualStackSubnet`. Not idempotent; the node lease makes it run once per need.
 */
async function assignIpv6PrefixToEni(
  eni: EniState,
  prefixCount: number,
  refusals: SubnetRefusals,
  deps: AllocationDependencies,
): Promise<EniState | undefined> {
  let prefixes: string[];
  try {
    prefixes = await deps.ec2.assignIpv6Prefixes(eni.id, prefixCount);
  } catch (error) {
    if (!isEc2Failure(error, 'ipv6-refused')) throw error;
    rememberIpv6Refusal(refusals, eni.subnetId, error, deps);
    return undefined;
  }
  return {
    ...eni,
    ipv6Prefixes: union(eni.ipv6Prefixes ?? [], prefixes),
    lastMutatedAtEpochMs: deps.clock(),
  };
}

function rememberIpv6Refusal(
  refusals: SubnetRefusals,
  subnetId: string,
  error: unknown,
  deps: AllocationDependencies,
): void {
  if (!refusals.ipv6RefusedSubnetIds.includes(subnetId)) refusals.ipv6RefusedSubnetIds.push(subnetId);
  deps.log.warn('EC2 refused the IPv6 /80 in this subnet; planning around it', {
    subnetId,
    error: errorMessage(error),
  });
}

/**
 * AssignPrivateIpAddresses on an existing ENI, exactly as planned (prefixes or single IPs, never
 * both). A refusal is remembered and nothing is assigned: a subnet out of addresses goes to
 * `failedSubnetIds`; a subnet without a free /28 goes to `prefixRefusedSubnetIds`, and the
 * planner's next round decides where the addresses come from instead (prefixes on another ENI or on
 * a new ENI in another subnet first, single IPs only when no suitable subnet can give a /28; see
 * `planAllocation`). Cilium instead retries single IPs on the same ENI at once (§3.5 `AllocateIPs`).
 * Not idempotent (EC2's AssignPrivateIpAddresses is not); the node lease makes it run once per need.
 */
/**
 * The ENI after an assign or an adoption, with the addresses EC2 gave in this call (`count` of
 * them, /28 members counted; 0 for an adoption, which asked EC2 for nothing).
 */
interface EniAddressesOutcome {
  readonly eni: EniState;
  readonly count: number;
  readonly ips: readonly string[];
  readonly prefixes: readonly string[];
}

async function assignToEni(
  plan: AssignPlan,
  eni: EniState,
  observation: Observation,
  refusals: SubnetRefusals,
  deps: AllocationDependencies,
): Promise<EniAddressesOutcome | undefined> {
  const request =
    plan.prefixCount !== undefined ? { prefixCount: plan.prefixCount } : { ipCount: plan.ipCount ?? 0 };
  let assigned: Awaited<ReturnType<Ec2NetworkPort['assignIps']>>;
  try {
    assigned = await deps.ec2.assignIps(eni.id, request);
  } catch (error) {
    if (isEc2Failure(error, 'eni-address-limit'))
      return adoptUnrecordedAddresses(eni, observation, refusals, deps);
    const refusal = classifySubnetRefusal(error, request.prefixCount !== undefined);
    if (refusal === undefined) throw error;
    rememberRefusal(refusals, refusal, eni.subnetId);
    deps.log.warn(refusalMessage(refusal), {
      instanceId: observation.instance.id,
      eniId: eni.id,
      subnetId: eni.subnetId,
    });
    return undefined;
  }
  const count = assigned.ips.length + assigned.prefixes.length * ADDRESSES_PER_IPV4_PREFIX;
  consumeSubnetAddresses(observation.subnets, eni.subnetId, count);
  return {
    eni: {
      ...eni,
      secondaryIps: union(eni.secondaryIps, assigned.ips),
      prefixes: union(eni.prefixes, assigned.prefixes),
      lastMutatedAtEpochMs: deps.clock(),
    },
    count,
    ips: assigned.ips,
    prefixes: assigned.prefixes,
  };
}

/**
 * EC2 refused addresses for the ENI's own limit: it holds addresses our view lacks (given to an
 * invocation that crashed, or whose response was lost, before its record write, while our record of
 * the ENI is the fresher one). Describes the ENI again and adopts what EC2 lists beyond our view,
 * except what the record says we released (a lagging Describe may still list those), so the next
 * round plans with them instead of asking again for what the node already has. When the Describe
 * shows nothing new (it lags too), the ENI counts as full for the rest of the invocation.
 */
async function adoptUnrecordedAddresses(
  eni: EniState,
  observation: Observation,
  refusals: SubnetRefusals,
  deps: AllocationDependencies,
): Promise<EniAddressesOutcome | undefined> {
  const { instance, releasedCidrs } = observation;
  const described = (await deps.ec2.describeAttachedEnis(instance.id, instance.vpcId)).find(
    (candidate) => candidate.id === eni.id,
  );
  const unrecordedIps = (described?.secondaryIps ?? []).filter(
    (ip) => !eni.secondaryIps.includes(ip) && !releasedCidrs.has(`${ip}/32`),
  );
  const unrecordedPrefixes = (described?.prefixes ?? []).filter(
    (prefix) => !eni.prefixes.includes(prefix) && !releasedCidrs.has(prefix),
  );
  deps.log.warn('EC2 says the ENI holds more addresses than our view of it', {
    instanceId: instance.id,
    eniId: eni.id,
    adopted: [...unrecordedIps, ...unrecordedPrefixes],
  });
  if (unrecordedIps.length === 0 && unrecordedPrefixes.length === 0) {
    refusals.fullEniIds.push(eni.id);
    return undefined;
  }
  return {
    eni: {
      ...eni,
      secondaryIps: union(eni.secondaryIps, unrecordedIps),
      prefixes: union(eni.prefixes, unrecordedPrefixes),
      lastMutatedAtEpochMs: deps.clock(),
    },
    count: 0,
    ips: [],
    prefixes: [],
  };
}

/** `ip/32` of every excess IP the record says was released, and every tombstoned multi-pool CIDR. */
function releasedCidrsOf(record: NodeRecord | undefined): Set<string> {
  const released = tombstonedCidrs(record);
  for (const [ip, mark] of Object.entries(record?.excessMarks ?? {})) {
    if (mark.state === 'released') released.add(`${ip}/32`);
  }
  return released;
}

type SubnetRefusal = 'out-of-addresses' | 'no-free-prefix';

/**
 * Which refusal an EC2 failure is, or `undefined` for any other error (rethrown by the caller).
 * `prefix-capacity` covers both answers cilium matches (`InsufficientCidrBlocks`, and
 * `InvalidParameterValue` "There aren't sufficient free Ipv4 addresses or prefixes"); for a request
 * of single IPs the latter can only mean the subnet is out of addresses.
 */
function classifySubnetRefusal(error: unknown, requestedPrefixes: boolean): SubnetRefusal | undefined {
  if (isEc2Failure(error, 'subnet-full')) return 'out-of-addresses';
  if (isEc2Failure(error, 'prefix-capacity'))
    return requestedPrefixes ? 'no-free-prefix' : 'out-of-addresses';
  return undefined;
}

function rememberRefusal(refusals: SubnetRefusals, refusal: SubnetRefusal, subnetId: string): void {
  const list = refusal === 'no-free-prefix' ? refusals.prefixRefusedSubnetIds : refusals.failedSubnetIds;
  if (!list.includes(subnetId)) list.push(subnetId);
}

function refusalMessage(refusal: SubnetRefusal): string {
  return refusal === 'no-free-prefix'
    ? 'subnet has no free /28 block; planning around it'
    : 'subnet out of addresses; planning around it';
}

/**
 * A new ENI, cilium's lifecycle: create (IPs and tags in one call, deterministic ClientToken) or
 * adopt one a crashed invocation created; attach, moving to the next free device index on a
 * conflict (bounded); set delete-on-termination. If attaching fails, the fresh ENI is deleted and
 * both errors are kept apart.
 */
async function createAndAttachEni(
  plan: CreatePlan,
  enis: readonly EniState[],
  observation: Observation,
  refusals: SubnetRefusals,
  recordVersion: number,
  deps: AllocationDependencies,
): Promise<EniState | undefined> {
  const { ec2, log } = deps;
  const instanceId = observation.instance.id;

  const orphans = observation.mayHaveOrphanEnis ? await ec2.findDetachedEnisCreatedFor(instanceId) : [];
  let eni: DetachedEni | undefined = orphans.find((orphan) => orphan.status === 'available');
  if (eni) {
    log.info('adopting an ENI created for this instance but never attached', { instanceId, eniId: eni.id });
  } else {
    eni = await createInFirstSubnetWithRoom(plan, observation, refusals, recordVersion, deps);
    if (!eni) return undefined;
  }

  const { attachmentId, deviceIndex, attachError } = await attachAtFreeIndex(
    eni.id,
    plan.deviceIndex,
    enis,
    observation,
    deps,
  );
  if (attachmentId === undefined) {
    let cleanupError: unknown;
    await ec2.deleteEni(eni.id).catch((error: unknown) => {
      cleanupError = error;
    });
    if (isEc2Failure(attachError, 'attachment-limit')) {
      log.warn('instance is out of interface slots', { instanceId });
    }
    throw new EniAttachError(eni.id, attachError, cleanupError);
  }

  let attached = attachedEniState(eni, deviceIndex, attachmentId, observation, deps.clock());
  if (plan.deleteOnTermination) {
    const eniId = eni.id;
    const attachment = attachmentId;
    // Failing here leaves an attached ENI without the flag: it is recorded as such, and the next
    // round or invocation repairs it (deleting an attached ENI, as cilium tries, cannot succeed).
    await ec2.setDeleteOnTermination(eniId, attachment, true, { justAttached: true }).then(
      () => {
        attached = { ...attached, deleteOnTermination: true };
      },
      (error: unknown) =>
        log.error('could not set delete-on-termination; will retry', {
          instanceId,
          eniId,
          error: errorMessage(error),
        }),
    );
  }
  return attached;
}

/**
 * Attaches a fresh ENI at `deviceIndex`, moving to the next free index when EC2 says the index is
 * taken, at most `maxAttachAttempts` times: the attachment and its index, or the last failure.
 */
async function attachAtFreeIndex(
  eniId: string,
  firstDeviceIndex: number,
  enis: readonly EniState[],
  observation: Observation,
  deps: AllocationDependencies,
): Promise<{ attachmentId?: string; deviceIndex: number; attachError?: unknown }> {
  const instanceId = observation.instance.id;
  let deviceIndex = firstDeviceIndex;
  let attachError: unknown;
  const maxInterfaces = observation.limits?.maxInterfaces ?? deviceIndex + 1;
  for (let attempt = 1; attempt <= deps.settings.maxAttachAttempts; attempt++) {
    try {
      // Created or adopted moments ago: a NotFound is EC2 catching up, which the adapter waits out.
      const attachmentId = await deps.ec2.attachEni(eniId, instanceId, deviceIndex, { justCreated: true });
      return { attachmentId, deviceIndex };
    } catch (error) {
      attachError = error;
      if (!isEc2Failure(error, 'device-index-taken')) break;
      const next = nextFreeIndexAfter(enis, deviceIndex, maxInterfaces);
      deps.log.warn('device index taken; retrying at the next free index', { instanceId, deviceIndex, next });
      if (next === undefined) break;
      deviceIndex = next;
    }
  }
  return { deviceIndex, attachError };
}

/** The ENI as EC2's create and attach answers confirmed it (delete-on-termination not set yet). */
function attachedEniState(
  eni: DetachedEni,
  deviceIndex: number,
  attachmentId: string,
  observation: Observation,
  nowEpochMs: number,
): EniState {
  const subnet = observation.subnets.find((candidate) => candidate.id === eni.subnetId);
  return {
    id: eni.id,
    mac: eni.mac,
    deviceIndex,
    attachmentId,
    deleteOnTermination: false,
    primaryIp: eni.primaryIp,
    secondaryIps: eni.secondaryIps,
    prefixes: eni.prefixes,
    ...(eni.ipv6Prefixes ? { ipv6Prefixes: eni.ipv6Prefixes } : {}),
    subnetId: eni.subnetId,
    subnetCidr: subnet?.cidr ?? '',
    securityGroupIds: eni.securityGroupIds,
    tags: eni.tags,
    description: eni.description,
    lastMutatedAtEpochMs: nowEpochMs,
  };
}

/**
 * CreateNetworkInterface in the plan's first candidate subnet that takes it, with the plan's
 * addresses (prefixes or single IPs, never both, and the plan's /80). A subnet that refuses is remembered
 * (`SubnetRefusals`) and the next candidate is tried: with prefixes, every suitable subnet is
 * asked for a /28 before anything falls back (cilium creates in ONE subnet and retries it once
 * without prefixes, #46644). When every candidate refused, nothing is created and the planner's
 * next round decides: a fallback to single IPs (cilium PRs #20822, #31016), or another subnet.
 * Idempotent per ClientToken; a refused create leaves no token behind, so the same token may be
 * offered to the next subnet.
 */
async function createInFirstSubnetWithRoom(
  plan: CreatePlan,
  observation: Observation,
  refusals: SubnetRefusals,
  recordVersion: number,
  deps: AllocationDependencies,
): Promise<DetachedEni | undefined> {
  const instanceId = observation.instance.id;
  const requestsPrefixes = plan.prefixCount !== undefined;
  const addresses = {
    ...(requestsPrefixes ? { prefixCount: plan.prefixCount } : { ipCount: plan.ipCount ?? 0 }),
    ...(plan.ipv6PrefixCount === undefined ? {} : { ipv6PrefixCount: plan.ipv6PrefixCount }),
  };
  for (const subnetId of plan.subnetCandidates) {
    if (refusals.failedSubnetIds.includes(subnetId)) continue;
    if (requestsPrefixes && refusals.prefixRefusedSubnetIds.includes(subnetId)) continue;
    try {
      const eni = await deps.ec2.createEni({
        instanceId,
        subnetId,
        securityGroupIds: plan.securityGroupIds,
        description: plan.description,
        ...addresses,
        tags: tagsForNewEni(deps.settings.clusterName, instanceId, deps.settings.eniTags, {
          [ENI_TAG_KEYS.createdAt]: String(deps.clock()),
        }),
        // The fallback to single IPs is a different request from the prefixes planned before it:
        // never the same token for both.
        clientToken: eniClientToken({
          instanceId,
          deviceIndex: plan.deviceIndex,
          recordVersion,
          attempt: plan.prefixFallback ? 1 : 0,
        }),
      });
      consumeSubnetAddresses(
        observation.subnets,
        subnetId,
        1 + eni.secondaryIps.length + eni.prefixes.length * ADDRESSES_PER_IPV4_PREFIX,
      );
      return eni;
    } catch (error) {
      rememberCreateRefusal(error, plan, { instanceId, subnetId }, refusals, deps);
    }
  }
  return undefined;
}

/**
 * Remembers why a subnet refused a create, so the next candidate (or the planner's next round)
 * goes elsewhere: out of addresses or of /28s (`classifySubnetRefusal`), or, for a create with a
 * /80, the IPv6 part (the next round creates without it there, or with it in another subnet).
 * Rethrows any other error.
 */
function rememberCreateRefusal(
  error: unknown,
  plan: CreatePlan,
  where: { readonly instanceId: string; readonly subnetId: string },
  refusals: SubnetRefusals,
  deps: AllocationDependencies,
): void {
  const refusal = classifySubnetRefusal(error, plan.prefixCount !== undefined);
  if (refusal !== undefined) {
    rememberRefusal(refusals, refusal, where.subnetId);
    deps.log.warn(`${refusalMessage(refusal)}; trying the next candidate`, where);
    return;
  }
  if (plan.ipv6PrefixCount === undefined || !isEc2Failure(error, 'ipv6-refused')) throw error;
  rememberIpv6Refusal(refusals, where.subnetId, error, deps);
}

function consumeSubnetAddresses(subnets: SubnetView[], subnetId: string, addresses: number): void {
  const index = subnets.findIndex((subnet) => subnet.id === subnetId);
  const subnet = subnets[index];
  if (subnet) {
    subnets[index] = { ...subnet, availableAddresses: Math.max(subnet.availableAddresses - addresses, 0) };
  }
}

function withoutEntries(
  releases: Readonly<Record<string, CidrRelease>> | undefined,
  cidrs: ReadonlySet<string>,
): Record<string, CidrRelease> {
  return Object.fromEntries(Object.entries(releases ?? {}).filter(([cidr]) => !cidrs.has(cidr)));
}

function union(existing: readonly string[], added: readonly string[]): string[] {
  return [...new Set([...existing, ...added])];
}

function ignored(
  reason: 'unknown-instance' | 'not-in-cluster' | 'not-running' | 'not-active' | 'paused',
  detail: string,
  deps: AllocationDependencies,
): AllocationOutcome {
  deps.log.info('not allocating', { reason, detail });
  return { kind: 'ignored', reason, detail };
}

function errorCode(error: unknown): string {
  if (error && typeof error === 'object' && 'code' in error && typeof error.code === 'string')
    return error.code;
  return error instanceof Error ? error.name : 'Error';
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
