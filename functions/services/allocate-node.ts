import { type AgentDemand, agentDemandOf } from '../core/agent-protocol.ts';
import { releasedCidrsOf } from '../core/allocation-content.ts';
import {
  type AllocationObservation,
  type AllocationState,
  applyStepResult,
  initialAllocationState,
  mayMutate,
  nextAllocationStep,
  poolDemandOf,
  protocolTransitionOf,
  type StepResult,
  UNAUTHORIZED_RETRY_DELAY_MS,
  withBlocked,
} from '../core/allocation-round.ts';
import { tombstonedCidrs, withoutTombstoned } from '../core/cidr-release-plan.ts';
import type { CiliumNode } from '../core/ciliumnode.ts';
import { isClusterMember, nodeNameFor } from '../core/cluster-membership.ts';
import { describeDenial, type Ec2Failure, isEc2Failure } from '../core/ec2-failure.ts';
import { errorMessage } from '../core/errors.ts';
import { instanceIdOfCiliumNode, knobsFromCiliumNode, trustedCiliumNode } from '../core/knobs.ts';
import type { InstanceView, MutationLease, NodeKnobs, NodeRecord, RecordedError } from '../core/model.ts';
import { isLeasedByOther, mergeObservedEnis } from '../core/node-record.ts';
import type { CiliumNodeReader, Ec2NetworkPort, Log, NodeRecordStore } from '../core/ports.ts';
import { AllocationRecorder, type RecorderDependencies } from './allocation-recorder.ts';
import { EniAttachError, executeStep, type StepDependencies } from './allocation-steps.ts';
import { retryLostRaces } from './node-lease.ts';

/**
 * Allocation for one node: observe (EC2, the record, the CiliumNode) into one immutable
 * observation; then rounds of plan (`nextAllocationStep`, pure), act (`executeStep`, EC2 calls
 * only) and apply (`applyStepResult`, pure); record what EC2 confirmed with conditional writes
 * through the node's lease (`NodeLease`). Used by the EC2-event function and by the sweep alike.
 *
 * Concurrency: before its first EC2 mutation an invocation claims the node with a lease written
 * conditionally on the version it read; any other invocation that sees an unexpired lease backs off
 * (`busy`). So twenty copies of one event yield one allocator, and AssignPrivateIpAddresses (which
 * is not idempotent) is never called twice for one need. The lease is short and renewed while its
 * holder works; a crashed holder's lease expires within one lease duration and the next invocation
 * re-derives everything from EC2: attached ENIs by Describe, a created but unattached ENI by our
 * instance tag (adopted, never duplicated).
 */

