import { emptyInterfaceSlots, firstFreeDeviceIndex } from './device-index.ts';
import { anyEniHasRoom, compareStrings, isExcluded, orderEnisToFill } from './eni-selection.ts';
import { ADDRESSES_PER_IPV4_PREFIX, compareIpv4, expandCidr, sortIpv4 } from './ip-math.ts';
import { type EniLimitContext, isPrefixDelegationActive } from './limits.ts';
import type {
  EniState,
  InstanceLimits,
  InstanceView,
  NodeKnobs,
  SecurityGroupView,
  SubnetView,
} from './model.ts';
import {
  calculateExcessIps,
  calculateNeededIps,
  countAvailableIps,
  resolveMaxAllocate,
  resolvePreAllocate,
  slotMixCapacityAdjustmentIps,
} from './pool-math.ts';
import { chooseSecurityGroups, formatTags } from './security-group-choice.ts';
import { chooseSubnets, subnetIdsOf } from './subnet-choice.ts';

/**
 * The allocation planner: from one snapshot of a node, the ONE next action that brings its pool
 * towards the watermarks, as a value the EC2 adapter carries out. Pure. Mirrors cilium's
 * `recalculate` → `determineMaintenanceAction` → `PrepareIPAllocation` / `CreateInterface` chain
 * ([M1] `pkg/ipam/node.go`, `pkg/aws/eni/node.go`; reference §3.2-§3.8). Also the release-side
 * selection of which addresses are excess (§3.10), used by the release handshake.
 */

/** Everything the planner looks at, as observed (EC2 for ENIs and subnets, the CiliumNode for knobs). */
export interface AllocationSnapshot {
  readonly instance: InstanceView;
  /** The instance type's limits; `undefined` when DescribeInstanceTypes did not know the type. */
  readonly limits: InstanceLimits | undefined;
  /** ENIs attached to the instance, as observed; eth0 and excluded ENIs included. */
  readonly enis: readonly EniState[];
  readonly subnets: readonly SubnetView[];
  readonly securityGroups: readonly SecurityGroupView[];
  readonly knobs: NodeKnobs;
  /** `|status.ipam.used|`: addresses the agent has handed out. */
  readonly usedIpCount: number;
  /** The stack-wide prefix-delegation switch (cilium `--aws-enable-prefix-delegation`). */
  readonly prefixDelegationEnabled: boolean;
  /** Subnets that already refused addresses during this round (InsufficientFreeAddressesInSubnet). */
  readonly excludedSubnetIds?: readonly string[];
  /**
   * Subnets that refused a /28 during this invocation (`InsufficientCidrBlocks`: no aligned free
   * block, i.e. a fragmented subnet) though they may still have single addresses. Consulted only
   * on a prefix-delegated node: no prefix is planned there again, and single IPs are planned only
   * once no suitable subnet is left that might give a /28 (see `planAllocation`).
   */
  readonly prefixRefusedSubnetIds?: readonly string[];
}

/**
 * The pool's state against the knobs. `neededIps` and `excessIps` are cilium's `needed` and
 * `excess` (§3.2): at most one of them is positive. Both are 0 when the limits are unknown or no
 * ENI was observed, as in cilium where a failed `ResyncInterfacesAndIPs` zeroes them.
 */
export interface PoolDemand {
  readonly prefixDelegation: boolean;
  readonly availableIpCount: number;
  readonly usedIpCount: number;
  /** The resolved watermarks (`resolvePreAllocate`, `resolveMaxAllocate`; 0 max = no cap). */
  readonly preAllocate: number;
  readonly minAllocate: number;
  readonly maxAllocate: number;
  readonly maxAboveWatermark: number;
  readonly neededIps: number;
  readonly excessIps: number;
}

type DemandInputs = Pick<
  AllocationSnapshot,
  'limits' | 'enis' | 'knobs' | 'usedIpCount' | 'prefixDelegationEnabled'
>;

