import { type EniLimitContext, freeAddressSlots, roomOnEniIps } from './limits.ts';
import type { EniState, NodeKnobs, SubnetView, Tags } from './model.ts';

/**
 * Which ENIs the allocator may touch, and which one to fill first. Pure.
 */

/**
 * True when `tags` carries every key of `required` with the same value (cilium `Tags.Match`).
 * An empty `required` matches everything.
 */
export function matchesAllTags(tags: Tags, required: Tags): boolean {
  return Object.entries(required).every(([key, value]) => Object.hasOwn(tags, key) && tags[key] === value);
}

/**
 * True when the ENI is out of bounds for allocation, release, pool publication and capacity
 * (cilium `ENI.IsExcludedBySpec`, https://github.com/cilium/cilium/blob/507103c61f/pkg/aws/eni/types/types.go):
 * - it is `foreign` (not ours: our role may not mutate it, whatever the knobs say), or
 * - its device index is below `firstInterfaceIndex`, or
 * - `excludeInterfaceTags` is non-empty and the ENI's tags match ALL of them.
 * Excluded ENIs still occupy a device slot and are still published in `status.eni.enis`.
 */
export function isExcluded(
  eni: EniState,
  knobs: Pick<NodeKnobs, 'firstInterfaceIndex' | 'excludeInterfaceTags'>,
): boolean {
  return eni.foreign === true || isExcludedBySpec(eni, knobs);
}

/**
 * cilium `ENI.IsExcludedBySpec` alone, as the agent applies it when it derives its CIDRs (`FromResource`):
 * below `firstInterfaceIndex`, or tagged with every `excludeInterfaceTags`. An ENI that is not
 * ours but not excluded this way (eth0 at `first-interface-index` 0) is one the agent derives from.
 */
export function isExcludedBySpec(
  eni: EniState,
  knobs: Pick<NodeKnobs, 'firstInterfaceIndex' | 'excludeInterfaceTags'>,
): boolean {
  if (eni.deviceIndex < knobs.firstInterfaceIndex) return true;
  const excludeTags = knobs.excludeInterfaceTags;
  return Object.keys(excludeTags).length > 0 && matchesAllTags(eni.tags, excludeTags);
}

/** An existing ENI that can take more addresses now. */
export interface EniFillCandidate {
  readonly eni: EniState;
  readonly subnet: SubnetView;
  /** Room on the ENI in addresses (cilium `availableOnENI`). */
  readonly roomIps: number;
  /** Free EC2 address slots on the ENI (each secondary IP or /28 prefix takes one). */
  readonly freeSlots: number;
}

export interface FillOrderInputs {
  readonly enis: readonly EniState[];
  readonly subnets: readonly SubnetView[];
  readonly knobs: Pick<NodeKnobs, 'firstInterfaceIndex' | 'excludeInterfaceTags'>;
  readonly limitContext: EniLimitContext;
  /**
   * Subnets that refused what this plan would ask for during this invocation: the full ones, and on
   * a prefix-delegated node those without a free /28 (`PlanRefusals`).
   */
  readonly refusedSubnetIds?: readonly string[];
  /** ENIs EC2 called full this invocation (PrivateIpAddressLimitExceeded): no room, whatever our view. */
  readonly fullEniIds?: readonly string[];
}

/**
 * Existing ENIs that can take addresses now, in the order to fill them. An ENI qualifies when:
 * 1. it is not excluded (`isExcluded`) and EC2 has not called it full (`fullEniIds`);
 * 2. it has room (`roomOnEniIps > 0`), and on a prefix-delegated node also a free address slot
 *    for a /28;
 * 3. its subnet is known and reports `availableAddresses > 0`, and is not in `refusedSubnetIds`.
 * Order: lowest device index first, then ENI id. This mirrors cilium `PrepareIPAllocation`
 * (https://github.com/cilium/cilium/blob/507103c61f/pkg/aws/eni/node.go) except that cilium's `PrepareIPAllocation` takes the first
 * candidate in Go map order (non-deterministic); ours is stable so retries plan the same action.
 */
export function orderEnisToFill(inputs: FillOrderInputs): EniFillCandidate[] {
  const subnetsById = new Map(inputs.subnets.map((subnet) => [subnet.id, subnet]));
  const refusedSubnetIds = new Set(inputs.refusedSubnetIds ?? []);
  const fullEniIds = new Set(inputs.fullEniIds ?? []);
  const candidates: EniFillCandidate[] = [];
  for (const eni of inputs.enis) {
    if (isExcluded(eni, inputs.knobs) || fullEniIds.has(eni.id)) continue;
    const subnet = subnetsById.get(eni.subnetId);
    if (subnet === undefined || subnet.availableAddresses <= 0 || refusedSubnetIds.has(subnet.id)) continue;
    const roomIps = roomOnEniIps(inputs.limitContext, eni);
    const freeSlots = freeAddressSlots(inputs.limitContext.limits, eni);
    const hasRoom = roomIps > 0 && (!inputs.limitContext.prefixDelegation || freeSlots > 0);
    if (hasRoom) candidates.push({ eni, subnet, roomIps, freeSlots });
  }
  return candidates.sort(
    (left, right) =>
      left.eni.deviceIndex - right.eni.deviceIndex || compareStrings(left.eni.id, right.eni.id),
  );
}

/**
 * True when some non-excluded ENI still has room, whatever its subnet's state: distinguishes
 * "instance full" from "ENIs have room but their subnets are exhausted".
 */
export function anyEniHasRoom(inputs: Omit<FillOrderInputs, 'subnets' | 'refusedSubnetIds'>): boolean {
  const fullEniIds = new Set(inputs.fullEniIds ?? []);
  return inputs.enis.some(
    (eni) =>
      !isExcluded(eni, inputs.knobs) && !fullEniIds.has(eni.id) && roomOnEniIps(inputs.limitContext, eni) > 0,
  );
}

/** Plain code-unit string order, independent of locale. */
export function compareStrings(left: string, right: string): number {
  if (left < right) return -1;
  return left > right ? 1 : 0;
}
