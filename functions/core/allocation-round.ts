import type { AgentDemand } from './agent-protocol.ts';
import {
  type AllocationPlan,
  computePoolDemand,
  type PlanRefusals,
  type PoolDemand,
  planAllocation,
} from './allocation-plan.ts';
import type { CiliumNode } from './ciliumnode.ts';
import { ENI_TAG_KEYS, isOurs } from './eni-ownership.ts';
import { addressesTaken, addressesTakenByNewEni } from './ip-math.ts';
import type {
  EniState,
  InstanceLimits,
  InstanceView,
  NodeKnobs,
  NodeRecord,
  RecordedError,
  SecurityGroupView,
  SubnetView,
  VpcView,
} from './model.ts';
import { withEni } from './node-record.ts';
import type { DetachedEni } from './ports.ts';

/**
 * One allocation invocation as a loop over immutable values: the observation (everything read
 * before the first mutation) and the round state (what EC2 confirmed since, and what it refused).
 * `nextAllocationStep` decides the next step from both; the executor makes that step's EC2 calls
 * and reports each confirmed answer as a `StepResult`; `applyStepResult` folds it into a new
 * state. Nothing here performs I/O or reads a clock.
 */

/** What an invocation read about the node before deciding anything. Never changed afterwards. */
export interface AllocationObservation {
  readonly instance: InstanceView;
  readonly nodeName: string;
  readonly knobs: NodeKnobs;
  /** The agent's demand (protocol and used count); `undefined` without a trusted CiliumNode. */
  readonly demand: AgentDemand | undefined;
  readonly vpc: VpcView;
  readonly limits: InstanceLimits | undefined;
  readonly subnets: readonly SubnetView[];
  readonly securityGroups: readonly SecurityGroupView[];
  /** The CiliumNode as read (foreign or not), for publishing what this invocation writes. */
  readonly ciliumNode: CiliumNode | undefined;
  /** The record as read: the base of this invocation's first write. */
  readonly record: NodeRecord | undefined;
  /** The record's ENIs merged with EC2's Describe, tombstoned CIDRs left out (`mergeObservedEnis`). */
  readonly enis: readonly EniState[];
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
  /** Tombstoned multi-pool CIDRs: one EC2 assigns to us again loses its tombstone. */
  readonly tombstonedCidrs: ReadonlySet<string>;
  /** The node table's generation, stamped on every write (`NodeRecord.reconciledInTable`). */
  readonly table: string | undefined;
  readonly clusterName: string;
  readonly prefixDelegationEnabled: boolean;
}

/**
 * What refused during this invocation: the planner's `PlanRefusals`, and `unrepairedEniIds`, ENIs
 * just attached that refused delete-on-termination (retried by the next invocation, as a repair of
 * what is recorded without the flag). All are forgotten at the end of the invocation.
 */
interface Refusals extends PlanRefusals {
  readonly unrepairedEniIds: readonly string[];
}

/** What the rounds so far established: the node's ENIs and subnets as EC2 confirmed them. */
export interface AllocationState {
  readonly enis: readonly EniState[];
  /** The observed subnets, less the addresses this invocation's own calls took from them. */
  readonly subnets: readonly SubnetView[];
  readonly refusals: Refusals;
  /** Every confirmed answer, in order (the outcome carries them, and its metrics count them). */
  readonly results: readonly StepResult[];
  /** Why the node is not served as it asks (written to the record as `lastError`). */
  readonly blocked: RecordedError | undefined;
}

export type AssignPlan = Extract<AllocationPlan, { kind: 'assign' }>;
export type CreatePlan = Extract<AllocationPlan, { kind: 'create' }>;

/** The next step: a repair, else the planner's plan itself (`assign`, `create`, `blocked`, `done`). */
export type AllocationStep =
  /**
   * Set delete-on-termination on an attachment of ours that lacks it: every ENI this invocation
   * attached (`justAttached`: EC2 may not list the attachment yet), after the record holding its
   * addresses was written, or one a crash left without the flag.
   */
  { readonly kind: 'repair'; readonly eni: EniState; readonly justAttached: boolean } | AllocationPlan;