/** The pool's demand for one snapshot (cilium `recalculate`). */
export function computePoolDemand(snapshot: DemandInputs): PoolDemand {
  const { limits, enis, knobs, usedIpCount } = snapshot;
  const prefixDelegation = isPrefixDelegationActive({
    stackPrefixDelegationEnabled: snapshot.prefixDelegationEnabled,
    limits,
    knobs,
    enis,
  });
  const availableIpCount = countAvailableIps(enis, knobs);
  const preAllocate = resolvePreAllocate(knobs, limits);
  const maxAllocate = resolveMaxAllocate(
    knobs,
    limits,
    prefixDelegation,
    slotMixCapacityAdjustmentIps(enis, knobs, prefixDelegation),
  );
  const observable = limits !== undefined && enis.length > 0;
  const watermarks = {
    availableIpCount,
    usedIpCount,
    preAllocate,
    minAllocate: knobs.minAllocate,
  };
  return {
    prefixDelegation,
    ...watermarks,
    maxAllocate,
    maxAboveWatermark: knobs.maxAboveWatermark,
    neededIps: observable ? calculateNeededIps({ ...watermarks, maxAllocate }) : 0,
    excessIps: observable
      ? calculateExcessIps({ ...watermarks, maxAboveWatermark: knobs.maxAboveWatermark })
      : 0,
  };
}

/** Why nothing is to be allocated. */
export type NoAllocationReason =
  /** `neededIps` is 0: the pool meets pre-allocate and min-allocate. */
  | 'pool-satisfied'
  /** Addresses are wanted but `spec.ipam.max-allocate` caps the pool where it is. */
  | 'max-allocate-reached'
  /** Addresses are wanted but no ENI has room and no device slot is free (cilium "Instance is out of interfaces"; not an error). */
  | 'instance-at-capacity'
  /** EC2 reports the instance is not `running`; nothing can be attached (cilium skips such nodes). */
  | 'instance-not-running';

/** Why the planner cannot act; surfaced as the node's `operator-status.error`. */
export type AllocationBlockedCode =
  | 'UnknownInstanceLimits'
  | 'NoInterfacesObserved'
  | 'NoSuitableSubnet'
  | 'NoSecurityGroups'
  | 'NoSubnetWithFreeAddresses';

/** How many addresses to ask EC2 for: plain secondary IPs, or /28 prefixes; never both. */
export type AddressRequest =
  | { readonly ipCount: number; readonly prefixCount?: never }
  | { readonly prefixCount: number; readonly ipCount?: never };

/**
 * Marks a plan for single IPs on a prefix-delegated node: every suitable subnet refused a /28 this
 * invocation, so plain secondary IPs are asked for instead (cilium PRs #20822, #31016). Absent on
 * every other plan.
 */
export interface PrefixFallbackMark {
  readonly prefixFallback?: true;
}

/**
 * The next action for a node. `neededIps` is cilium's `needed` for the snapshot (§3.2), carried for
 * logs and metrics; the requested count may exceed it by up to `max-above-watermark` (cilium
 * `MaxIPsToAllocate = needed + maxAboveWatermark`; the pending-pod surge is not modelled).
 */
export type AllocationPlan =
  | { readonly kind: 'none'; readonly reason: NoAllocationReason; readonly neededIps: number }
  | ({
      readonly kind: 'assign';
      /** An existing, non-excluded ENI with room (`AssignPrivateIpAddresses` target). */
      readonly eniId: string;
      readonly subnetId: string;
      readonly neededIps: number;
    } & AddressRequest &
      PrefixFallbackMark)
  | ({
      readonly kind: 'create-eni';
      /** The first free device index at or above `first-interface-index`. */
      readonly deviceIndex: number;
      /** Subnet ids to create in, best first; the rest are fallbacks for InsufficientFreeAddressesInSubnet. */
      readonly subnetCandidates: readonly string[];
      readonly securityGroupIds: readonly string[];
      /** `Cilium-CNI (<instance-id>)`, as cilium names its ENIs. */
      readonly description: string;
      /** Whether to set DeleteOnTermination on the attachment (`spec.eni.delete-on-termination`). */
      readonly deleteOnTermination: boolean;
      readonly neededIps: number;
    } & AddressRequest &
      PrefixFallbackMark)
  | { readonly kind: 'blocked'; readonly code: AllocationBlockedCode; readonly message: string };

