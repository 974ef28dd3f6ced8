import { emptyInterfaceSlots, firstFreeDeviceIndex } from './device-index.ts';
import {
  anyEniHasRoom,
  compareStrings,
  isExcluded,
  isExcludedBySpec,
  orderEnisToFill,
} from './eni-selection.ts';
import { ADDRESSES_PER_IPV4_PREFIX } from './ip-math.ts';
import { type EniLimitContext, isPrefixDelegationActive, supportsPrefixDelegation } from './limits.ts';
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
import { chooseSubnets, subnetIdsNameNothingHere, subnetIdsOf } from './subnet-choice.ts';

/**
 * The allocation planner: from one snapshot of a node, the ONE next action that brings its pool
 * towards the watermarks, as a value the EC2 adapter carries out. Pure. Mirrors cilium's
 * `recalculate` → `determineMaintenanceAction` → `PrepareIPAllocation` / `CreateInterface` chain
 * (https://github.com/cilium/cilium/blob/507103c61f/pkg/ipam/node.go, https://github.com/cilium/cilium/blob/507103c61f/pkg/aws/eni/node.go; the formulas
 * in functions/README.md, *Cilium's formulas*). Which addresses are excess (`PrepareIPRelease`) is
 * excess-selection.ts.
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
  /**
   * Whether the node's agent asks for IPv6 (`requested.ipv6-addrs > 0` on a multi-pool node,
   * `AgentDemand.wantsIpv6`). Absent: no (every 1.19 node, and every IPv4-only one).
   */
  readonly wantsIpv6?: boolean;
  /** The stack-wide prefix-delegation switch (cilium `--aws-enable-prefix-delegation`). */
  readonly prefixDelegationEnabled: boolean;
  /** What refused during this invocation, so the plan routes around it (`PlanRefusals`). */
  readonly refusals: PlanRefusals;
}

/**
 * Subnets and ENIs that refused during this invocation, so the plans that follow route around
 * them; all are forgotten at the end of the invocation (subnets get addresses back, defragment
 * and gain IPv6 blocks, so the next invocation asks again):
 */
export interface PlanRefusals {
  /**
   * Subnets with too few free addresses (`InsufficientFreeAddressesInSubnet`, the refusal
   * `subnet-full`): left out of every plan.
   */
  readonly fullSubnetIds: readonly string[];
  /**
   * Subnets with no free aligned /28 (`InsufficientCidrBlocks`: a fragmented subnet, the refusal
   * `no-free-prefix`) though they may still give single IPs. Consulted only on a prefix-delegated
   * node: no prefix is planned there again, and single IPs are planned only once no suitable subnet
   * is left that might give a /28 (see `planAllocation`).
   */
  readonly prefixRefusedSubnetIds: readonly string[];
  /**
   * Subnets that refused a /80 (an `Ec2Failure` of kind `ipv6-refused`): treated as not
   * dual-stack, so the planner neither asks them for IPv6 again nor loops.
   */
  readonly ipv6RefusedSubnetIds: readonly string[];
  /**
   * ENIs that refused IPv4 addresses for their own limit (`PrivateIpAddressLimitExceeded`: they
   * hold addresses our view lacks): no room on them.
   */
  readonly fullEniIds: readonly string[];
}

/**
 * The pool's state against the knobs. `neededIps` and `excessIps` are cilium's `needed` and
 * `excess` (`recalculate`): at most one of them is positive. Both are 0 when the limits are unknown or no
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
  /** cilium's `neededPrefixes6` (`neededIpv6Prefixes`): 1 or 0 IPv6 /80s to assign. */
  readonly neededIpv6Prefixes: number;
}

type DemandInputs = Pick<
  AllocationSnapshot,
  'limits' | 'enis' | 'knobs' | 'usedIpCount' | 'prefixDelegationEnabled' | 'wantsIpv6'
>;

/**
 * cilium's `neededPrefixes6` (`recalculate` in https://github.com/cilium/cilium/blob/711821bf3b/operator/pkg/ipam/nodemanager/node.go):
 * 1 when the agent asks for IPv6
 * and no ENI it derives from (`isExcludedBySpec` false) holds a /80, else 0. Never more than one,
 * whatever `ipv6-addrs` says: a /80 holds more than any node can use, and it is never released.
 */
