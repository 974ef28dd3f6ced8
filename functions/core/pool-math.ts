import { isExcluded } from './eni-selection.ts';
import { ADDRESSES_PER_IPV4_PREFIX, expandCidr, sortIpv4 } from './ip-math.ts';
import { basePodIpLimitPerEni, eniAddressCount } from './limits.ts';
import type { EniState, InstanceLimits, NodeKnobs } from './model.ts';

/**
 * Pool arithmetic: how many IPs a node needs or has in excess, the bounds the instance type puts on
 * that, and which addresses make up the pool. Pure; mirrors cilium `pkg/ipam/node.go`
 * (`calculateNeededIPs`, `calculateExcessIPs`) and `pkg/aws/eni/node.go`
 * (`GetMaximumAllocatableIPv4`, `GetMinimumAllocatableIPv4`), as functions/README.md
 * (*Cilium's formulas*) writes them out.
 */

/** cilium `defaults.IPAMPreAllocation`: the pre-allocate watermark when none is configured. */
export const DEFAULT_PRE_ALLOCATE_IPS = 8;

export interface NeededIpsInputs {
  /** Addresses in the pool (on non-excluded ENIs), see `countAvailableIps`. */
  readonly availableIpCount: number;
  /** Addresses the agent reports in use (`status.ipam.used`). */
  readonly usedIpCount: number;
  /** The resolved pre-allocate watermark (`resolvePreAllocate`). */
  readonly preAllocate: number;
  readonly minAllocate: number;
  /** The resolved cap (`resolveMaxAllocate`); 0 means no cap. */
  readonly maxAllocate: number;
}

/**
 * How many addresses to add (cilium `calculateNeededIPs`):
 * ```
 * needed = preAllocate - (available - used)
 * if minAllocate > 0:                                  needed = max(needed, minAllocate - available)
 * if maxAllocate > 0 and available + needed > maxAllocate: needed = maxAllocate - available
 * needed = max(needed, 0)
 * ```
 */
export function calculateNeededIps(inputs: NeededIpsInputs): number {
  const { availableIpCount, usedIpCount, preAllocate, minAllocate, maxAllocate } = inputs;
  let needed = preAllocate - (availableIpCount - usedIpCount);
  if (minAllocate > 0) needed = Math.max(needed, minAllocate - availableIpCount);
  if (maxAllocate > 0 && availableIpCount + needed > maxAllocate) needed = maxAllocate - availableIpCount;
  return Math.max(needed, 0);
}

export interface ExcessIpsInputs {
  readonly availableIpCount: number;
  readonly usedIpCount: number;
  readonly preAllocate: number;
  readonly minAllocate: number;
  readonly maxAboveWatermark: number;
}

/**
 * How many addresses the pool holds beyond what the knobs allow (cilium `calculateExcessIPs`,
 * including the `used + preAllocate <= upper bound` branch of `ba8f5c897f`, #27970):
 * ```
 * upperBound = minAllocate + maxAboveWatermark
 * if used <= upperBound:
 *   if available <= upperBound:           excess = 0
 *   else if used + preAllocate <= upperBound: excess = available - upperBound
 * otherwise:                                excess = max(available - used - preAllocate - maxAboveWatermark, 0)
 * ```
 */
export function calculateExcessIps(inputs: ExcessIpsInputs): number {
  const { availableIpCount, usedIpCount, preAllocate, minAllocate, maxAboveWatermark } = inputs;
  const upperBound = minAllocate + maxAboveWatermark;
  if (usedIpCount <= upperBound) {
    if (availableIpCount <= upperBound) return 0;
    if (usedIpCount + preAllocate <= upperBound) return availableIpCount - upperBound;
  }
  return Math.max(availableIpCount - usedIpCount - preAllocate - maxAboveWatermark, 0);
}

/**
 * The most addresses the instance can hold for pods (cilium `GetMaximumAllocatableIPv4`):
 * `(maxInterfaces - firstInterfaceIndex) × max(ipv4PerInterface - 1, 0)`, `× 16` with prefix
 * delegation. 0 means "unknown, no cap" and is returned when the limits are unknown or
 * `maxInterfaces < firstInterfaceIndex`, exactly as cilium does.
 */
export function maxAllocatableIps(
  limits: InstanceLimits | undefined,
  knobs: Pick<NodeKnobs, 'firstInterfaceIndex'>,
  prefixDelegation: boolean,
): number {
  if (limits === undefined || limits.maxInterfaces < knobs.firstInterfaceIndex) return 0;
  const perInterface =
    basePodIpLimitPerEni(limits, false) * (prefixDelegation ? ADDRESSES_PER_IPV4_PREFIX : 1);
  return (limits.maxInterfaces - knobs.firstInterfaceIndex) * perInterface;
}