/**
 * The next allocation action for the node, first rule that applies:
 * 1. instance not `running` → `none` / `instance-not-running`;
 * 2. limits unknown → `blocked` / `UnknownInstanceLimits`; no ENI observed → `blocked` /
 *    `NoInterfacesObserved` (cilium "unable to retrieve ENIs");
 * 3. `neededIps = 0` → `none`: `max-allocate-reached` or `instance-at-capacity` when only the cap
 *    held demand back, else `pool-satisfied`;
 * 4. then, in the node's address mode (`planInMode`): fill an existing ENI, else create one.
 *
 * On a prefix-delegated node (cilium `IsPrefixDelegated`, §3.8) the mode is /28 prefixes, and
 * subnets that refused a /28 this invocation (`prefixRefusedSubnetIds`) are left out of both steps:
 * a. `assign` prefixes to an ENI whose subnet did not refuse;
 * b. else `create-eni` with prefixes in a suitable subnet that did not refuse. So when the ENI to
 *    fill sits in a fragmented subnet and a device slot is free, a new ENI in another suitable
 *    subnet gets prefixes before anything falls back (cilium retries no other subnet, #46644, and
 *    falls back to IPs on the same ENI at once, §3.5 `AllocateIPs`): a slot that holds a /28 holds
 *    16 addresses, a slot that holds a single IP holds 1, and the node stays delegated;
 * c. only when neither is possible and some subnet refused, single IPs (`prefixFallback`, cilium
 *    PRs #20822, #31016): first on an ENI that already holds prefixes (it stays delegated under
 *    cilium's rule, which looks only for ENIs with IPs but no prefix), then on any ENI with a free
 *    slot, then on a new ENI in any suitable subnet, which turns the node off prefix delegation for
 *    good (cilium's all-or-nothing rule, `isPrefixDelegationActive`). Every later plan for the node
 *    is then in IPs, leftover prefixes counting through `leftoverPrefixCapacityIps`.
 */
export function planAllocation(snapshot: AllocationSnapshot): AllocationPlan {
  const { instance, limits, enis, knobs } = snapshot;
  if (instance.state !== 'running') return { kind: 'none', reason: 'instance-not-running', neededIps: 0 };
  if (limits === undefined) {
    return {
      kind: 'blocked',
      code: 'UnknownInstanceLimits',
      message: `unable to determine limits of instance type ${instance.instanceType} (instance ${instance.id})`,
    };
  }
  if (enis.length === 0) {
    return {
      kind: 'blocked',
      code: 'NoInterfacesObserved',
      message: `unable to retrieve ENIs of instance ${instance.id}: none observed attached`,
    };
  }

  const demand = computePoolDemand(snapshot);
  const { neededIps, prefixDelegation } = demand;
  if (neededIps === 0) return { kind: 'none', reason: reasonNothingNeeded(demand, knobs), neededIps };

  const context: ModeContext = {
    snapshot,
    limits,
    neededIps,
    maxIpsToAllocate: neededIps + knobs.maxAboveWatermark,
    limitContext: { limits, usePrimaryAddress: knobs.usePrimaryAddress, prefixDelegation },
  };
  const subnetsOutOfAddresses = snapshot.excludedSubnetIds ?? [];
  if (!prefixDelegation) return planInMode(context, 'ips', subnetsOutOfAddresses);

  const prefixRefused = snapshot.prefixRefusedSubnetIds ?? [];
  const withPrefixes = planInMode(context, 'prefixes', [...subnetsOutOfAddresses, ...prefixRefused]);
  if (isAction(withPrefixes) || prefixRefused.length === 0) return withPrefixes;
  const withIps = planInMode(context, 'ips', subnetsOutOfAddresses);
  return isAction(withIps) ? { ...withIps, prefixFallback: true } : withIps;
}