export function neededIpv6Prefixes(inputs: Pick<DemandInputs, 'wantsIpv6' | 'enis' | 'knobs'>): number {
  if (inputs.wantsIpv6 !== true) return 0;
  const held = inputs.enis
    .filter((eni) => !isExcludedBySpec(eni, inputs.knobs))
    .reduce((sum, eni) => sum + (eni.ipv6Prefixes?.length ?? 0), 0);
  return held === 0 ? 1 : 0;
}

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
    neededIpv6Prefixes: observable ? neededIpv6Prefixes(snapshot) : 0,
  };
}

/** Why nothing is to be allocated. */
type NoAllocationReason =
  /** `neededIps` is 0: the pool meets pre-allocate and min-allocate. */
  | 'pool-satisfied'
  /** Addresses are wanted but `spec.ipam.max-allocate` caps the pool where it is. */
  | 'max-allocate-reached'
  /** Addresses are wanted but no ENI has room and no device slot is free (cilium "Instance is out of interfaces"; not an error). */
  | 'instance-at-capacity'
  /** EC2 reports the instance is not `running`; nothing can be attached (cilium skips such nodes). */
  | 'instance-not-running';

/** Why the planner cannot act; surfaced as the node's `operator-status.error`. */
type AllocationBlockedCode =
  | 'UnknownInstanceLimits'
  | 'NoInterfacesObserved'
  | 'NoSuitableSubnet'
  | 'NoSecurityGroups'
  | 'NoSubnetWithFreeAddresses'
  /** The agent asks for IPv6, but no ENI of ours and no subnet that may take one is dual-stack. */
  | 'NoDualStackSubnet'
  /** The agent asks for IPv6, but the instance type has no IPv6 addresses per interface. */
  | 'Ipv6NotSupported'
  /** A knob of the CiliumNode has the wrong shape (`NodeKnobs.malformed`): nothing is guessed. */
  | 'MalformedKnob'
  /** `spec.eni.first-interface-index` is at or beyond the instance type's interface count. */
  | 'FirstInterfaceIndexOutOfRange'
  /** `spec.eni.subnet-ids` names no subnet of the instance's VPC and zone (`subnetIdsNameNothingHere`). */
  | 'SubnetIdsUnusable';

/** How many addresses to ask EC2 for: plain secondary IPs, or /28 prefixes; never both. */
type AddressRequest =
  | { readonly ipCount: number; readonly prefixCount?: never }
  | { readonly prefixCount: number; readonly ipCount?: never };

/**
 * Marks a plan for single IPs on a prefix-delegated node: every suitable subnet refused a /28 this
 * invocation, so plain secondary IPs are asked for instead (cilium PRs #20822, #31016). Absent on
 * every other plan.
 */
interface PrefixFallbackMark {
  readonly prefixFallback?: true;
}

/**
 * The IPv6 /80 a plan asks for besides its IPv4 addresses (cilium `MaxPrefixesToAllocate`,
 * AssignIpv6Addresses or CreateNetworkInterface with `Ipv6PrefixCount=1`). Absent: none. A plan
 * for the /80 alone asks for `ipCount: 0`.
 */
interface Ipv6PrefixRequest {
  readonly ipv6PrefixCount?: 1;
}

/**
 * The next step for a node, as the round carries it out (`AllocationStep` is this plan, or a
 * repair the round itself decides). `neededIps` is cilium's `needed` for the snapshot (`recalculate`), carried for
 * logs and metrics; the requested count may exceed it by up to `max-above-watermark` (cilium
 * `MaxIPsToAllocate = needed + maxAboveWatermark`; the pending-pod surge is not modelled).
 */
export type AllocationPlan =
  | { readonly kind: 'done'; readonly reason: NoAllocationReason; readonly neededIps: number }
  | ({
      readonly kind: 'assign';
      /** An existing, non-excluded ENI with room (`AssignPrivateIpAddresses` target). */
      readonly eniId: string;
      readonly subnetId: string;
      readonly neededIps: number;
    } & AddressRequest &
      PrefixFallbackMark &
      Ipv6PrefixRequest)
  | ({
      readonly kind: 'create';
      /** The first free device index at or above `first-interface-index`. */
      readonly deviceIndex: number;
      /** Subnet ids to create in, best first; the rest are fallbacks for InsufficientFreeAddressesInSubnet. */
      readonly subnetCandidates: readonly string[];
      readonly securityGroupIds: readonly string[];
      /** `Cilium-CNI (<instance-id>)`, as cilium names its ENIs. */
      readonly description: string;
      readonly neededIps: number;
    } & AddressRequest &
      PrefixFallbackMark &
      Ipv6PrefixRequest)
  | { readonly kind: 'blocked'; readonly code: AllocationBlockedCode; readonly message: string };

