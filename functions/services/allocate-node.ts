import {
  isAttachmentLimit,
  isDeviceIndexConflict,
  isPrefixCapacity,
  isSubnetFull,
} from '../aws/ec2-errors.ts';
import { retryWhileNotFound, type Sleep } from '../aws/ec2-retry.ts';
import { ENI_TAG_KEYS, isOurs, tagsForNewEni } from '../aws/eni-tags.ts';
import { type AllocationPlan, computePoolDemand, planAllocation } from '../core/allocation-plan.ts';
import { eniClientToken } from '../core/client-token.ts';
import { isClusterMember, nodeNameFor } from '../core/cluster-membership.ts';
import { nextFreeIndexAfter } from '../core/device-index.ts';
import { VersionConflictError } from '../core/errors.ts';
import { instanceIdOfCiliumNode, knobsFromCiliumNode, usedIps } from '../core/knobs.ts';
import type {
  EniState,
  InstanceLimits,
  InstanceView,
  NodeKnobs,
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
}

export interface AllocationDependencies {
  readonly store: NodeRecordStore;
  readonly ec2: Ec2NetworkPort;
  readonly ciliumNodes: CiliumNodeReader;
  readonly settings: AllocationSettings;
  readonly clock: () => number;
  readonly log: Log;
  /** Waits between eventual-consistency retries; tests pass a fast one. */
  readonly sleep?: Sleep;
  /** Identifies this invocation as a lease holder (e.g. the Lambda request id). */
  readonly invocationId: string;
}

export type AllocationOutcome =
  | {
      readonly kind: 'ignored';
      readonly reason: 'unknown-instance' | 'not-in-cluster' | 'not-running' | 'not-active';
      readonly detail: string;
    }
  | { readonly kind: 'busy'; readonly leaseHolder: string }
  | {
      readonly kind: 'reconciled';
      readonly recordVersion: number | undefined;
      readonly actions: readonly string[];
      readonly neededIps: number;
      readonly blocked?: RecordedError;
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

export async function allocateNode(
  instanceId: string,
  deps: AllocationDependencies,
): Promise<AllocationOutcome> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await allocateOnce(instanceId, deps);
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
  readonly usedIpCount: number;
  readonly vpc: VpcView;
  readonly limits: InstanceLimits | undefined;
  readonly subnets: SubnetView[];
  readonly securityGroups: readonly SecurityGroupView[];
}

async function allocateOnce(instanceId: string, deps: AllocationDependencies): Promise<AllocationOutcome> {
  const { ec2, store, settings, log } = deps;
  const instance = await ec2.describeInstance(instanceId);
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

  let record = await store.get(instanceId);
  if (record && record.lifecycle !== 'active') {
    return ignored('not-active', `node ${instanceId} is ${record.lifecycle}; no new allocation`, deps);
  }
  if (isLeasedByOther(record, deps.invocationId, deps.clock())) {
    log.info('another invocation holds the node; backing off', { instanceId, lease: record?.lease });
    return { kind: 'busy', leaseHolder: record?.lease?.holder ?? '' };
  }

  const observation = await observe(instance, deps);
  let enis = mergeObservedEnis(
    record?.enis ?? [],
    await ec2.describeAttachedEnis(instanceId, observation.vpc),
    deps.clock(),
    settings.consistencyGraceMs,
  );

  const actions: string[] = [];
  const failedSubnetIds: string[] = [];
  let blocked: RecordedError | undefined;
  let leased = false;
  const content = (lease: boolean): NodeRecordContent => ({
    instance,
    nodeName: observation.nodeName,
    vpc: observation.vpc,
    enis,
    knobs: observation.knobs,
    prefixDelegation: demandFor(observation, enis, settings).prefixDelegation,
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
    for (let round = 0; round < settings.maxRoundsPerInvocation; round++) {
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
        prefixDelegationEnabled: settings.prefixDelegationEnabled,
        excludedSubnetIds: failedSubnetIds,
      });
      if (plan.kind === 'blocked') {
        blocked = { code: plan.code, message: plan.message, atEpochMs: deps.clock() };
        log.warn('allocation blocked', { instanceId, code: plan.code, message: plan.message });
      }
      if ((plan.kind === 'none' || plan.kind === 'blocked') && repair === undefined) break;

      if (!leased) {
        await write(true); // the claim: conditional on the version we read
        leased = true;
      }
      if (repair) {
        await ec2.setDeleteOnTermination(repair.id, repair.attachmentId, true);
        enis = withEni(enis, { ...repair, deleteOnTermination: true, lastMutatedAtEpochMs: deps.clock() });
        actions.push(`repair-delete-on-termination:${repair.id}`);
      } else if (plan.kind === 'assign') {
        const assigned = await assignToEni(plan, enis, observation, failedSubnetIds, deps);
        if (assigned) {
          enis = withEni(enis, assigned.eni);
          actions.push(`assign:${plan.eniId}:${assigned.count}`);
        }
      } else if (plan.kind === 'create-eni') {
        const created = await createAndAttachEni(
          plan,
          enis,
          observation,
          failedSubnetIds,
          record?.version ?? 0,
          deps,
        );
        if (created) {
          enis = withEni(enis, created);
          actions.push(`create-eni:${created.id}:${created.deviceIndex}`);
        }
      }
      if (leased) await write(true); // progress: what EC2 confirmed so far is durable at once
    }
  } catch (error) {
    blocked = { code: errorCode(error), message: errorMessage(error), atEpochMs: deps.clock() };
    throw error;
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
  return {
    kind: 'reconciled',
    recordVersion: record?.version,
    actions,
    neededIps: demandFor(observation, enis, settings).neededIps,
    ...(blocked ? { blocked } : {}),
  };
}