export interface AllocationSettings {
  readonly clusterName: string;
  readonly clusterTagValues: readonly string[];
  readonly nodeNaming: 'private-dns-name' | 'instance-id';
  /** Knobs for nodes whose CiliumNode does not exist yet (or does not set them). */
  readonly defaultKnobs: NodeKnobs;
  readonly prefixDelegationEnabled: boolean;
  /**
   * How long a claim on a node lasts unless its holder renews it (`NodeLease`: renewed every third
   * of it while the holder works), so a killed holder frees the node within one lease.
   */
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

/**
 * What observing a node reads (`observeNode`): EC2, the record, the CiliumNode and the
 * configuration, and whose lease a record shows.
 */
interface ObserveDependencies {
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
   * (`preAgentKnobsForInvocation`); a deployment that reads no `cilium-config` answers
   * `settings.defaultKnobs`.
   */
  readonly preAgentKnobs: () => Promise<NodeKnobs>;
  /**
   * The node table's generation (`<table>@<creation time>`, read once per container with
   * DescribeTable): every record this invocation writes is stamped with it, saying that its content
   * was observed from EC2 for this table (`NodeRecord.reconciledInTable`). `undefined`: no
   * generation is known, and no stamp is written (the recorded one is kept).
   */
  readonly tableGeneration: () => Promise<string | undefined>;
}

/**
 * An allocation's dependencies: what observing reads (`ObserveDependencies`), what the recorder
 * writes and publishes through (`RecorderDependencies`), and what the steps call
 * (`StepDependencies`); the settings are the allocation's, which each part reads a slice of.
 */
export interface AllocationDependencies extends ObserveDependencies, RecorderDependencies, StepDependencies {
  readonly settings: AllocationSettings;
  /**
   * Publishes a record version this invocation wrote to the CiliumNode, starting from the
   * CiliumNode the observation read (a `syncNode` with a `SyncStart`): the new addresses are usable
   * without waiting for the stream's sync, which stays the guarantee (it then finds nothing to do).
   * One that does nothing leaves the publishing to the stream's sync. A failure is logged, never
   * thrown.
   */
  readonly publish: (record: NodeRecord, ciliumNode: CiliumNode | undefined) => Promise<unknown>;
}

export type AllocationOutcome =
  | {
      readonly kind: 'ignored';
      readonly reason: 'unknown-instance' | 'not-in-cluster' | 'not-running' | 'not-active' | 'paused';
      readonly detail: string;
    }
  | {
      readonly kind: 'busy';
      readonly leaseHolder: string;
      /** When the holder's lease runs out unless it renews it: when to ask again. */
      readonly leaseExpiresAtEpochMs?: number;
    }
  | {
      readonly kind: 'reconciled';
      readonly recordVersion: number | undefined;
      /**
       * Every answer EC2 confirmed, in order (`StepResult`): what was created, assigned, repaired or
       * refused. The metrics count them; nothing parses them back from text.
       */
      readonly results: readonly StepResult[];
      readonly neededIps: number;
      readonly blocked?: RecordedError;
      /** The agent's protocol as observed (absent without a trusted CiliumNode). */
      readonly agentProtocol?: AgentDemand['protocol'];
      /** Set when this observation changed the recorded protocol (an upgrade or a downgrade). */
      readonly protocolTransition?: { readonly from: string; readonly to: AgentDemand['protocol'] };
      /** The EC2 action IAM denied during this invocation (`UnauthorizedOperation`), if any. */
      readonly deniedAction?: string;
    };

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
  return retryLostRaces(
    instanceId,
    (attempt) => allocateOnce(instanceId, deps, attempt === 1 ? listedInstance : undefined),
    { holder: deps, busy: (_holder, lease) => busy(lease) },
  );
}

async function allocateOnce(
  instanceId: string,
  deps: AllocationDependencies,
  listedInstance: InstanceView | undefined,
): Promise<AllocationOutcome> {
  const observed = await observeNode(instanceId, deps, listedInstance);
  if (!('observation' in observed)) return observed;
  const { observation } = observed;
  const recorder = new AllocationRecorder(observation, deps);
  const run = await runRounds(observation, recorder, deps);
  const written = await recorder.finish(run.state);
  const demand = poolDemandOf(observation, run.state);
  const protocolTransition = protocolTransitionOf(observation);
  return {
    kind: 'reconciled',
    recordVersion: (written ?? observation.record)?.version,
    results: run.state.results,
    neededIps: demand.neededIps,
    ...(run.state.blocked ? { blocked: run.state.blocked } : {}),
    ...(observation.demand ? { agentProtocol: observation.demand.protocol } : {}),
    ...(protocolTransition ? { protocolTransition } : {}),
    ...(run.deniedAction === undefined ? {} : { deniedAction: run.deniedAction }),
  };
}

interface RoundsRun {
  readonly state: AllocationState;
  /** The EC2 action IAM denied, which ended the rounds. */
  readonly deniedAction: string | undefined;
}

/**
 * Plan, act and apply, one step per round, until the pool needs nothing, the plan is blocked, a
 * step fails or the rounds run out. What is written and published before each step, and the
 * release that records the rest whether or not a step failed (on a conflict the lease simply
 * expires), is `AllocationRecorder`'s. An IAM denial ends the rounds and is recorded; any other
 * failure is recorded, then thrown.
 */
