import type {
  AllocationObservation,
  AllocationState,
  AssignPlan,
  CreatePlan,
  MutatingStep,
  StepResult,
} from '../core/allocation-round.ts';
import { eniClientToken } from '../core/client-token.ts';
import { nextFreeIndexAfter } from '../core/device-index.ts';
import { isEc2Failure } from '../core/ec2-failure.ts';
import { ENI_TAG_KEYS } from '../core/eni-ownership.ts';
import { errorMessage } from '../core/errors.ts';
import type { EniState } from '../core/model.ts';
import type { DetachedEni, Ec2NetworkPort, Log } from '../core/ports.ts';

/**
 * The allocation's executor: carries out one step that `nextAllocationStep` decided, with EC2
 * calls only, and reports each answer EC2 confirmed through `confirm` as it arrives. So a step
 * that fails part-way (an IPv4 assign confirmed, then its /80 failing) still leaves the confirmed
 * part in the state the caller records. Refusals the planner can route around (a full subnet, a
 * fragmented one, a refused /80, a full ENI) are results too; any other failure is thrown.
 */

export interface StepDependencies {
  readonly ec2: Ec2NetworkPort;
  readonly clock: () => number;
  readonly log: Log;
  readonly settings: {
    /** Attach attempts at successive device indexes after index conflicts (cilium: 5). */
    readonly maxAttachAttempts: number;
  };
}

/** Where a step runs: the observation, the state the step was decided on, the record's version. */
export interface StepContext {
  readonly observation: AllocationObservation;
  readonly state: AllocationState;
  /** The version of the last record write (the claim or a checkpoint); part of a create's ClientToken. */
  readonly recordVersion: number;
}

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

export async function executeStep(
  step: MutatingStep,
  context: StepContext,
  confirm: (result: StepResult) => void,
  deps: StepDependencies,
): Promise<void> {
  switch (step.kind) {
    case 'repair':
      return confirm(await repairDeleteOnTermination(step, context, deps));
    case 'assign':
      logPrefixFallback(step, context, deps.log);
      return assignPlanned(step, context, confirm, deps);
    case 'create':
      logPrefixFallback(step, context, deps.log);
      return createAndAttachEni(step, context, confirm, deps);
  }
}

/**
 * ModifyNetworkInterfaceAttribute: delete-on-termination on the attachment. On an ENI just
 * attached, a failure is logged and the ENI left as recorded, without the flag, for the next
 * invocation to repair (its addresses are usable meanwhile; the flag only matters when the instance
 * terminates). Repairing what an earlier invocation left, a failure is thrown.
 */
async function repairDeleteOnTermination(
  step: Extract<MutatingStep, { kind: 'repair' }>,
  context: StepContext,
  deps: StepDependencies,
): Promise<StepResult> {
  const { eni, justAttached } = step;
  try {
    await deps.ec2.setDeleteOnTermination(eni.id, eni.attachmentId, true, { justAttached });
    return { kind: 'repaired', eniId: eni.id };
  } catch (error) {
    if (!justAttached) throw error;
    deps.log.error('could not set delete-on-termination; the next invocation retries', {
      instanceId: context.observation.instance.id,
      eniId: eni.id,
      error: errorMessage(error),
    });
    return { kind: 'unrepaired', eniId: eni.id };
  }
}

/** Says so when the planner fell back from /28 prefixes to single IPs (cilium PRs #20822, #31016). */
function logPrefixFallback(plan: AssignPlan | CreatePlan, context: StepContext, log: Log): void {
  if (!plan.prefixFallback) return;
  log.warn('no suitable subnet can give a /28 prefix; falling back to single IPs', {
    instanceId: context.observation.instance.id,
    plan: plan.kind,
    prefixRefusedSubnetIds: [...context.state.refusals.prefixRefusedSubnetIds],
  });
}

/**
 * An `assign` plan carried out: its IPv4 addresses (`assignToEni`), then its /80
 * (`assignIpv6PrefixToEni`). IPv4 goes first, unlike cilium (which asks for the /80 first and
 * stops at its failure): a refused /80 must not cost the node the IPv4 addresses it needs anyway.
 */