async function observe(instance: InstanceView, deps: AllocationDependencies): Promise<Observation> {
  const { ec2, settings, log } = deps;
  const nodeName = nodeNameFor(instance, settings.nodeNaming);
  const ciliumNode = await deps.ciliumNodes.get(nodeName);
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
  const knobs = knobsFromCiliumNode(trusted, settings.defaultKnobs);
  const [vpc, limits, subnets, securityGroups] = await Promise.all([
    ec2.describeVpc(instance.vpcId),
    ec2.describeInstanceLimits(instance.instanceType),
    ec2.describeSubnets(instance.vpcId, instance.availabilityZone),
    Object.keys(knobs.securityGroupTags).length > 0 && knobs.securityGroups.length === 0
      ? ec2.describeSecurityGroups(instance.vpcId)
      : Promise.resolve([]),
  ]);
  return {
    instance,
    nodeName,
    knobs,
    usedIpCount: usedIps(trusted).length,
    vpc,
    limits,
    subnets,
    securityGroups,
  };
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

/**
 * AssignPrivateIpAddresses on an existing ENI. A subnet out of addresses is remembered for this
 * invocation (the planner then picks another ENI or creates one elsewhere); a subnet out of
 * contiguous /28 blocks falls back to single IPs, as cilium does.
 */
async function assignToEni(
  plan: AssignPlan,
  enis: readonly EniState[],
  observation: Observation,
  failedSubnetIds: string[],
  deps: AllocationDependencies,
): Promise<{ eni: EniState; count: number } | undefined> {
  const eni = enis.find((candidate) => candidate.id === plan.eniId);
  if (!eni) throw new Error(`planned ENI ${plan.eniId} is not attached to ${observation.instance.id}`);
  const request =
    plan.prefixCount !== undefined ? { prefixCount: plan.prefixCount } : { ipCount: plan.ipCount ?? 0 };
  let assigned: Awaited<ReturnType<Ec2NetworkPort['assignIps']>>;
  try {
    assigned = await deps.ec2.assignIps(eni.id, request);
  } catch (error) {
    if (isPrefixCapacity(error) && request.prefixCount !== undefined) {
      deps.log.warn('subnet has no free /28 block; assigning single IPs instead', {
        instanceId: observation.instance.id,
        eniId: eni.id,
        subnetId: eni.subnetId,
      });
      const ipCount = Math.min(plan.neededIps, request.prefixCount * 16);
      assigned = await deps.ec2.assignIps(eni.id, { ipCount: Math.max(ipCount, 1) });
    } else if (isSubnetFull(error)) {
      failedSubnetIds.push(eni.subnetId);
      deps.log.warn('subnet out of addresses', {
        instanceId: observation.instance.id,
        subnetId: eni.subnetId,
      });
      return undefined;
    } else {
      throw error;
    }
  }
  consumeSubnetAddresses(
    observation.subnets,
    eni.subnetId,
    assigned.ips.length + assigned.prefixes.length * 16,
  );
  return {
    eni: {
      ...eni,
      secondaryIps: union(eni.secondaryIps, assigned.ips),
      prefixes: union(eni.prefixes, assigned.prefixes),
      lastMutatedAtEpochMs: deps.clock(),
    },
    count: assigned.ips.length + assigned.prefixes.length * 16,
  };
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
  failedSubnetIds: string[],
  recordVersion: number,
  deps: AllocationDependencies,
): Promise<EniState | undefined> {
  const { ec2, settings, log } = deps;
  const instanceId = observation.instance.id;
  const notFoundRetry = deps.sleep ? { sleep: deps.sleep } : {};

  const orphans = await ec2.findDetachedEnisCreatedFor(instanceId);
  let eni: DetachedEni | undefined = orphans.find((orphan) => orphan.status === 'available');
  if (eni) {
    log.info('adopting an ENI created for this instance but never attached', { instanceId, eniId: eni.id });
  } else {
    eni = await createInFirstSubnetWithRoom(plan, observation, failedSubnetIds, recordVersion, deps);
    if (!eni) return undefined;
  }

  let deviceIndex = plan.deviceIndex;
  let attachmentId: string | undefined;
  let attachError: unknown;
  const maxInterfaces = observation.limits?.maxInterfaces ?? deviceIndex + 1;
  for (let attempt = 1; attempt <= settings.maxAttachAttempts; attempt++) {
    try {
      const eniId = eni.id;
      const index = deviceIndex;
      attachmentId = await retryWhileNotFound(() => ec2.attachEni(eniId, instanceId, index), notFoundRetry);
      break;
    } catch (error) {
      attachError = error;
      if (!isDeviceIndexConflict(error)) break;
      const next = nextFreeIndexAfter(enis, deviceIndex, maxInterfaces);
      log.warn('device index taken; retrying at the next free index', { instanceId, deviceIndex, next });
      if (next === undefined) break;
      deviceIndex = next;
    }
  }
  if (attachmentId === undefined) {
    let cleanupError: unknown;
    await ec2.deleteEni(eni.id).catch((error: unknown) => {
      cleanupError = error;
    });
    if (isAttachmentLimit(attachError)) {
      log.warn('instance is out of interface slots', { instanceId });
    }
    throw new EniAttachError(eni.id, attachError, cleanupError);
  }

  const subnet = observation.subnets.find((candidate) => candidate.id === eni.subnetId);
  let attached: EniState = {
    id: eni.id,
    mac: eni.mac,
    deviceIndex,
    attachmentId,
    deleteOnTermination: false,
    primaryIp: eni.primaryIp,
    secondaryIps: eni.secondaryIps,
    prefixes: eni.prefixes,
    subnetId: eni.subnetId,
    subnetCidr: subnet?.cidr ?? '',
    securityGroupIds: eni.securityGroupIds,
    tags: eni.tags,
    description: eni.description,
    lastMutatedAtEpochMs: deps.clock(),
  };
  if (plan.deleteOnTermination) {
    const eniId = eni.id;
    const attachment = attachmentId;
    // Failing here leaves an attached ENI without the flag: it is recorded as such, and the next
    // round or invocation repairs it (deleting an attached ENI, as cilium tries, cannot succeed).
    await retryWhileNotFound(() => ec2.setDeleteOnTermination(eniId, attachment, true), notFoundRetry).then(
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

async function createInFirstSubnetWithRoom(
  plan: CreatePlan,
  observation: Observation,
  failedSubnetIds: string[],
  recordVersion: number,
  deps: AllocationDependencies,
): Promise<DetachedEni | undefined> {
  const instanceId = observation.instance.id;
  const addressRequests: { ipCount?: number; prefixCount?: number }[] =
    plan.prefixCount !== undefined
      ? [
          { prefixCount: plan.prefixCount },
          { ipCount: Math.min(plan.prefixCount * 16, maxIpsOnNewEni(observation)) },
        ]
      : [{ ipCount: plan.ipCount ?? 0 }];
  // With prefixes, every subnet is tried with prefixes before falling back to single IPs
  // (a fragmented subnet should not push a node off prefix delegation: cilium #46644).
  for (const [attempt, addresses] of addressRequests.entries()) {
    for (const subnetId of plan.subnetCandidates) {
      if (failedSubnetIds.includes(subnetId)) continue;
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
          clientToken: eniClientToken({ instanceId, deviceIndex: plan.deviceIndex, recordVersion, attempt }),
        });
        consumeSubnetAddresses(
          observation.subnets,
          subnetId,
          1 + eni.secondaryIps.length + eni.prefixes.length * 16,
        );
        return eni;
      } catch (error) {
        if (isSubnetFull(error)) {
          failedSubnetIds.push(subnetId);
          deps.log.warn('subnet out of addresses; trying the next candidate', { instanceId, subnetId });
        } else if (isPrefixCapacity(error) && addresses.prefixCount !== undefined) {
          deps.log.warn('subnet has no free /28 block', { instanceId, subnetId });
        } else {
          throw error;
        }
      }
    }
  }
  return undefined;
}

function maxIpsOnNewEni(observation: Observation): number {
  return Math.max((observation.limits?.ipv4PerInterface ?? 2) - 1, 1);
}

function consumeSubnetAddresses(subnets: SubnetView[], subnetId: string, addresses: number): void {
  const index = subnets.findIndex((subnet) => subnet.id === subnetId);
  const subnet = subnets[index];
  if (subnet) {
    subnets[index] = { ...subnet, availableAddresses: Math.max(subnet.availableAddresses - addresses, 0) };
  }
}

function union(existing: readonly string[], added: readonly string[]): string[] {
  return [...new Set([...existing, ...added])];
}

function ignored(
  reason: 'unknown-instance' | 'not-in-cluster' | 'not-running' | 'not-active',
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