/**
 * The next allocation action for the node, first rule that applies:
 * 1. instance not `running` → `done` / `instance-not-running`;
 * 2. limits unknown → `blocked` / `UnknownInstanceLimits`; no ENI observed → `blocked` /
 *    `NoInterfacesObserved` (cilium "unable to retrieve ENIs"); a knob that cannot be honoured
 *    (`refusedKnob`: malformed, or a first interface index the type does not have) → `blocked`;
 * 3. `neededIps = 0` → `done`: `max-allocate-reached` or `instance-at-capacity` when only the cap
 *    held demand back, else `pool-satisfied`;
 * 4. then, in the node's address mode (`planInMode`): fill an existing ENI, else create one.
 *
 * On a prefix-delegated node (cilium `IsPrefixDelegated`) the mode is /28 prefixes, and
 * subnets that refused a /28 this invocation (`prefixRefusedSubnetIds`) are left out of both steps:
 * a. `assign` prefixes to an ENI whose subnet did not refuse;
 * b. else `create` with prefixes in a suitable subnet that did not refuse. So when the ENI to
 *    fill sits in a fragmented subnet and a device slot is free, a new ENI in another suitable
 *    subnet gets prefixes before anything falls back (cilium retries no other subnet, #46644, and
 *    falls back to IPs on the same ENI at once, `AllocateIPs`): a slot that holds a /28 holds
 *    16 addresses, a slot that holds a single IP holds 1, and the node stays delegated;
 * c. only when neither is possible and some subnet refused, single IPs (`prefixFallback`, cilium
 *    PRs #20822, #31016): first on an ENI that already holds prefixes (it stays delegated under
 *    cilium's rule, which looks only for ENIs with IPs but no prefix), then on any ENI with a free
 *    slot, then on a new ENI in any suitable subnet, which turns the node off prefix delegation for
 *    good (cilium's all-or-nothing rule, `isPrefixDelegationActive`). Every later plan for the node
 *    is then in IPs, leftover prefixes counting through `leftoverPrefixCapacityIps`.
 * 5. when the agent asks for IPv6 and has no /80 yet (`neededIpv6Prefixes`), the /80 joins the plan
 *    or follows it (`withIpv6Prefix`).
 */
export function planAllocation(snapshot: AllocationSnapshot): AllocationPlan {
  const { instance, limits, enis } = snapshot;
  if (instance.state !== 'running') return { kind: 'done', reason: 'instance-not-running', neededIps: 0 };
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
  const refused = refusedKnob(snapshot, limits);
  if (refused !== undefined) return refused;

  const demand = computePoolDemand(snapshot);
  const ipv4 = planIpv4(snapshot, limits, demand);
  return demand.neededIpv6Prefixes > 0 ? withIpv6Prefix(ipv4, snapshot, limits, demand.neededIps) : ipv4;
}

/**
 * A knob the node cannot be served under, as the `blocked` plan that names it; `undefined` when
 * every knob can be honoured. Both cases would otherwise pass unseen: a malformed knob reads as
 * its default (`knobsFromCiliumNode`), and a first interface index at or beyond the type's
 * interfaces leaves no slot for a new ENI, which looks exactly like a full instance
 * (`instance-at-capacity`) though the node holds no address of ours. Cilium attaches at the index
 * anyway and fails on EC2's refusal, every interval.
 */