async function assignPlanned(
  plan: AssignPlan,
  context: StepContext,
  confirm: (result: StepResult) => void,
  deps: StepDependencies,
): Promise<void> {
  const eni = context.state.enis.find((candidate) => candidate.id === plan.eniId);
  if (!eni)
    throw new Error(`planned ENI ${plan.eniId} is not attached to ${context.observation.instance.id}`);
  if ((plan.ipCount ?? 0) > 0 || (plan.prefixCount ?? 0) > 0) {
    confirm(await assignToEni(plan, eni, context, deps));
  }
  if (plan.ipv6PrefixCount !== undefined) {
    confirm(await assignIpv6PrefixToEni(eni, plan.ipv6PrefixCount, deps));
  }
}

/**
 * AssignPrivateIpAddresses on an existing ENI, exactly as planned (prefixes or single IPs, never
 * both). A refusal is the answer and nothing is assigned: a subnet out of addresses or without a
 * free /28, and the planner's next round decides where the addresses come from instead (prefixes
 * on another ENI or on a new ENI in another subnet first, single IPs only when no suitable subnet
 * can give a /28; see `planAllocation`). Cilium instead retries single IPs on the same ENI at once
 * (cilium `AllocateIPs`). Not idempotent (EC2's AssignPrivateIpAddresses is not); the node lease
 * makes it run once per need.
 */
async function assignToEni(
  plan: AssignPlan,
  eni: EniState,
  context: StepContext,
  deps: StepDependencies,
): Promise<StepResult> {
  const request =
    plan.prefixCount !== undefined ? { prefixCount: plan.prefixCount } : { ipCount: plan.ipCount ?? 0 };
  try {
    const assigned = await deps.ec2.assignIps(eni.id, request);
    return { kind: 'assigned', eniId: eni.id, ips: assigned.ips, prefixes: assigned.prefixes };
  } catch (error) {
    if (isEc2Failure(error, 'eni-address-limit')) return adoptUnrecordedAddresses(eni, context, deps);
    const refusal = subnetRefusalOf(error, request.prefixCount !== undefined);
    if (refusal === undefined) throw error;
    deps.log.warn(refusalMessage(refusal), {
      instanceId: context.observation.instance.id,
      eniId: eni.id,
      subnetId: eni.subnetId,
    });
    return { kind: 'refused', subnetId: eni.subnetId, refusal };
  }
}

/**
 * AssignIpv6Addresses with `Ipv6PrefixCount` on the ENI (cilium `AssignENIIPv6Prefix`). A refusal
 * of the IPv6 part (`ipv6-refused`: the subnet has no IPv6 block after all, the type no room) is
 * the answer and nothing is assigned; the planner's next round puts the /80 elsewhere or reports
 * `NoDualStackSubnet`. Not idempotent; the node lease makes it run once per need.
 */
async function assignIpv6PrefixToEni(
  eni: EniState,
  prefixCount: number,
  deps: StepDependencies,
): Promise<StepResult> {
  try {
    const prefixes = await deps.ec2.assignIpv6Prefixes(eni.id, prefixCount);
    return { kind: 'ipv6-assigned', eniId: eni.id, prefixes };
  } catch (error) {
    if (!isEc2Failure(error, 'ipv6-refused')) throw error;
    return ipv6Refusal(eni.subnetId, error, deps);
  }
}

function ipv6Refusal(subnetId: string, error: unknown, deps: StepDependencies): StepResult {
  deps.log.warn('EC2 refused the IPv6 /80 in this subnet; planning around it', {
    subnetId,
    error: errorMessage(error),
  });
  return { kind: 'refused', subnetId, refusal: 'ipv6-refused' };
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
  context: StepContext,
  deps: StepDependencies,
): Promise<StepResult> {
  const { instance, releasedCidrs } = context.observation;
  const described = (await deps.ec2.describeAttachedEnis(instance.id, instance.vpcId)).find(
    (candidate) => candidate.id === eni.id,
  );
  const ips = (described?.secondaryIps ?? []).filter(
    (ip) => !eni.secondaryIps.includes(ip) && !releasedCidrs.has(`${ip}/32`),
  );
  const prefixes = (described?.prefixes ?? []).filter(
    (prefix) => !eni.prefixes.includes(prefix) && !releasedCidrs.has(prefix),
  );
  deps.log.warn('EC2 says the ENI holds more addresses than our view of it', {
    instanceId: instance.id,
    eniId: eni.id,
    adopted: [...ips, ...prefixes],
  });
  if (ips.length === 0 && prefixes.length === 0) return { kind: 'eni-full', eniId: eni.id };
  return { kind: 'adopted', eniId: eni.id, ips, prefixes };
}