export type MutatingStep = Extract<AllocationStep, { kind: 'repair' | 'assign' | 'create' }>;

/** One answer EC2 confirmed during a step. */
export type StepResult =
  | { readonly kind: 'repaired'; readonly eniId: string }
  /** Delete-on-termination could not be set on an ENI just attached; not again in this invocation. */
  | { readonly kind: 'unrepaired'; readonly eniId: string }
  /** AssignPrivateIpAddresses gave these addresses. */
  | {
      readonly kind: 'assigned';
      readonly eniId: string;
      readonly ips: readonly string[];
      readonly prefixes: readonly string[];
    }
  /** EC2 refused addresses for the ENI's own limit, and a fresh Describe lists these beyond our view. */
  | {
      readonly kind: 'adopted';
      readonly eniId: string;
      readonly ips: readonly string[];
      readonly prefixes: readonly string[];
    }
  /** EC2 refused addresses for the ENI's own limit and a fresh Describe shows nothing new (it lags). */
  | { readonly kind: 'eni-full'; readonly eniId: string }
  | { readonly kind: 'ipv6-assigned'; readonly eniId: string; readonly prefixes: readonly string[] }
  | {
      readonly kind: 'refused';
      readonly subnetId: string;
      readonly refusal: 'subnet-full' | 'no-free-prefix' | 'ipv6-refused';
    }
  /**
   * A new (or adopted orphan) ENI attached at `deviceIndex`, delete-on-termination not set yet (a
   * `repair` step sets it once the record holds the ENI's addresses).
   */
  | {
      readonly kind: 'created';
      readonly eni: DetachedEni;
      readonly deviceIndex: number;
      readonly attachmentId: string;
      /** Whether this invocation created it (its addresses came from the subnet just now). */
      readonly fresh: boolean;
    };

/**
 * After IAM denied one of our calls on a node, how long its allocation makes no further EC2
 * mutation: the same call cannot succeed before someone changes the policy, and retrying it on
 * every sweep would only repeat the denial (the node shows the error meanwhile).
 */
export const UNAUTHORIZED_RETRY_DELAY_MS = 10 * 60_000;

/** The state before the first round: nothing confirmed yet, a recent IAM denial still standing. */
export function initialAllocationState(
  observation: AllocationObservation,
  nowEpochMs: number,
): AllocationState {
  return {
    enis: observation.enis,
    subnets: observation.subnets,
    refusals: {
      fullSubnetIds: [],
      prefixRefusedSubnetIds: [],
      ipv6RefusedSubnetIds: [],
      fullEniIds: [],
      unrepairedEniIds: [],
    },
    results: [],
    blocked: recentDenial(observation.record, nowEpochMs),
  };
}

/** Whether the node may be mutated at all in this invocation (no IAM denial standing). */
export function mayMutate(state: AllocationState): boolean {
  return state.blocked?.code !== 'UnauthorizedOperation';
}

/**
 * The next step, first rule that applies:
 * 1. an attachment of ours without delete-on-termination the node wants → `repair`;
 * 2. the plan of `planAllocation` over the observation and the state → `assign`, `create`,
 *    `blocked`, or `done` when the pool needs nothing.
 */
export function nextAllocationStep(
  observation: AllocationObservation,
  state: AllocationState,
): AllocationStep {
  const repair = enisMissingDeleteOnTermination(state, observation);
  if (repair) {
    const justAttached = state.results.some(
      (result) => result.kind === 'created' && result.eni.id === repair.id,
    );
    return { kind: 'repair', eni: repair, justAttached };
  }
  // The observation's facts and the state's ENIs, subnets and refusals; the plan is the step.
  const { instance, limits, securityGroups, knobs, prefixDelegationEnabled } = observation;
  const { enis, subnets, refusals } = state;
  return planAllocation({
    instance,
    limits,
    securityGroups,
    knobs,
    prefixDelegationEnabled,
    enis,
    subnets,
    refusals,
    usedIpCount: usedIpCount(observation),
    wantsIpv6: observation.demand?.wantsIpv6,
  });
}

