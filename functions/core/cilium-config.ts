import { CiliumConfigError } from './errors.ts';
import type { NodeKnobs, Tags } from './model.ts';

/**
 * The knobs a node's cilium-agent will register in its CiliumNode, read before it does from the
 * cluster's `cilium-config` ConfigMap, so the IPs allocated before the agent registers sit where
 * the agent will use them (the right first interface index, subnets, security groups, exclusions,
 * prefix delegation). Pure: the caller fetches the ConfigMap's `data`.
 *
 * Where the keys come from (cilium/cilium, read at main @ 6fd7b3f536, 1.21.0-dev; none of its
 * code is reproduced here):
 * - the agent reads every key of `cilium-config` as the flag of that name (the DaemonSet's
 *   `--config-dir=/tmp/cilium/config-map`, `pkg/option/config.go` `ReadDirConfig`/`MergeConfig`);
 * - the node-level flags below are declared by `pkg/nodediscovery/cell.go` (commits e8c598ba61 and
 *   65828a510c, both in 1.19.0: before them the agent had no such flags, only the CNI
 *   configuration) and copied into `spec.ipam` / `spec.eni` by `pkg/nodediscovery/eni/eni.go`;
 * - Helm renders them from `eni.nodeSpec.*` and `ipam.nodeSpec.*`
 *   (`install/kubernetes/cilium/templates/cilium-configmap.yaml`, commit a6f84c148f);
 * - values are decoded as cilium/hive decodes a ConfigMap (`vendor/github.com/cilium/hive/cell/config.go`):
 *   a list splits on commas (a single item again on whitespace), a map is JSON or `k=v,k2=v2`,
 *   booleans and integers are weakly typed.
 *
 * Not in the ConfigMap: `spec.ipam.max-above-watermark` (no flag; only the CNI configuration sets
 * it). The CNI configuration (`cni.customConf`/`cni.configMap`, an `eni` section in the node's
 * conflist) overrides these flags on the node and cannot be read from here: the stack's defaults
 * must match it. Operator keys in the same ConfigMap (`aws-enable-prefix-delegation`,
 * `aws-release-excess-ips`, `excess-ip-release-delay`, `eni-tags`, `subnet-ids-filter`, ...) are
 * cilium-operator's settings, which the stack replaces with its own context keys.
 */

export type CiliumConfigData = Readonly<Record<string, string>>;

type KnobKind = 'count' | 'boolean' | 'list' | 'map';

/** cilium-config key → the NodeKnobs field the agent registers it as (`spec.ipam.*`, `spec.eni.*`). */
const CILIUM_CONFIG_NODE_KEYS = [
  { key: 'ipam-pre-allocate', field: 'preAllocate', kind: 'count', spec: 'spec.ipam.pre-allocate' },
  { key: 'ipam-min-allocate', field: 'minAllocate', kind: 'count', spec: 'spec.ipam.min-allocate' },
  { key: 'ipam-max-allocate', field: 'maxAllocate', kind: 'count', spec: 'spec.ipam.max-allocate' },
  {
    key: 'eni-first-interface-index',
    field: 'firstInterfaceIndex',
    kind: 'count',
    spec: 'spec.eni.first-interface-index',
  },
  { key: 'eni-subnet-ids', field: 'subnetIds', kind: 'list', spec: 'spec.eni.subnet-ids' },
  { key: 'eni-subnet-tags', field: 'subnetTags', kind: 'map', spec: 'spec.eni.subnet-tags' },
  { key: 'eni-security-groups', field: 'securityGroups', kind: 'list', spec: 'spec.eni.security-groups' },
  {
    key: 'eni-security-group-tags',
    field: 'securityGroupTags',
    kind: 'map',
    spec: 'spec.eni.security-group-tags',
  },
  {
    key: 'eni-exclude-interface-tags',
    field: 'excludeInterfaceTags',
    kind: 'map',
    spec: 'spec.eni.exclude-interface-tags',
  },
  {
    key: 'eni-use-primary-address',
    field: 'usePrimaryAddress',
    kind: 'boolean',
    spec: 'spec.eni.use-primary-address',
  },
  {
    key: 'eni-disable-prefix-delegation',
    field: 'disablePrefixDelegation',
    kind: 'boolean',
    spec: 'spec.eni.disable-prefix-delegation',
  },
  {
    key: 'eni-delete-on-termination',
    field: 'deleteOnTermination',
    kind: 'boolean',
    spec: 'spec.eni.delete-on-termination',
  },
] as const satisfies readonly {
  key: string;
  field: keyof NodeKnobs;
  kind: KnobKind;
  spec: string;
}[];

/** The first cilium release whose agent reads the node-level keys (1.18 reads only its CNI configuration). */
const FIRST_CILIUM_WITH_NODE_KEYS = '1.19';

/**
 * Whether the cluster's agents read the node-level keys: from 1.19 on. `undefined` or anything
 * that is not `major.minor` (the local cloud's placeholder) counts as a current release.
 */