type SubnetRefusal = 'subnet-full' | 'no-free-prefix';

/**
 * Which refusal an EC2 failure is, or `undefined` for any other error (rethrown by the caller).
 * `prefix-capacity` covers both answers cilium matches (`InsufficientCidrBlocks`, and
 * `InvalidParameterValue` "There aren't sufficient free Ipv4 addresses or prefixes"); for a request
 * of single IPs the latter can only mean the subnet is out of addresses.
 */
function subnetRefusalOf(error: unknown, requestedPrefixes: boolean): SubnetRefusal | undefined {
  if (isEc2Failure(error, 'subnet-full')) return 'subnet-full';
  if (isEc2Failure(error, 'prefix-capacity')) return requestedPrefixes ? 'no-free-prefix' : 'subnet-full';
  return undefined;
}

function refusalMessage(refusal: SubnetRefusal): string {
  return refusal === 'no-free-prefix'
    ? 'subnet has no free /28 block; planning around it'
    : 'subnet out of addresses; planning around it';
}

/**
 * A new ENI, cilium's lifecycle: create (IPs and tags in one call, deterministic ClientToken) or
 * adopt one a crashed invocation created; attach, moving to the next free device index on a
 * conflict (bounded). If attaching fails, the fresh ENI is deleted and both errors are kept apart
 * (`EniAttachError`). Unlike cilium, delete-on-termination is not set here but by the next round's
 * `repair` step, after the record holding the addresses is written and while they are published:
 * the flag matters only when the instance terminates, so it stays off the path to a usable pool
 * (a failure there is recorded and retried; deleting an attached ENI, as cilium tries, cannot
 * succeed).
 */
async function createAndAttachEni(
  plan: CreatePlan,
  context: StepContext,
  confirm: (result: StepResult) => void,
  deps: StepDependencies,
): Promise<void> {
  const { ec2, log } = deps;
  const instanceId = context.observation.instance.id;
  const orphans = context.observation.mayHaveOrphanEnis
    ? await ec2.findDetachedEnisCreatedFor(instanceId)
    : [];
  const orphan = orphans.find((candidate) => candidate.status === 'available');
  if (orphan) {
    log.info('adopting an ENI created for this instance but never attached', {
      instanceId,
      eniId: orphan.id,
    });
  }
  const eni = orphan ?? (await createInFirstSubnetWithRoom(plan, context, confirm, deps));
  if (!eni) return;

  const { attachmentId, deviceIndex, attachError } = await attachAtFreeIndex(
    eni.id,
    plan.deviceIndex,
    context,
    deps,
  );
  if (attachmentId === undefined) {
    let cleanupError: unknown;
    await ec2.deleteEni(eni.id).catch((error: unknown) => {
      cleanupError = error;
    });
    if (isEc2Failure(attachError, 'attachment-limit'))
      log.warn('instance is out of interface slots', { instanceId });
    throw new EniAttachError(eni.id, attachError, cleanupError);
  }
  confirm({ kind: 'created', eni, deviceIndex, attachmentId, fresh: orphan === undefined });
}

/**
 * Attaches a fresh ENI at `deviceIndex`, moving to the next free index when EC2 says the index is
 * taken, at most `maxAttachAttempts` times: the attachment and its index, or the last failure.
 */