/** The state with `blocked` recorded. */
export function withBlocked(state: AllocationState, blocked: RecordedError): AllocationState {
  return { ...state, blocked };
}

/** The state after EC2 confirmed `result` at `nowEpochMs` (the ENI's last mutation). */
export function applyStepResult(
  state: AllocationState,
  result: StepResult,
  nowEpochMs: number,
): AllocationState {
  const results = [...state.results, result];
  switch (result.kind) {
    case 'repaired':
      return {
        ...state,
        results,
        enis: changeEni(state.enis, result.eniId, nowEpochMs, { deleteOnTermination: true }),
      };
    case 'assigned':
      return applyAssigned(state, results, result, nowEpochMs);
    case 'adopted':
      return {
        ...state,
        results,
        enis: changeEni(state.enis, result.eniId, nowEpochMs, addresses(result)),
      };
    case 'eni-full':
      return { ...state, results, refusals: refused(state.refusals, 'fullEniIds', result.eniId) };
    case 'unrepaired':
      return { ...state, results, refusals: refused(state.refusals, 'unrepairedEniIds', result.eniId) };
    case 'ipv6-assigned':
      return {
        ...state,
        results,
        enis: changeEni(state.enis, result.eniId, nowEpochMs, (eni) => ({
          ipv6Prefixes: union(eni.ipv6Prefixes ?? [], result.prefixes),
        })),
      };
    case 'refused':
      return {
        ...state,
        results,
        refusals: refused(state.refusals, REFUSAL_LISTS[result.refusal], result.subnetId),
      };
    case 'created':
      return applyCreated(state, results, result, nowEpochMs);
  }
}

const REFUSAL_LISTS = {
  'subnet-full': 'fullSubnetIds',
  'no-free-prefix': 'prefixRefusedSubnetIds',
  'ipv6-refused': 'ipv6RefusedSubnetIds',
} as const satisfies Record<Extract<StepResult, { kind: 'refused' }>['refusal'], keyof Refusals>;

function applyAssigned(
  state: AllocationState,
  results: readonly StepResult[],
  result: Extract<StepResult, { kind: 'assigned' }>,
  nowEpochMs: number,
): AllocationState {
  const eni = state.enis.find((candidate) => candidate.id === result.eniId);
  return {
    ...state,
    results,
    enis: changeEni(state.enis, result.eniId, nowEpochMs, addresses(result)),
    subnets: eni
      ? consumeSubnetAddresses(state.subnets, eni.subnetId, assignedAddressCount(result))
      : state.subnets,
  };
}

