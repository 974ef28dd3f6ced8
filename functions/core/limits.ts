import { ADDRESSES_PER_IPV4_PREFIX, addressesTaken } from './ip-math.ts';
import type { EniState, InstanceLimits, NodeKnobs } from './model.ts';

/**
 * Per-ENI limits derived from the instance type, mirroring cilium's `getEffectiveIPLimits` and
 * `IsPrefixDelegated` (https://github.com/cilium/cilium/blob/507103c61f/pkg/aws/eni/node.go; functions/README.md,
 * *Cilium's formulas*). Pure.
 *
 * Two ways of counting coexist, on purpose:
 * - "addresses" (cilium `len(eni.Addresses)`): secondary IPs, plus 16 per delegated /28, plus the
 *   ENI primary when `usePrimaryAddress`; compared with the effective limit to find room.
 * - "address slots" (EC2's own rule): an ENI has `ipv4PerInterface` slots; the primary takes one,
 *   every secondary IP and every /28 prefix takes one. A prefix can only be added to a free slot.
 * Without prefix delegation the two agree; with it, slots are what bound `prefixCount`.
 */

/** Inputs that decide the per-ENI limit. */
export interface EniLimitContext {
  readonly limits: InstanceLimits;
  readonly usePrimaryAddress: boolean;
  /** Whether the node allocates /28 prefixes (see `isPrefixDelegationActive`). */
  readonly prefixDelegation: boolean;
}

/**
 * Addresses one ENI may hold for pods before prefix delegation: `ipv4PerInterface - 1` (the ENI's
 * primary address is reserved), `+ 1` when `usePrimaryAddress` puts the primary into the pool.
 * Never negative.
 */
export function basePodIpLimitPerEni(limits: InstanceLimits, usePrimaryAddress: boolean): number {
  return Math.max(limits.ipv4PerInterface - 1 + (usePrimaryAddress ? 1 : 0), 0);
}

/**
 * Extra addresses an ENI holds because it still carries /28 prefixes while the node no longer
 * delegates prefixes: each prefix holds 16 addresses in one slot, i.e. 15 more than a secondary
 * IP would (cilium "leftover prefix capacity"). 0 on a prefix-delegated node.
 */
export function leftoverPrefixCapacityIps(eni: EniState, prefixDelegation: boolean): number {
  if (prefixDelegation) return 0;
  return eni.prefixes.length * (ADDRESSES_PER_IPV4_PREFIX - 1);
}

/**
 * The effective address limit of one ENI (cilium `getEffectiveIPLimits`):
 * `base = ipv4PerInterface - 1 (+1 with usePrimaryAddress)`; `× 16` when the node delegates
 * prefixes; otherwise `+ 15 × prefixes` still on the ENI. Without `eni`, the node-wide per-ENI
 * limit (no leftover prefixes).
 */
export function effectiveIpLimitPerEni(context: EniLimitContext, eni?: EniState): number {
  const base = basePodIpLimitPerEni(context.limits, context.usePrimaryAddress);
  if (context.prefixDelegation) return base * ADDRESSES_PER_IPV4_PREFIX;
  return base + (eni === undefined ? 0 : leftoverPrefixCapacityIps(eni, false));
}

/**
 * How many pool addresses the ENI carries, counted as cilium counts `len(eni.Addresses)`:
 * secondary IPs + 16 per /28 prefix + 1 for the primary when `usePrimaryAddress`.
 */
export function eniAddressCount(eni: EniState, usePrimaryAddress: boolean): number {
  return addressesTaken(eni.secondaryIps.length, eni.prefixes.length) + (usePrimaryAddress ? 1 : 0);
}

/** Room on the ENI in addresses: `max(effective limit - address count, 0)` (cilium `availableOnENI`). */
export function roomOnEniIps(context: EniLimitContext, eni: EniState): number {
  return Math.max(effectiveIpLimitPerEni(context, eni) - eniAddressCount(eni, context.usePrimaryAddress), 0);
}

/**
 * EC2 address slots still free on the ENI: `ipv4PerInterface - 1 (primary) - secondary IPs -
 * prefixes`, never negative. A new secondary IP or a new /28 prefix each needs one.
 */
export function freeAddressSlots(limits: InstanceLimits, eni: EniState): number {
  return Math.max(limits.ipv4PerInterface - 1 - eni.secondaryIps.length - eni.prefixes.length, 0);
}

/** Inputs of the per-node prefix-delegation decision. */
export interface PrefixDelegationInputs {
  /** The stack-wide switch (cilium `--aws-enable-prefix-delegation`). */
  readonly stackPrefixDelegationEnabled: boolean;
  /** `undefined` when the instance type's limits are unknown. */
  readonly limits: InstanceLimits | undefined;
  readonly knobs: Pick<NodeKnobs, 'disablePrefixDelegation'>;
  /** Every ENI attached to the instance, excluded ones included (cilium looks at all of them). */
  readonly enis: readonly EniState[];
}

/** True when the instance can hold prefixes at all: a Nitro instance or bare metal. */
export function supportsPrefixDelegation(limits: InstanceLimits): boolean {
  return limits.hypervisor === 'nitro' || limits.bareMetal;
}

/**
 * Whether the node allocates /28 prefixes instead of secondary IPs (cilium `IsPrefixDelegated`).
 * True iff ALL of:
 * 1. prefix delegation is enabled for the stack;
 * 2. the instance limits are known and the instance is Nitro or bare metal;
 * 3. the node's `spec.eni.disable-prefix-delegation` is not true;
 * 4. every ENI that holds secondary IPs also holds at least one prefix (an ENI with only its
 *    primary address does not count).
 *
 * All-or-nothing rule: the decision is per node, not per ENI. Once any ENI carries plain secondary
 * IPs without a prefix, the node stays on secondary IPs for good (cilium does not convert or mix,
 * #46644); its remaining prefixes keep counting through `leftoverPrefixCapacityIps`. An ENI that
 * holds prefixes AND plain IPs (what a fallback to single IPs on a fragmented subnet leaves, cilium
 * PRs #20822 / #31016) does not end delegation, exactly as in cilium's loop; the planner therefore
 * puts fallback IPs on such an ENI first and only creates an IP-only ENI when nothing else is left
 * (`planAllocation`), and the cap counts the slots those IPs take (`slotMixCapacityAdjustmentIps`).
 */
export function isPrefixDelegationActive(inputs: PrefixDelegationInputs): boolean {
  if (!inputs.stackPrefixDelegationEnabled || inputs.limits === undefined) return false;
  if (!supportsPrefixDelegation(inputs.limits)) return false;
  if (inputs.knobs.disablePrefixDelegation) return false;
  return inputs.enis.every((eni) => eni.secondaryIps.length === 0 || eni.prefixes.length > 0);
}