async function runRounds(
  observation: AllocationObservation,
  recorder: AllocationRecorder,
  deps: AllocationDependencies,
): Promise<RoundsRun> {
  let state = initialAllocationState(observation, deps.clock());
  let deniedAction: string | undefined;
  const confirm = (result: StepResult) => {
    state = applyStepResult(state, result, deps.clock());
  };
  try {
    const rounds = mayMutate(state) ? deps.settings.maxRoundsPerInvocation : 0;
    for (let round = 0; round < rounds; round++) {
      const step = nextAllocationStep(observation, state);
      if (step.kind === 'done') break;
      if (step.kind === 'blocked') {
        state = withBlocked(state, { code: step.code, message: step.message, atEpochMs: deps.clock() });
        deps.log.warn('allocation blocked', {
          instanceId: observation.instance.id,
          code: step.code,
          message: step.message,
        });
        break;
      }
      const recordVersion = await recorder.beforeStep(step, state);
      await executeStep(step, { observation, state, recordVersion }, confirm, {
        ...deps,
        ec2: recorder.network(deps.ec2),
      });
    }
  } catch (error) {
    const denied = deniedCall(error);
    state = withBlocked(state, recordedFailure(error, denied, deps.clock()));
    if (denied === undefined) throw error;
    deniedAction = denied.action ?? 'unknown';
    logDenial(observation, deniedAction, state, deps.log);
  } finally {
    await recorder.release(state);
  }
  return { state, deniedAction };
}

/** The UnauthorizedOperation behind a failure: of the call itself, or of a fresh ENI's attach. */
function deniedCall(error: unknown): Ec2Failure | undefined {
  const candidate = error instanceof EniAttachError ? error.attachError : error;
  return isEc2Failure(candidate, 'unauthorized') ? candidate : undefined;
}

/** The record's `lastError` for a failed step. */
function recordedFailure(error: unknown, denied: Ec2Failure | undefined, nowEpochMs: number): RecordedError {
  return denied
    ? { code: 'UnauthorizedOperation', message: describeDenial(denied), atEpochMs: nowEpochMs }
    : { code: errorCode(error), message: errorMessage(error), atEpochMs: nowEpochMs };
}

function logDenial(
  observation: AllocationObservation,
  action: string,
  state: AllocationState,
  log: Log,
): void {
  log.error('EC2 denied a call to our role; no further mutation on this node for a while', {
    instanceId: observation.instance.id,
    action,
    retryAfterMs: UNAUTHORIZED_RETRY_DELAY_MS,
    message: state.blocked?.message,
  });
}

/** The observation, or why the node is not allocated now (`ignored`, or `busy` under another's claim). */
async function observeNode(
  instanceId: string,
  deps: ObserveDependencies,
  listedInstance: InstanceView | undefined,
): Promise<{ readonly observation: AllocationObservation } | AllocationOutcome> {
  const { ec2, store, settings, log } = deps;
  const instance =
    listedInstance?.id === instanceId ? listedInstance : await ec2.describeInstance(instanceId);
  if (!instance) return ignored('unknown-instance', `EC2 does not know instance ${instanceId}`, deps);
  const notServed = unservedInstance(instance, deps);
  if (notServed) return notServed;
  // Everything else is read at once: the sequential round trips from the event to a usable pool
  // are what a node waits for. Another invocation's lease counts as it stood when these reads
  // started: one that had expired by then cannot have an EC2 mutation on its way that the
  // Describe below misses (its holder starts none in the last third of it; `NodeLease`).
  const observedAtEpochMs = deps.clock();
  const [record, surroundings, observedEnis, table] = await Promise.all([
    store.get(instanceId),
    readSurroundings(instance, deps),
    ec2.describeAttachedEnis(instanceId, instance.vpcId),
    deps.tableGeneration(),
  ]);
  if (record && record.lifecycle !== 'active') {
    return ignored('not-active', `node ${instanceId} is ${record.lifecycle}; no new allocation`, deps);
  }
  if (isLeasedByOther(record, deps.invocationId, observedAtEpochMs)) {
    log.info('another invocation holds the node; backing off', { instanceId, lease: record?.lease });
    return busy(record?.lease);
  }
  // A CIDR released from a multi-pool node stays tombstoned for a while: a Describe still listing it lags.
  const tombstoned = tombstonedCidrs(record);
  const merged = mergeObservedEnis(
    record?.enis ?? [],
    observedEnis,
    deps.clock(),
    settings.consistencyGraceMs,
  );
  const observation: AllocationObservation = {
    ...surroundings,
    record,
    table,
    enis: withoutTombstoned(merged, tombstoned),
    mayHaveOrphanEnis: record?.lease !== undefined || record?.lastError !== undefined,
    releasedCidrs: releasedCidrsOf(record, tombstoned),
    tombstonedCidrs: tombstoned,
    clusterName: settings.clusterName,
    prefixDelegationEnabled: settings.prefixDelegationEnabled,
  };
  logProtocolTransition(observation, log);
  return { observation };
}