async function attachAtFreeIndex(
  eniId: string,
  firstDeviceIndex: number,
  context: StepContext,
  deps: StepDependencies,
): Promise<{ attachmentId?: string; deviceIndex: number; attachError?: unknown }> {
  const instanceId = context.observation.instance.id;
  let deviceIndex = firstDeviceIndex;
  let attachError: unknown;
  const maxInterfaces = context.observation.limits?.maxInterfaces ?? deviceIndex + 1;
  for (let attempt = 1; attempt <= deps.settings.maxAttachAttempts; attempt++) {
    try {
      // Created or adopted moments ago: a NotFound is EC2 catching up, which the adapter waits out.
      const attachmentId = await deps.ec2.attachEni(eniId, instanceId, deviceIndex, { justCreated: true });
      return { attachmentId, deviceIndex };
    } catch (error) {
      attachError = error;
      if (!isEc2Failure(error, 'device-index-taken')) break;
      const next = nextFreeIndexAfter(context.state.enis, deviceIndex, maxInterfaces);
      deps.log.warn('device index taken; retrying at the next free index', { instanceId, deviceIndex, next });
      if (next === undefined) break;
      deviceIndex = next;
    }
  }
  return { deviceIndex, attachError };
}

/**
 * CreateNetworkInterface in the plan's first candidate subnet that takes it, with the plan's
 * addresses (prefixes or single IPs, never both, and the plan's /80). A subnet that refuses is
 * confirmed as a refusal and the next candidate is tried: with prefixes, every suitable subnet is
 * asked for a /28 before anything falls back (cilium creates in ONE subnet and retries it once
 * without prefixes, #46644). When every candidate refused, nothing is created and the planner's
 * next round decides: a fallback to single IPs (cilium PRs #20822, #31016), or another subnet.
 * Idempotent per ClientToken; a refused create leaves no token behind, so the same token may be
 * offered to the next subnet.
 */
async function createInFirstSubnetWithRoom(
  plan: CreatePlan,
  context: StepContext,
  confirm: (result: StepResult) => void,
  deps: StepDependencies,
): Promise<DetachedEni | undefined> {
  const instanceId = context.observation.instance.id;
  const { refusals } = context.state;
  const requestsPrefixes = plan.prefixCount !== undefined;
  for (const subnetId of plan.subnetCandidates) {
    if (refusals.fullSubnetIds.includes(subnetId)) continue;
    if (requestsPrefixes && refusals.prefixRefusedSubnetIds.includes(subnetId)) continue;
    try {
      return await deps.ec2.createEni(createRequest(plan, subnetId, context, deps));
    } catch (error) {
      confirm(createRefusal(error, plan, { instanceId, subnetId }, deps));
    }
  }
  return undefined;
}

function createRequest(plan: CreatePlan, subnetId: string, context: StepContext, deps: StepDependencies) {
  const instanceId = context.observation.instance.id;
  return {
    instanceId,
    subnetId,
    securityGroupIds: plan.securityGroupIds,
    description: plan.description,
    ...(plan.prefixCount !== undefined ? { prefixCount: plan.prefixCount } : { ipCount: plan.ipCount ?? 0 }),
    ...(plan.ipv6PrefixCount === undefined ? {} : { ipv6PrefixCount: plan.ipv6PrefixCount }),
    // The creation time only: the adapter adds our ownership tags and the configured extra tags.
    tags: { [ENI_TAG_KEYS.createdAt]: String(deps.clock()) },
    // The fallback to single IPs is a different request from the prefixes planned before it:
    // never the same token for both.
    clientToken: eniClientToken({
      instanceId,
      deviceIndex: plan.deviceIndex,
      recordVersion: context.recordVersion,
      attempt: plan.prefixFallback ? 1 : 0,
    }),
  };
}

/**
 * Why a subnet refused a create, so the next candidate (or the planner's next round) goes
 * elsewhere: out of addresses or of /28s (`subnetRefusalOf`), or, for a create with a /80, the
 * IPv6 part (the next round creates without it there, or with it in another subnet). Rethrows any
 * other error.
 */
function createRefusal(
  error: unknown,
  plan: CreatePlan,
  where: { readonly instanceId: string; readonly subnetId: string },
  deps: StepDependencies,
): StepResult {
  const refusal = subnetRefusalOf(error, plan.prefixCount !== undefined);
  if (refusal !== undefined) {
    deps.log.warn(`${refusalMessage(refusal)}; trying the next candidate`, where);
    return { kind: 'refused', subnetId: where.subnetId, refusal };
  }
  if (plan.ipv6PrefixCount === undefined || !isEc2Failure(error, 'ipv6-refused')) throw error;
  return ipv6Refusal(where.subnetId, error, deps);
}
