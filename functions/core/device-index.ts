import type { EniState, InstanceLimits } from './model.ts';

/**
 * Device-index choice for a new ENI. Pure; mirrors cilium `findNextIndex` and the attach retry
 * of `CreateInterface` (https://github.com/cilium/cilium/blob/507103c61f/pkg/aws/eni/node.go). Only network
 * card 0 is used, so indexes run from 0 to `maxInterfaces - 1`.
 */

/**
 * The first device index that is `>= startIndex`, used by no attached ENI, and `< maxInterfaces`;
 * `undefined` when there is none. Heuristic, in order: start at `startIndex`; skip every index an
 * attached ENI (excluded ones included) occupies; stop at `maxInterfaces`. Cilium does not bound
 * the search itself (it checks empty slots first); we bound it so the plan never names an index
 * EC2 must reject.
 */
export function firstFreeDeviceIndex(
  enis: readonly Pick<EniState, 'deviceIndex'>[],
  startIndex: number,
  maxInterfaces: number,
): number | undefined {
  const occupied = new Set(enis.map((eni) => eni.deviceIndex));
  for (let index = Math.max(startIndex, 0); index < maxInterfaces; index++) {
    if (!occupied.has(index)) return index;
  }
  return undefined;
}

/**
 * The index to retry an attach at after EC2 said `conflictIndex` is taken ("interface attached at
 * device N": our view of the instance was stale). Cilium retries at `findNextIndex(index + 1)`, up
 * to 5 times; so do we: the first free index strictly above `conflictIndex`, or `undefined`.
 */
export function nextFreeIndexAfter(
  enis: readonly Pick<EniState, 'deviceIndex'>[],
  conflictIndex: number,
  maxInterfaces: number,
): number | undefined {
  return firstFreeDeviceIndex(enis, conflictIndex + 1, maxInterfaces);
}

/**
 * Device slots still free: `maxInterfaces - attached ENIs` (cilium `EmptyInterfaceSlots`; excluded
 * ENIs occupy slots too, the fix for #21747). Never negative.
 */
export function emptyInterfaceSlots(limits: InstanceLimits, enis: readonly EniState[]): number {
  return Math.max(limits.maxInterfaces - enis.length, 0);
}