/**
 * The pre-allocate watermark the instance can actually honour (cilium `GetMinimumAllocatableIPv4`,
 * the fix for tiny instances in #9730): 8 when the limits are unknown; 0 when
 * `firstInterfaceIndex >= maxInterfaces` (every ENI is excluded); else
 * `min(8, (maxInterfaces - firstInterfaceIndex) × (ipv4PerInterface - 1))`.
 */
export function minAllocatableIps(
  limits: InstanceLimits | undefined,
  knobs: Pick<NodeKnobs, 'firstInterfaceIndex'>,
): number {
  if (limits === undefined) return DEFAULT_PRE_ALLOCATE_IPS;
  if (knobs.firstInterfaceIndex >= limits.maxInterfaces) return 0;
  const capacity = (limits.maxInterfaces - knobs.firstInterfaceIndex) * basePodIpLimitPerEni(limits, false);
  return Math.min(DEFAULT_PRE_ALLOCATE_IPS, capacity);
}

/**
 * The pre-allocate watermark in force: the knob when positive, else `minAllocatableIps` (cilium
 * seeds `spec.ipam.pre-allocate` with that value when it is 0).
 */
export function resolvePreAllocate(
  knobs: Pick<NodeKnobs, 'preAllocate' | 'firstInterfaceIndex'>,
  limits: InstanceLimits | undefined,
): number {
  return knobs.preAllocate > 0 ? knobs.preAllocate : minAllocatableIps(limits, knobs);
}

/**
 * How much the address slots already taken on the node's non-excluded ENIs move
 * `maxAllocatableIps`, which assumes every slot holds what the node allocates now (EC2: each
 * secondary IP and each /28 prefix takes one of an ENI's `ipv4PerInterface - 1` slots):
 * - on a prefix-delegated node, every plain secondary IP (what a fallback to single IPs on a
 *   fragmented subnet leaves on an ENI that also holds prefixes, cilium PRs #20822 / #31016, which
 *   cilium still counts as delegated) fills a slot that could have held 16: `-15` each;
 * - on a node that does not delegate, every /28 still on an ENI holds 16 in one slot: `+15` each
 *   (cilium counts this "leftover prefix capacity" in its capacity stat and in
 *   `getEffectiveIPLimits`, but not in `GetMaximumAllocatableIPv4`, so a node that fell back from
 *   prefixes to IPs is capped below what it already holds; we count it).
 */
export function slotMixCapacityAdjustmentIps(
  enis: readonly EniState[],
  knobs: Pick<NodeKnobs, 'firstInterfaceIndex' | 'excludeInterfaceTags'>,
  prefixDelegation: boolean,
): number {
  const extraPerSlot = ADDRESSES_PER_IPV4_PREFIX - 1;
  return enis
    .filter((eni) => !isExcluded(eni, knobs))
    .reduce(
      (total, eni) =>
        total + (prefixDelegation ? -eni.secondaryIps.length : eni.prefixes.length) * extraPerSlot,
      0,
    );
}

/**
 * The allocation cap in force: the knob when positive, else `maxAllocatableIps` (cilium
 * `recalculate`) moved by `slotAdjustmentIps` (`slotMixCapacityAdjustmentIps`, 0 when every
 * slot holds what the node allocates). 0 means no cap; an adjustment never turns a cap into 0.
 */
export function resolveMaxAllocate(
  knobs: Pick<NodeKnobs, 'maxAllocate' | 'firstInterfaceIndex'>,
  limits: InstanceLimits | undefined,
  prefixDelegation: boolean,
  slotAdjustmentIps = 0,
): number {
  if (knobs.maxAllocate > 0) return knobs.maxAllocate;
  const instanceMax = maxAllocatableIps(limits, knobs, prefixDelegation);
  return instanceMax === 0 ? 0 : Math.max(instanceMax + slotAdjustmentIps, 1);
}

/**
 * The pool addresses one ENI contributes, numerically sorted: its secondary IPs, every address of
 * every /28 prefix, and its primary address when `usePrimaryAddress` (cilium `parseENI`).
 * Excluded or not is the caller's decision.
 */
export function poolAddressesOfEni(eni: EniState, usePrimaryAddress: boolean): string[] {
  const addresses = new Set<string>(eni.secondaryIps);
  for (const prefix of eni.prefixes) {
    for (const address of expandCidr(prefix)) addresses.add(address);
  }
  if (usePrimaryAddress) addresses.add(eni.primaryIp);
  return sortIpv4(addresses);
}

/**
 * The size of the pool without listing it: over non-excluded ENIs, secondary IPs + 16 per /28
 * prefix + 1 per ENI primary when `usePrimaryAddress` (cilium `available = |pool|`).
 */
export function countAvailableIps(
  enis: readonly EniState[],
  knobs: Pick<NodeKnobs, 'firstInterfaceIndex' | 'excludeInterfaceTags' | 'usePrimaryAddress'>,
): number {
  return enis
    .filter((eni) => !isExcluded(eni, knobs))
    .reduce((total, eni) => total + eniAddressCount(eni, knobs.usePrimaryAddress), 0);
}