/** What `planInMode` needs besides the snapshot. */
interface ModeContext {
  readonly snapshot: AllocationSnapshot;
  readonly limits: InstanceLimits;
  readonly neededIps: number;
  /** cilium `MaxIPsToAllocate = needed + maxAboveWatermark`. */
  readonly maxIpsToAllocate: number;
  readonly limitContext: EniLimitContext;
}

type ActionPlan = Extract<AllocationPlan, { kind: 'assign' | 'create-eni' }>;

function isAction(plan: AllocationPlan): plan is ActionPlan {
  return plan.kind === 'assign' || plan.kind === 'create-eni';
}

/**
 * Fill, else create, asking for `mode` (cilium `PrepareIPAllocation` → `AllocateIPs`, else
 * `CreateInterface`, §3.4-§3.5), with `excludedSubnetIds` left out:
 * 1. an existing ENI can take addresses (`orderEnisToFill`; on a prefix-delegated node it needs a
 *    free slot) → `assign` `count = min(room on ENI, free slots, subnet free, needed +
 *    maxAboveWatermark)`; in prefixes `prefixCount = min(ceil(count / 16), free slots)`. In IPs on
 *    a prefix-delegated node (the fallback), an ENI that already holds prefixes is preferred;
 * 2. no free device slot → `none` / `instance-at-capacity`, or `blocked` /
 *    `NoSubnetWithFreeAddresses` when ENIs have room but their subnets are exhausted;
 * 3. no subnet (`chooseSubnets`) → `blocked` / `NoSuitableSubnet`; no security group
 *    (`chooseSecurityGroups`) → `blocked` / `NoSecurityGroups`;
 * 4. otherwise `create-eni` with `ipCount = min(needed + maxAboveWatermark, ipv4PerInterface - 1)`,
 *    or in prefixes `prefixCount = ceil(min(needed + maxAboveWatermark,
 *    (ipv4PerInterface - 1) × 16) / 16)` (the 1.20 rule, `4054d73f2e`).
 */
