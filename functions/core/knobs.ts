import type { CiliumNode } from './ciliumnode.ts';
import { isIpv4Address, sortIpv4 } from './ip-math.ts';
import type { NodeKnobs, Tags } from './model.ts';

/**
 * What the sync and the allocator read from a CiliumNode: the per-node knobs, the instance it
 * belongs to, and the agent's demand. Pure; tolerant of any shape an agent (1.12 to 1.20) or a
 * person may have written, since CRD validation only guarantees types, not presence.
 */

/**
 * The knobs of a node that configures nothing: every watermark 0 (pre-allocate 0 resolves to
 * cilium's default of 8), no subnet or security-group selection, no exclusion, and
 * delete-on-termination on, as cilium-operator treats an unset flag.
 */
export const UNCONFIGURED_KNOBS: NodeKnobs = {
  preAllocate: 0,
  minAllocate: 0,
  maxAllocate: 0,
  maxAboveWatermark: 0,
  firstInterfaceIndex: 0,
  subnetIds: [],
  subnetTags: {},
  securityGroups: [],
  securityGroupTags: {},
  excludeInterfaceTags: {},
  usePrimaryAddress: false,
  disablePrefixDelegation: false,
  deleteOnTermination: true,
};

/**
 * The per-node knobs as cilium-operator reads them from `spec.ipam.*` and `spec.eni.*`.
 *
 * Resolution per field, in order:
 * 1. no CiliumNode yet: the stack-wide `defaults`;
 * 2. `spec.eni.delete-on-termination` unset: `true` (cilium-operator treats a nil pointer as true,
 *    whatever else is configured);
 * 3. any other field unset or malformed (negative, wrong type): the stack-wide default. The agent
 *    omits zero values (`omitempty`), so "unset" is how a CiliumNode says "not configured";
 * 4. otherwise the CiliumNode's value. `pre-allocate: 0` stays 0, which the allocator resolves to
 *    cilium's default watermark.
 */
export function knobsFromCiliumNode(cn: CiliumNode | undefined, defaults: NodeKnobs): NodeKnobs {
  if (cn === undefined) return defaults;
  const ipam = asRecord(cn.spec?.ipam);
  const eni = asRecord(cn.spec?.eni);
  return {
    preAllocate: nonNegativeInteger(ipam['pre-allocate']) ?? defaults.preAllocate,
    minAllocate: nonNegativeInteger(ipam['min-allocate']) ?? defaults.minAllocate,
    maxAllocate: nonNegativeInteger(ipam['max-allocate']) ?? defaults.maxAllocate,
    maxAboveWatermark: nonNegativeInteger(ipam['max-above-watermark']) ?? defaults.maxAboveWatermark,
    firstInterfaceIndex: nonNegativeInteger(eni['first-interface-index']) ?? defaults.firstInterfaceIndex,
    subnetIds: stringList(eni['subnet-ids']) ?? defaults.subnetIds,
    subnetTags: stringMap(eni['subnet-tags']) ?? defaults.subnetTags,
    securityGroups: stringList(eni['security-groups']) ?? defaults.securityGroups,
    securityGroupTags: stringMap(eni['security-group-tags']) ?? defaults.securityGroupTags,
    excludeInterfaceTags: stringMap(eni['exclude-interface-tags']) ?? defaults.excludeInterfaceTags,
    usePrimaryAddress: boolean(eni['use-primary-address']) ?? defaults.usePrimaryAddress,
    disablePrefixDelegation: boolean(eni['disable-prefix-delegation']) ?? defaults.disablePrefixDelegation,
    deleteOnTermination: boolean(eni['delete-on-termination']) ?? true,
  };
}

/**
 * The instance the CiliumNode belongs to: `spec.instance-id`, falling back to the obsolete
 * `spec.eni.instance-id` older agents wrote (cilium `CiliumNode.InstanceID()`). `undefined` when
 * neither is set (a CiliumNode we created before the agent started, or a non-ENI node).
 */
export function instanceIdOfCiliumNode(cn: CiliumNode): string | undefined {
  const spec = asRecord(cn.spec);
  const topLevel = spec['instance-id'];
  if (typeof topLevel === 'string' && topLevel !== '') return topLevel;
  const fromEni = asRecord(spec.eni)['instance-id'];
  if (typeof fromEni === 'string' && fromEni !== '') return fromEni;
  return undefined;
}

/** The IPv4 addresses the agent reports in use (`status.ipam.used`), sorted numerically. */
export function usedIps(cn: CiliumNode | undefined): string[] {
  const used = asRecord(cn?.status?.ipam?.used);
  return sortIpv4(Object.keys(used).filter(isIpv4Address));
}

function asRecord(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

function nonNegativeInteger(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined;
}

function boolean(value: unknown): boolean | undefined {
  return typeof value === 'boolean' ? value : undefined;
}

function stringList(value: unknown): string[] | undefined {
  if (!Array.isArray(value)) return undefined;
  return value.filter((item): item is string => typeof item === 'string' && item !== '');
}

function stringMap(value: unknown): Tags | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  return Object.fromEntries(
    Object.entries(value).filter((entry): entry is [string, string] => typeof entry[1] === 'string'),
  );
}

/** The CiliumNode only when it belongs to this instance (a foreign one is never trusted). */
export function trustedCiliumNode(node: CiliumNode | undefined, instanceId: string): CiliumNode | undefined {
  if (!node) return undefined;
  const owner = instanceIdOfCiliumNode(node);
  return owner === undefined || owner === instanceId ? node : undefined;
}