/** Why an instance EC2 knows is not allocated: not a member of this cluster, or not running. */
function unservedInstance(instance: InstanceView, deps: ObserveDependencies): AllocationOutcome | undefined {
  const { settings } = deps;
  if (!isClusterMember(instance, settings.clusterName, settings.clusterTagValues)) {
    return ignored(
      'not-in-cluster',
      `instance ${instance.id} is not tagged as a member of ${settings.clusterName}`,
      deps,
    );
  }
  if (instance.state !== 'running') {
    return ignored('not-running', `instance ${instance.id} is ${instance.state}, not running`, deps);
  }
  return undefined;
}

function logProtocolTransition(observation: AllocationObservation, log: Log): void {
  const transition = protocolTransitionOf(observation);
  if (transition === undefined) return;
  log.info('agent IPAM protocol changed', {
    instanceId: observation.instance.id,
    nodeName: observation.nodeName,
    ...transition,
  });
}

/**
 * What the node's allocation depends on besides its record and ENIs: its CiliumNode (trusted only
 * when it names this instance), the knobs and demand it carries, the VPC, the instance type's
 * limits, the zone's subnets, and security groups by tag when the knobs ask for them.
 */
async function readSurroundings(
  instance: InstanceView,
  deps: ObserveDependencies,
): Promise<
  Pick<
    AllocationObservation,
    | 'instance'
    | 'nodeName'
    | 'knobs'
    | 'demand'
    | 'vpc'
    | 'limits'
    | 'subnets'
    | 'securityGroups'
    | 'ciliumNode'
  >
> {
  const { ec2, settings, log } = deps;
  const nodeName = nodeNameFor(instance, settings.nodeNaming);
  const [ciliumNode, vpc, limits, subnets, defaultKnobs] = await Promise.all([
    deps.ciliumNodes.get(nodeName),
    ec2.describeVpc(instance.vpcId),
    ec2.describeInstanceLimits(instance.instanceType),
    ec2.describeSubnets(instance.vpcId, instance.availabilityZone),
    deps.preAgentKnobs(),
  ]);
  const trusted = trustedCiliumNode(ciliumNode, instance.id);
  if (ciliumNode && !trusted) {
    log.error('CiliumNode belongs to another instance; using stack defaults for this node', {
      instanceId: instance.id,
      nodeName,
      ciliumNodeInstanceId: instanceIdOfCiliumNode(ciliumNode),
    });
  }
  const knobs = knobsFromCiliumNode(trusted, defaultKnobs);
  // Security groups by tag are the one lookup that depends on the knobs (and the rarest).
  const securityGroups =
    Object.keys(knobs.securityGroupTags).length > 0 && knobs.securityGroups.length === 0
      ? await ec2.describeSecurityGroups(instance.vpcId)
      : [];
  const demand = trusted ? agentDemandOf(trusted) : undefined;
  return { instance, nodeName, knobs, demand, vpc, limits, subnets, securityGroups, ciliumNode };
}

/** The answer for a node another invocation holds: who, and until when. */
function busy(lease: MutationLease | undefined): AllocationOutcome {
  return {
    kind: 'busy',
    leaseHolder: lease?.holder ?? '',
    ...(lease === undefined ? {} : { leaseExpiresAtEpochMs: lease.expiresAtEpochMs }),
  };
}

function ignored(
  reason: 'unknown-instance' | 'not-in-cluster' | 'not-running' | 'not-active' | 'paused',
  detail: string,
  deps: ObserveDependencies,
): AllocationOutcome {
  deps.log.info('not allocating', { reason, detail });
  return { kind: 'ignored', reason, detail };
}

function errorCode(error: unknown): string {
  if (error && typeof error === 'object' && 'code' in error && typeof error.code === 'string')
    return error.code;
  return error instanceof Error ? error.name : 'Error';
}