function refusedKnob(snapshot: AllocationSnapshot, limits: InstanceLimits): AllocationPlan | undefined {
  const { instance, knobs } = snapshot;
  if (knobs.malformed !== undefined && knobs.malformed.length > 0) {
    return {
      kind: 'blocked',
      code: 'MalformedKnob',
      message: `refusing to allocate for instance ${instance.id} until its CiliumNode is fixed: ${knobs.malformed.join('; ')}`,
    };
  }
  if (knobs.firstInterfaceIndex >= limits.maxInterfaces) {
    return {
      kind: 'blocked',
      code: 'FirstInterfaceIndexOutOfRange',
      message:
        `spec.eni.first-interface-index ${knobs.firstInterfaceIndex} is beyond instance type ` +
        `${instance.instanceType}, whose ${limits.maxInterfaces} interfaces have device indexes 0 to ` +
        `${limits.maxInterfaces - 1}: no ENI of instance ${instance.id} may be used or attached`,
    };
  }
  return undefined;
}

/** Rules 3 and 4 of `planAllocation`: the IPv4 addresses the watermarks ask for. */
function planIpv4(snapshot: AllocationSnapshot, limits: InstanceLimits, demand: PoolDemand): AllocationPlan {
  const { knobs } = snapshot;
  const { neededIps, prefixDelegation } = demand;
  if (neededIps === 0) return { kind: 'done', reason: reasonNothingNeeded(demand, knobs), neededIps };

  const context: ModeContext = {
    snapshot,
    limits,
    neededIps,
    maxIpsToAllocate: neededIps + knobs.maxAboveWatermark,
    limitContext: { limits, usePrimaryAddress: knobs.usePrimaryAddress, prefixDelegation },
  };
  const { fullSubnetIds, prefixRefusedSubnetIds } = snapshot.refusals;
  if (!prefixDelegation) return planInMode(context, 'ips', fullSubnetIds);

  const withPrefixes = planInMode(context, 'prefixes', [...fullSubnetIds, ...prefixRefusedSubnetIds]);
  if (isAction(withPrefixes) || prefixRefusedSubnetIds.length === 0) return withPrefixes;
  const withIps = planInMode(context, 'ips', fullSubnetIds);
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

type ActionPlan = Extract<AllocationPlan, { kind: 'assign' | 'create' }>;

function isAction(plan: AllocationPlan): plan is ActionPlan {
  return plan.kind === 'assign' || plan.kind === 'create';
}

/**
 * Fill, else create, asking for `mode` (cilium `PrepareIPAllocation` → `AllocateIPs`, else
 * `CreateInterface`), with `refusedSubnetIds` left out:
 * 1. an existing ENI can take addresses (`orderEnisToFill`; on a prefix-delegated node it needs a
 *    free slot) → `assign` `count = min(room on ENI, free slots, subnet free, needed +
 *    maxAboveWatermark)`; in prefixes `prefixCount = min(ceil(count / 16), free slots)`. In IPs on
 *    a prefix-delegated node (the fallback), an ENI that already holds prefixes is preferred;
 * 2. no free device slot → `done` / `instance-at-capacity`, or `blocked` /
 *    `NoSubnetWithFreeAddresses` when ENIs have room but their subnets are exhausted;
 * 3. no subnet (`chooseSubnets`) → `blocked` / `NoSuitableSubnet`; no security group
 *    (`chooseSecurityGroups`) → `blocked` / `NoSecurityGroups`;
 * 4. otherwise `create` with `ipCount = min(needed + maxAboveWatermark, ipv4PerInterface - 1)`,
 *    or in prefixes `prefixCount = ceil(min(needed + maxAboveWatermark,
 *    (ipv4PerInterface - 1) × 16) / 16)` (the 1.20 rule, `4054d73f2e`).
 */
function planInMode(
  context: ModeContext,
  mode: 'prefixes' | 'ips',
  refusedSubnetIds: readonly string[],
): AllocationPlan {
  const fill = fillPlan(context, mode, refusedSubnetIds);
  if (fill !== undefined) return fill;
  const { snapshot, limits, neededIps, maxIpsToAllocate, limitContext } = context;
  const { instance, enis, knobs } = snapshot;
  const deviceIndex = freeDeviceIndex(snapshot, limits);
  if (deviceIndex === undefined) {
    if (anyEniHasRoom({ enis, knobs, limitContext, fullEniIds: snapshot.refusals.fullEniIds })) {
      return {
        kind: 'blocked',
        code: 'NoSubnetWithFreeAddresses',
        message:
          `instance ${instance.id} has ENIs with room but their subnets have no free addresses, ` +
          'and no device slot is free for an ENI in another subnet',
      };
    }
    return { kind: 'done', reason: 'instance-at-capacity', neededIps };
  }

  const subnetCandidates = newEniSubnets(snapshot, limits, refusedSubnetIds);
  if (subnetCandidates.length === 0) return noSubnetPlan(snapshot, refusedSubnetIds);
  const secondaryIpsPerEni = Math.max(limits.ipv4PerInterface - 1, 0);
  const request: AddressRequest =
    mode === 'prefixes'
      ? {
          prefixCount: prefixesFor(
            Math.min(maxIpsToAllocate, secondaryIpsPerEni * ADDRESSES_PER_IPV4_PREFIX),
          ),
        }
      : { ipCount: Math.min(maxIpsToAllocate, secondaryIpsPerEni) };
  const plan = createEniPlan(snapshot, { deviceIndex, subnetCandidates, neededIps }, request);
  if (plan.kind === 'create' && (request.ipCount ?? request.prefixCount) === 0) {
    return { kind: 'done', reason: 'instance-at-capacity', neededIps };
  }
  return plan;
}

/**
 * Rule 1 of `planInMode`: an `assign` to the first ENI to fill (on a prefix-delegated node asking
 * for single IPs, one that already holds prefixes first), or undefined when none has room.
 */
function fillPlan(
  context: ModeContext,
  mode: 'prefixes' | 'ips',
  refusedSubnetIds: readonly string[],
): AllocationPlan | undefined {
  const { snapshot, neededIps, maxIpsToAllocate, limitContext } = context;
  const { enis, knobs } = snapshot;
  const fillOrder = orderEnisToFill({
    enis,
    subnets: snapshot.subnets,
    knobs,
    limitContext,
    refusedSubnetIds,
    fullEniIds: snapshot.refusals.fullEniIds,
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
  return undefined;
}

/** The first free device index at or above `first-interface-index`, when a device slot is free. */
function freeDeviceIndex(snapshot: AllocationSnapshot, limits: InstanceLimits): number | undefined {
  const { enis, knobs } = snapshot;
  return emptyInterfaceSlots(limits, enis) > 0
    ? firstFreeDeviceIndex(enis, knobs.firstInterfaceIndex, limits.maxInterfaces)
    : undefined;
}

/** The subnets a new ENI may go to, best first (`chooseSubnets`), without `refusedSubnetIds`. */
function newEniSubnets(
  snapshot: AllocationSnapshot,
  limits: InstanceLimits,
  refusedSubnetIds: readonly string[],
): string[] {
  return subnetIdsOf(
    chooseSubnets({
      instance: snapshot.instance,
      subnets: snapshot.subnets,
      knobs: snapshot.knobs,
      ipv4PerInterface: limits.ipv4PerInterface,
      refusedSubnetIds,
    }),
  );
}

/**
 * `create` at the placement with `request`, the node's security groups (`chooseSecurityGroups`),
 * cilium's description and the node's delete-on-termination; or the security groups' `blocked`.
 */
function createEniPlan(
  snapshot: AllocationSnapshot,
  placement: {
    readonly deviceIndex: number;
    readonly subnetCandidates: readonly string[];
    readonly neededIps: number;
  },
  request: AddressRequest & Ipv6PrefixRequest,
): AllocationPlan {
  const { instance, knobs } = snapshot;
  const securityGroups = chooseSecurityGroups({
    vpcId: instance.vpcId,
    knobs,
    securityGroups: snapshot.securityGroups,
    enis: snapshot.enis,
  });
  if (securityGroups.kind === 'blocked') return securityGroups;
  return {
    kind: 'create',
    deviceIndex: placement.deviceIndex,
    subnetCandidates: [...placement.subnetCandidates],
    securityGroupIds: securityGroups.securityGroupIds,
    description: eniDescription(instance.id),
    neededIps: placement.neededIps,
    ...request,
  };
}

/**
 * The /80 a 1.20 agent asks for (cilium `MaxPrefixesToAllocate = neededPrefixes6`), with the
 * IPv4 plan `ipv4`, first rule that applies:
 * 1. the instance type cannot hold a /80 (`ipv6PerInterface` 0, or not Nitro nor bare metal: EC2
 *    delegates prefixes only there): an IPv4 action as it is, else `blocked` / `Ipv6NotSupported`;
 * 2. `assign` to an ENI that can hold a /80 (`ipv6CapableEnis`): that plan with `ipv6PrefixCount`
 *    (cilium asks on the ENI chosen for IPv4);
 * 3. `create` whose first subnet is dual-stack: that plan with `ipv6PrefixCount`, its subnets
 *    cut to the dual-stack ones (a fallback subnet must take the /80 too);
 * 4. any other IPv4 action as it is: the /80 follows in the next round;
 * 5. no IPv4 action (`done`, `blocked`): the /80 alone (`planIpv6PrefixAlone`), except that an IPv4
 *    `blocked` is reported before an IPv6 one.
 * IPv4 is served whatever happens to IPv6 (an agent with IPv6 waits for both; IPv4-only pods do not).
 */
function withIpv6Prefix(
  ipv4: AllocationPlan,
  snapshot: AllocationSnapshot,
  limits: InstanceLimits,
  neededIps: number,
): AllocationPlan {
  const supported = limits.ipv6PerInterface !== 0 && supportsPrefixDelegation(limits);
  if (ipv4.kind === 'assign') {
    const capable = supported && ipv6CapableEnis(snapshot, limits).some((eni) => eni.id === ipv4.eniId);
    return capable ? { ...ipv4, ipv6PrefixCount: 1 } : ipv4;
  }
  if (ipv4.kind === 'create') return supported ? withIpv6OnNewEni(ipv4, snapshot) : ipv4;
  const alone = supported
    ? planIpv6PrefixAlone(snapshot, limits, neededIps)
    : ({
        kind: 'blocked',
        code: 'Ipv6NotSupported',
        message:
          `instance type ${snapshot.instance.instanceType} cannot hold an IPv6 /80 (no IPv6 addresses per interface, ` +
          `or no prefix delegation: not Nitro); instance ${snapshot.instance.id} cannot get the /80 its agent asks for`,
      } as const);
  return alone.kind === 'blocked' && ipv4.kind === 'blocked' ? ipv4 : alone;
}

type CreatePlan = Extract<AllocationPlan, { kind: 'create' }>;

function withIpv6OnNewEni(plan: CreatePlan, snapshot: AllocationSnapshot): CreatePlan {
  const dualStack = dualStackSubnetIds(snapshot);
  const first = plan.subnetCandidates[0];
  if (first === undefined || !dualStack.has(first)) return plan;
  return {
    ...plan,
    subnetCandidates: plan.subnetCandidates.filter((subnetId) => dualStack.has(subnetId)),
    ipv6PrefixCount: 1,
  };
}

/**
 * The /80 with no IPv4 address this round (cilium `AllocateIPs` with only `MaxPrefixesToAllocate`,
 * or `CreateInterface` with nothing to allocate but the /80), first rule that applies:
 * 1. an ENI that can hold it (`ipv6CapableEnis`, lowest device index first): `assign` with
 *    `ipCount: 0` and `ipv6PrefixCount`;
 * 2. a free device slot, a dual-stack subnet among those a new ENI may go to (`chooseSubnets`, in
 *    its order) and security groups: `create` with only the ENI's primary IPv4 and the /80;
 * 3. otherwise `blocked` / `NoDualStackSubnet` (or the security groups' `blocked`): the node keeps
 *    its IPv4, and its CiliumNode says why its agent gets no IPv6.
 */
function planIpv6PrefixAlone(
  snapshot: AllocationSnapshot,
  limits: InstanceLimits,
  neededIps: number,
): AllocationPlan {
  const onEni = ipv6CapableEnis(snapshot, limits)[0];
  if (onEni !== undefined) {
    return {
      kind: 'assign',
      eniId: onEni.id,
      subnetId: onEni.subnetId,
      neededIps,
      ipCount: 0,
      ipv6PrefixCount: 1,
    };
  }
  const deviceIndex = freeDeviceIndex(snapshot, limits);
  const dualStack = dualStackSubnetIds(snapshot);
  const subnetCandidates = newEniSubnets(snapshot, limits, snapshot.refusals.fullSubnetIds).filter(
    (subnetId) => dualStack.has(subnetId),
  );
  if (deviceIndex !== undefined && subnetIdsNameNothingHere(snapshot)) return subnetIdsUnusable(snapshot);
  if (deviceIndex === undefined || subnetCandidates.length === 0) {
    return {
      kind: 'blocked',
      code: 'NoDualStackSubnet',
      message: noDualStackSubnetMessage(snapshot, deviceIndex === undefined),
    };
  }
  return createEniPlan(
    snapshot,
    { deviceIndex, subnetCandidates, neededIps },
    { ipCount: 0, ipv6PrefixCount: 1 },
  );
}

/**
 * ENIs that can take the /80, lowest device index first: not excluded (ours, and one the agent
 * derives from), in a dual-stack subnet that did not refuse IPv6 this invocation, with room under
 * Ipv6AddressesPerInterface (each /80 counts as one address; AWS gives as many as IPv4 when the
 * type does not say). IPv6 /128 addresses are not tracked: none of ours has one.
 */
function ipv6CapableEnis(snapshot: AllocationSnapshot, limits: InstanceLimits): EniState[] {
  const dualStack = dualStackSubnetIds(snapshot);
  const perEni = limits.ipv6PerInterface ?? limits.ipv4PerInterface;
  return snapshot.enis
    .filter(
      (eni) =>
        !isExcluded(eni, snapshot.knobs) &&
        dualStack.has(eni.subnetId) &&
        (eni.ipv6Prefixes?.length ?? 0) < perEni,
    )
    .sort((left, right) => left.deviceIndex - right.deviceIndex || compareStrings(left.id, right.id));
}

/** Subnets with an IPv6 block that have not refused a /80 during this invocation. */
function dualStackSubnetIds(snapshot: AllocationSnapshot): Set<string> {
  const refused = new Set(snapshot.refusals.ipv6RefusedSubnetIds);
  return new Set(
    snapshot.subnets
      .filter((subnet) => subnet.ipv6Cidr !== undefined && !refused.has(subnet.id))
      .map((subnet) => subnet.id),
  );
}

function noDualStackSubnetMessage(snapshot: AllocationSnapshot, noFreeSlot: boolean): string {
  const { instance, knobs } = snapshot;
  const refused = snapshot.refusals.ipv6RefusedSubnetIds;
  const where = noFreeSlot
    ? 'no device slot is free for an ENI in a dual-stack subnet'
    : 'no subnet a new ENI may go to has an IPv6 CIDR block';
  return (
    `the agent of instance ${instance.id} asks for IPv6, but none of its ENIs is in a dual-stack subnet and ${where} ` +
    `(VPC=${instance.vpcId} AZ=${instance.availabilityZone} SubnetIDs=[${knobs.subnetIds.join(' ')}] ` +
    `SubnetTags=${formatTags(knobs.subnetTags)}${refused.length > 0 ? ` Ipv6RefusedThisRound=[${refused.join(' ')}]` : ''}); ` +
    'IPv4 is still served'
  );
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

/**
 * Why no subnet may take a new ENI: `SubnetIdsUnusable` when `subnet-ids` names none of the VPC and
 * zone (`subnetIdsNameNothingHere`), else `NoSuitableSubnet` (every one is full or refused).
 */
function noSubnetPlan(snapshot: AllocationSnapshot, refused: readonly string[]): AllocationPlan {
  if (subnetIdsNameNothingHere(snapshot)) return subnetIdsUnusable(snapshot);
  return { kind: 'blocked', code: 'NoSuitableSubnet', message: noSuitableSubnetMessage(snapshot, refused) };
}

function subnetIdsUnusable(snapshot: AllocationSnapshot): AllocationPlan {
  const { instance, knobs } = snapshot;
  return {
    kind: 'blocked',
    code: 'SubnetIdsUnusable',
    message:
      `spec.eni.subnet-ids [${knobs.subnetIds.join(' ')}] names no subnet of VPC ${instance.vpcId} in zone ` +
      `${instance.availabilityZone} (each is unknown, in another VPC or in another zone)` +
      (Object.keys(knobs.subnetTags).length > 0
        ? ` and SubnetTags=${formatTags(knobs.subnetTags)} match none there`
        : '') +
      `; no ENI is created for instance ${instance.id} outside the subnets it names`,
  };
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
