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
 * 3. any other field unset (absent or `null`): the stack-wide default. The agent omits zero values
 *    (`omitempty`), so "unset" is how a CiliumNode says "not configured";
 * 4. set to a value of the wrong shape (a negative or fractional count, a list holding a non-string
 *    or an empty string, a tag map with a non-string value or an empty key, a non-boolean flag): the
 *    default too, and the field is named in `malformed`, so the planner refuses the node rather than
 *    act on a guess. A filter that silently lost an entry would select MORE subnets or groups than
 *    the engineer asked for; the CRD schema rejects most of these, but not every cluster runs a
 *    validating schema (v1.12's is loose) and nothing stops a direct write to etcd;
 * 5. otherwise the CiliumNode's value. `pre-allocate: 0` stays 0, which the allocator resolves to
 *    cilium's default watermark.
 */
export function knobsFromCiliumNode(cn: CiliumNode | undefined, defaults: NodeKnobs): NodeKnobs {
  if (cn === undefined) return defaults;
  const malformed: string[] = [];
  const ipam = knobReader(cn.spec?.ipam, 'spec.ipam', malformed);
  const eni = knobReader(cn.spec?.eni, 'spec.eni', malformed);
  const knobs: NodeKnobs = {
    preAllocate: ipam('pre-allocate', nonNegativeInteger) ?? defaults.preAllocate,
    minAllocate: ipam('min-allocate', nonNegativeInteger) ?? defaults.minAllocate,
    maxAllocate: ipam('max-allocate', nonNegativeInteger) ?? defaults.maxAllocate,
    maxAboveWatermark: ipam('max-above-watermark', nonNegativeInteger) ?? defaults.maxAboveWatermark,
    firstInterfaceIndex: eni('first-interface-index', nonNegativeInteger) ?? defaults.firstInterfaceIndex,
    subnetIds: eni('subnet-ids', stringList) ?? defaults.subnetIds,
    subnetTags: eni('subnet-tags', stringMap) ?? defaults.subnetTags,
    securityGroups: eni('security-groups', stringList) ?? defaults.securityGroups,
    securityGroupTags: eni('security-group-tags', stringMap) ?? defaults.securityGroupTags,
    excludeInterfaceTags: eni('exclude-interface-tags', stringMap) ?? defaults.excludeInterfaceTags,
    usePrimaryAddress: eni('use-primary-address', boolean) ?? defaults.usePrimaryAddress,
    disablePrefixDelegation: eni('disable-prefix-delegation', boolean) ?? defaults.disablePrefixDelegation,
    deleteOnTermination: eni('delete-on-termination', boolean) ?? true,
  };
  return malformed.length > 0 ? { ...knobs, malformed } : knobs;
}

/** A value reader: the knob's value, or `undefined` when it has the wrong shape. */
interface KnobParser<T> {
  readonly expected: string;
  parse(value: unknown): T | undefined;
}

/**
 * Reads the knobs of one `section` of the spec (found at `path`): an unset knob is `undefined`; a
 * malformed one is `undefined` too, and is named in `malformed` with what was expected and found.
 */
function knobReader(section: unknown, path: string, malformed: string[]) {
  const fields = asRecord(section);
  return <T>(key: string, parser: KnobParser<T>): T | undefined => {
    const value = fields[key];
    if (value === undefined || value === null) return undefined;
    const parsed = parser.parse(value);
    if (parsed === undefined)
      malformed.push(`${path}.${key}: expected ${parser.expected}, got ${preview(value)}`);
    return parsed;
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

const nonNegativeInteger: KnobParser<number> = {
  expected: 'a non-negative integer',
  parse: (value) => (typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : undefined),
};

const boolean: KnobParser<boolean> = {
  expected: 'true or false',
  parse: (value) => (typeof value === 'boolean' ? value : undefined),
};

const stringList: KnobParser<string[]> = {
  expected: 'a list of non-empty strings',
  parse: (value) =>
    Array.isArray(value) && value.every((item) => typeof item === 'string' && item !== '')
      ? (value as string[])
      : undefined,
};

/** Tag maps: EC2 tag keys are 1 to 128 characters, so an empty key can only be a mistake. */
const stringMap: KnobParser<Tags> = {
  expected: 'a map of non-empty tag keys to string values',
  parse: (value) => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
    const entries = Object.entries(value);
    return entries.every(([key, tagValue]) => key !== '' && typeof tagValue === 'string')
      ? (Object.fromEntries(entries) as Tags)
      : undefined;
  },
};

/** A short rendering of a malformed value for the node's error: JSON, cut at 60 characters. */
function preview(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = Object.prototype.toString.call(value);
  }
  return text.length > 60 ? `${text.slice(0, 59)}…` : text;
}

/** The CiliumNode only when it belongs to this instance (a foreign one is never trusted). */
export function trustedCiliumNode(node: CiliumNode | undefined, instanceId: string): CiliumNode | undefined {
  if (!node) return undefined;
  const owner = instanceIdOfCiliumNode(node);
  return owner === undefined || owner === instanceId ? node : undefined;
}