export function agentReadsNodeKeys(ciliumVersion: string | undefined): boolean {
  const match = /^(\d+)\.(\d+)$/.exec(ciliumVersion ?? '');
  if (!match) return true;
  const [major, minor] = [Number(match[1]), Number(match[2])];
  const [firstMajor, firstMinor] = FIRST_CILIUM_WITH_NODE_KEYS.split('.').map(Number) as [number, number];
  return major > firstMajor || (major === firstMajor && minor >= firstMinor);
}

export interface PreAgentKnobs {
  readonly knobs: NodeKnobs;
  /** The cilium-config keys that overrode a stack default. */
  readonly fromCiliumConfig: readonly string[];
}

/**
 * The stack's defaults, overridden key by key by the node-level keys `data` sets. `data`
 * undefined (no ConfigMap) or an agent that reads no node-level keys: the stack's defaults.
 * Throws `CiliumConfigError` naming the key for a value the agent would reject, and when `ipam`
 * is set to a mode other than `eni` (those agents use none of our IPs).
 */
export function preAgentKnobs(
  data: CiliumConfigData | undefined,
  stackDefaults: NodeKnobs,
  options: { readonly configMap: string; readonly agentReadsNodeKeys: boolean },
): PreAgentKnobs {
  if (data === undefined) return { knobs: stackDefaults, fromCiliumConfig: [] };
  const ipamMode = data.ipam?.trim();
  if (ipamMode !== undefined && ipamMode !== '' && ipamMode !== 'eni') {
    throw new CiliumConfigError(
      options.configMap,
      'ipam',
      `cilium runs IPAM mode ${JSON.stringify(ipamMode)}; this allocator serves ENI mode (ipam: eni) only`,
    );
  }
  if (!options.agentReadsNodeKeys) return { knobs: stackDefaults, fromCiliumConfig: [] };
  const knobs: Record<string, unknown> = { ...stackDefaults };
  const fromCiliumConfig: string[] = [];
  for (const { key, field, kind } of CILIUM_CONFIG_NODE_KEYS) {
    const raw = data[key];
    if (raw === undefined) continue;
    const parsed = PARSERS[kind](raw);
    if (parsed === undefined) {
      throw new CiliumConfigError(
        options.configMap,
        key,
        `${JSON.stringify(raw)} is not ${DESCRIPTIONS[kind]}, which cilium-agent needs`,
      );
    }
    knobs[field] = parsed;
    fromCiliumConfig.push(key);
  }
  return { knobs: knobs as unknown as NodeKnobs, fromCiliumConfig };
}

const DESCRIPTIONS: Record<KnobKind, string> = {
  count: 'a non-negative integer',
  boolean: 'a boolean (true or false)',
  list: 'a list (comma- or space-separated)',
  map: 'a map (JSON, or key=value,key2=value2)',
};

const PARSERS: Record<KnobKind, (raw: string) => unknown> = {
  count: parseCount,
  boolean: parseBoolean,
  list: parseList,
  map: parseMap,
};

function parseCount(raw: string): number | undefined {
  const text = raw.trim();
  if (!/^\+?\d+$/.test(text)) return undefined;
  const value = Number(text);
  return Number.isSafeInteger(value) ? value : undefined;
}

/** Go's strconv.ParseBool spellings, which weakly typed decoding accepts. */
function parseBoolean(raw: string): boolean | undefined {
  const text = raw.trim();
  if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(text)) return true;
  if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(text)) return false;
  return undefined;
}

function parseList(raw: string): string[] {
  const items = raw.split(',');
  const split = items.length === 1 ? raw.trim().split(/\s+/) : items.map((item) => item.trim());
  return split.filter((item) => item !== '');
}

const MAP_KEY = /^[\w\-:;./@]+$/;
/** Values may hold inner spaces, as cilium's key=value pattern allows. */
const MAP_VALUE = /^[\w\-:;./@](?:[\w\-:;./@ ]*[\w\-:;./@])?$/;

/** A map as cilium/hive decodes one: empty, JSON (an object of strings), or `k=v,k2=v2`. */
function parseMap(raw: string): Tags | undefined {
  const text = raw.trim();
  if (text === '') return {};
  if (text.startsWith('{') || text.startsWith('[')) return parseJsonMap(text);
  return parseKeyValueMap(text);
}

/** A JSON object whose values are all strings; anything else (an array, a number value) is no map. */
function parseJsonMap(text: string): Tags | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  const entries = Object.entries(parsed);
  return entries.every(([, value]) => typeof value === 'string')
    ? Object.fromEntries(entries as [string, string][])
    : undefined;
}

/** `k=v,k2=v2`; a part without `=` continues the previous value (`types=a,b,zone=x`). */
function parseKeyValueMap(text: string): Tags | undefined {
  const pairs: [string, string][] = [];
  for (const part of text.split(',')) {
    const equals = part.split('=');
    const last = pairs.at(-1);
    if (equals.length === 1 && last !== undefined && MAP_VALUE.test(part.trim())) {
      last[1] = `${last[1]},${part.trim()}`;
      continue;
    }
    const [key, value] = equals.map((piece) => piece.trim());
    if (equals.length !== 2 || !key || !value || !MAP_KEY.test(key) || !MAP_VALUE.test(value)) {
      return undefined;
    }
    pairs.push([key, value]);
  }
  return Object.fromEntries(pairs);
}