function applyCreated(
  state: AllocationState,
  results: readonly StepResult[],
  result: Extract<StepResult, { kind: 'created' }>,
  nowEpochMs: number,
): AllocationState {
  const { eni } = result;
  const subnet = state.subnets.find((candidate) => candidate.id === eni.subnetId);
  const attached: EniState = {
    id: eni.id,
    mac: eni.mac,
    deviceIndex: result.deviceIndex,
    attachmentId: result.attachmentId,
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
  return {
    ...state,
    results,
    enis: withEni(state.enis, attached),
    subnets: result.fresh
      ? consumeSubnetAddresses(state.subnets, eni.subnetId, addressesTakenByNewEni(eni))
      : state.subnets,
  };
}

/** The pool's demand over the state's ENIs (`computePoolDemand`). */
export function poolDemandOf(observation: AllocationObservation, state: AllocationState): PoolDemand {
  return computePoolDemand({
    limits: observation.limits,
    enis: state.enis,
    knobs: observation.knobs,
    usedIpCount: usedIpCount(observation),
    prefixDelegationEnabled: observation.prefixDelegationEnabled,
  });
}

/** The change from the recorded protocol to the observed one; `none` stands for "never observed". */
export function protocolTransitionOf(
  observation: AllocationObservation,
): { readonly from: string; readonly to: AgentDemand['protocol'] } | undefined {
  const recorded = observation.record?.agentProtocol;
  const observed = observation.demand;
  if (observed === undefined || observed.protocol === recorded) return undefined;
  return { from: recorded ?? 'none', to: observed.protocol };
}

/** The node's recorded IAM denial while it is younger than `UNAUTHORIZED_RETRY_DELAY_MS`. */
function recentDenial(record: NodeRecord | undefined, nowEpochMs: number): RecordedError | undefined {
  const error = record?.lastError;
  if (error?.code !== 'UnauthorizedOperation') return undefined;
  return nowEpochMs - error.atEpochMs < UNAUTHORIZED_RETRY_DELAY_MS ? error : undefined;
}

/**
 * An ENI we created for this instance whose attachment lacks delete-on-termination although the
 * node wants it: every ENI just attached (the flag is set in the round after its attach, once its
 * addresses are recorded), or what a crash between attach and ModifyNetworkInterfaceAttribute left.
 */
function enisMissingDeleteOnTermination(
  state: AllocationState,
  observation: AllocationObservation,
): EniState | undefined {
  if (!observation.knobs.deleteOnTermination) return undefined;
  return state.enis.find(
    (eni) =>
      eni.deviceIndex > 0 &&
      !state.refusals.unrepairedEniIds.includes(eni.id) &&
      !eni.deleteOnTermination &&
      isOurs(eni.tags, observation.clusterName) &&
      eni.tags[ENI_TAG_KEYS.instanceId] === observation.instance.id,
  );
}

function usedIpCount(observation: AllocationObservation): number {
  return observation.demand?.usedIpCount ?? 0;
}

/** The ENI `eniId` with `change` applied (a patch, or a function of the ENI), mutated at `nowEpochMs`. */
function changeEni(
  enis: readonly EniState[],
  eniId: string,
  nowEpochMs: number,
  change: Partial<EniState> | ((eni: EniState) => Partial<EniState>),
): readonly EniState[] {
  const eni = enis.find((candidate) => candidate.id === eniId);
  if (!eni) return enis;
  const patch = typeof change === 'function' ? change(eni) : change;
  return withEni(enis, { ...eni, ...patch, lastMutatedAtEpochMs: nowEpochMs });
}

/** A patch adding `ips` and `prefixes` to an ENI's IPv4 addresses. */
function addresses(result: { readonly ips: readonly string[]; readonly prefixes: readonly string[] }) {
  return (eni: EniState): Partial<EniState> => ({
    secondaryIps: union(eni.secondaryIps, result.ips),
    prefixes: union(eni.prefixes, result.prefixes),
  });
}

/** Addresses an assign gave, /28 members counted. */
export function assignedAddressCount(result: {
  readonly ips: readonly string[];
  readonly prefixes: readonly string[];
}): number {
  return addressesTaken(result.ips.length, result.prefixes.length);
}

function refused(refusals: Refusals, list: keyof Refusals, id: string): Refusals {
  return refusals[list].includes(id) ? refusals : { ...refusals, [list]: [...refusals[list], id] };
}

function consumeSubnetAddresses(
  subnets: readonly SubnetView[],
  subnetId: string,
  taken: number,
): readonly SubnetView[] {
  return subnets.map((subnet) =>
    subnet.id === subnetId
      ? { ...subnet, availableAddresses: Math.max(subnet.availableAddresses - taken, 0) }
      : subnet,
  );
}

function union(existing: readonly string[], added: readonly string[]): string[] {
  return [...new Set([...existing, ...added])];
}