function planInMode(
  context: ModeContext,
  mode: 'prefixes' | 'ips',
  excludedSubnetIds: readonly string[],
): AllocationPlan {
  const { snapshot, limits, neededIps, maxIpsToAllocate, limitContext } = context;
  const { instance, enis, knobs } = snapshot;
  const fillOrder = orderEnisToFill({
    enis,
    subnets: snapshot.subnets,
    knobs,
    limitContext,
    excludedSubnetIds,
  });
  const fillTarget =
    mode === 'ips' && limitContext.prefixDelegation
      ? (fillOrder.find((candidate) => candidate.eni.prefixes.length > 0) ?? fillOrder[0])
      : fillOrder[0];
  if (fillTarget !== undefined) {
    const count = Math.min(fillTarget.roomIps, fillTarget.subnet.availableAddresses, maxIpsToAllocate);
    const request: AddressRequest =
      mode === 'prefixes'
        ? { prefixCount: Math.min(prefixesFor(count), fillTarget.freeSlots) }
        : { ipCount: Math.min(count, fillTarget.freeSlots) };
    return {
      kind: 'assign',
      eniId: fillTarget.eni.id,
      subnetId: fillTarget.subnet.id,
      neededIps,
      ...request,
    };
  }

  const deviceIndex =
    emptyInterfaceSlots(limits, enis) > 0
      ? firstFreeDeviceIndex(enis, knobs.firstInterfaceIndex, limits.maxInterfaces)
      : undefined;
  if (deviceIndex === undefined) {
    if (anyEniHasRoom({ enis, knobs, limitContext })) {
      return {
        kind: 'blocked',
        code: 'NoSubnetWithFreeAddresses',
        message:
          `instance ${instance.id} has ENIs with room but their subnets have no free addresses, ` +
          'and no device slot is free for an ENI in another subnet',
      };
    }
    return { kind: 'none', reason: 'instance-at-capacity', neededIps };
  }

  const subnetCandidates = subnetIdsOf(
    chooseSubnets({
      instance,
      subnets: snapshot.subnets,
      knobs,
      ipv4PerInterface: limits.ipv4PerInterface,
      excludedSubnetIds,
    }),
  );
  if (subnetCandidates.length === 0) {
    return {
      kind: 'blocked',
      code: 'NoSuitableSubnet',
      message: noSuitableSubnetMessage(snapshot, excludedSubnetIds),
    };
  }
  const securityGroups = chooseSecurityGroups({
    vpcId: instance.vpcId,
    knobs,
    securityGroups: snapshot.securityGroups,
    enis,
  });
  if (securityGroups.kind === 'blocked') return securityGroups;

  const secondaryIpsPerEni = Math.max(limits.ipv4PerInterface - 1, 0);
  const request: AddressRequest =
    mode === 'prefixes'
      ? {
          prefixCount: prefixesFor(
            Math.min(maxIpsToAllocate, secondaryIpsPerEni * ADDRESSES_PER_IPV4_PREFIX),
          ),
        }
      : { ipCount: Math.min(maxIpsToAllocate, secondaryIpsPerEni) };
  if ((request.ipCount ?? request.prefixCount) === 0) {
    return { kind: 'none', reason: 'instance-at-capacity', neededIps };
  }
  return {
    kind: 'create-eni',
    deviceIndex,
    subnetCandidates,
    securityGroupIds: securityGroups.securityGroupIds,
    description: eniDescription(instance.id),
    deleteOnTermination: knobs.deleteOnTermination,
    neededIps,
    ...request,
  };
}

/** The description cilium gives the ENIs it creates: `Cilium-CNI (<instance-id>)`. */
export function eniDescription(instanceId: string): string {
  return `Cilium-CNI (${instanceId})`;
}

/** /28 prefixes that hold `addressCount` addresses: `ceil(addressCount / 16)`. */
function prefixesFor(addressCount: number): number {
  return Math.ceil(addressCount / ADDRESSES_PER_IPV4_PREFIX);
}

/** Tells "the pool is fine" from "demand exists but the cap holds it back". */
function reasonNothingNeeded(demand: PoolDemand, knobs: NodeKnobs): NoAllocationReason {
  const uncappedNeededIps = calculateNeededIps({ ...demand, maxAllocate: 0 });
  if (uncappedNeededIps === 0) return 'pool-satisfied';
  return knobs.maxAllocate > 0 ? 'max-allocate-reached' : 'instance-at-capacity';
}

/** cilium's wording, with the subnets refused this round appended when there are any. */
function noSuitableSubnetMessage(snapshot: AllocationSnapshot, refused: readonly string[]): string {
  const { instance, knobs } = snapshot;
  const refusedPart = refused.length > 0 ? ` RefusedThisRound=[${refused.join(' ')}]` : '';
  return (
    `No matching subnet available for interface creation (VPC=${instance.vpcId} ` +
    `AZ=${instance.availabilityZone} SubnetIDs=[${knobs.subnetIds.join(' ')}] ` +
    `SubnetTags=${formatTags(knobs.subnetTags)}${refusedPart})`
  );
}

/** Which addresses of one ENI leave the pool when `excessIps` are released. */
export interface ReleaseSelection {
  readonly eniId: string;
  readonly subnetId: string;
  /** Secondary IPs to unassign individually, numerically sorted. */
  readonly secondaryIps: readonly string[];
  /** Wholly unused /28 prefixes to unassign, numerically sorted. */
  readonly prefixes: readonly string[];
  /** Every address leaving the pool (secondary IPs and all addresses of the prefixes), sorted: what the handshake marks. */
  readonly ips: readonly string[];
}

export interface ExcessSelectionInputs {
  /** ENIs attached to the instance; excluded ones are skipped here. */
  readonly enis: readonly EniState[];
  readonly knobs: Pick<NodeKnobs, 'firstInterfaceIndex' | 'excludeInterfaceTags'>;
  /** `status.ipam.used`: addresses the agent has handed out. Never selected. */
  readonly usedIps: ReadonlySet<string>;
  /** How many addresses to release (`PoolDemand.excessIps`). */
  readonly excessIpCount: number;
}

/**
 * Which addresses are excess, on ONE ENI per round (cilium `PrepareIPRelease`, reference §3.10):
 * - ENIs are visited sorted by id; excluded ENIs are skipped.
 * - An ENI with prefixes: while at least 16 addresses remain to release, each of its prefixes
 *   (numeric order) that contains no used address is taken whole; then free secondary IPs up to what
 *   remains. The first such ENI with anything to release is the selection.
 * - Otherwise, among ENIs without prefixes, the one with the most releasable secondary IPs
 *   (`min(free, excess)`, first by id on ties); its lowest free addresses are taken.
 * The ENI's primary address and every address in `usedIps` are never selected. Returns `undefined`
 * when `excessIpCount <= 0` or nothing is releasable.
 */
export function computeExcessIps(inputs: ExcessSelectionInputs): ReleaseSelection | undefined {
  if (inputs.excessIpCount <= 0) return undefined;
  const candidates = inputs.enis
    .filter((eni) => !isExcluded(eni, inputs.knobs))
    .sort((left, right) => compareStrings(left.id, right.id));

  for (const eni of candidates) {
    if (eni.prefixes.length === 0) continue;
    const selection = selectOnPrefixEni(eni, inputs.usedIps, inputs.excessIpCount);
    if (selection !== undefined) return selection;
  }

  let best: ReleaseSelection | undefined;
  for (const eni of candidates) {
    if (eni.prefixes.length > 0) continue;
    const secondaryIps = freeSecondaryIps(eni, inputs.usedIps).slice(0, inputs.excessIpCount);
    if (secondaryIps.length > (best?.secondaryIps.length ?? 0)) {
      best = releaseSelection(eni, secondaryIps, []);
    }
  }
  return best;
}

function selectOnPrefixEni(
  eni: EniState,
  usedIps: ReadonlySet<string>,
  excessIpCount: number,
): ReleaseSelection | undefined {
  let remaining = excessIpCount;
  const prefixes: string[] = [];
  for (const prefix of [...eni.prefixes].sort(comparePrefixes)) {
    if (remaining < ADDRESSES_PER_IPV4_PREFIX) break;
    if (expandCidr(prefix).some((address) => usedIps.has(address))) continue;
    prefixes.push(prefix);
    remaining -= ADDRESSES_PER_IPV4_PREFIX;
  }
  const secondaryIps = freeSecondaryIps(eni, usedIps).slice(0, remaining);
  if (prefixes.length === 0 && secondaryIps.length === 0) return undefined;
  return releaseSelection(eni, secondaryIps, prefixes);
}

/** Secondary IPs of the ENI that are neither used nor its primary, numerically sorted. */
function freeSecondaryIps(eni: EniState, usedIps: ReadonlySet<string>): string[] {
  return sortIpv4(eni.secondaryIps.filter((address) => address !== eni.primaryIp && !usedIps.has(address)));
}

function releaseSelection(eni: EniState, secondaryIps: string[], prefixes: string[]): ReleaseSelection {
  return {
    eniId: eni.id,
    subnetId: eni.subnetId,
    secondaryIps,
    prefixes,
    ips: sortIpv4([...secondaryIps, ...prefixes.flatMap((prefix) => expandCidr(prefix))]),
  };
}

function comparePrefixes(left: string, right: string): number {
  return compareIpv4(left.split('/')[0] ?? '', right.split('/')[0] ?? '');
}
