import { agentProtocolOf, allocatedCidrs } from './agent-protocol.ts';
import { withheldCidrs } from './cidr-release-plan.ts';
import {
  type AllocationMap,
  CILIUM_API_GROUP,
  CILIUM_API_VERSION,
  CILIUM_NODE_KIND,
  type CiliumEni,
  type CiliumNode,
  IPAM_IGNORE_ANNOTATION,
  type JsonPatchOperation,
  RECORD_TABLE_ANNOTATION,
  RECORD_VERSION_ANNOTATION,
  type ReleaseStatus,
} from './ciliumnode.ts';
import {
  desiredOperatorError,
  desiredPool,
  desiredStatusEnis,
  sortPrefixes,
  unpublishableRecordProblems,
} from './ciliumnode-render.ts';
import { isIpv4Address, sortIpv4 } from './ip-math.ts';
import { jsonEqual } from './json-equal.ts';
import { PatchBuilder } from './json-patch.ts';
import { instanceIdOfCiliumNode, usedIps } from './knobs.ts';
import type { NodeRecord } from './model.ts';
import { appliedRecordVersion, isReconciledIn, tableOfAnnotation } from './table-generation.ts';

/**
 * Sync planning: given ONE node-record version and the CiliumNode as last read, the single next
 * write that moves the CiliumNode towards that version, or a no-op with its reason. Pure.
 *
 * The CiliumNode has a status subresource, so spec and status change in separate writes and a
 * watcher sees every version in between. The rules below keep invariant 1 (status covers spec) at
 * EVERY version, whatever interleaving of syncs, agents and failures, because each single write
 * preserves it on its own:
 * - pool IPs are only ever added when the CURRENT status already covers them (`spec` step);
 * - status only loses ENIs/addresses after this record version has claimed the node
 *   (`spec-claim`: annotation := version and pool := pool ∩ desired, in one main-resource write),
 *   and even then keeps whatever the current pool still references.
 * The applied version lives in the `serverless-eni-ipam.io/record-version` annotation (metadata can
 * only be written through the main resource: the API server ignores it on /status writes).
 * Every patch starts with a `test` of the resourceVersion it was planned from, so a concurrent
 * writer makes it fail and the caller re-reads and re-plans.
 */

/**
 * Why a sync ends without writing (more); each reason is also the sync's outcome (`SyncOutcome`),
 * but for `in-sync` after writes, which ends as `written`.
 */
export type SyncEnd =
  /** The CiliumNode shows this record version already. */
  | 'in-sync'
  /** The CiliumNode shows a newer record version than this one: never backwards. */
  | 'stale'
  /** The record is retired: its node is gone. */
  | 'retired'
  /** The record was not reconciled with EC2 in this table yet (a restored item): wait. */
  | 'unreconciled'
  /** The CiliumNode counts in a newer table than this sync's: this deployment is superseded. */
  | 'superseded';

/** Why a sync may write nothing at all; each is also the sync's outcome (`SyncOutcome`). */
export type SyncRefusal =
  /** The CiliumNode names another instance: it is never written. */
  | 'refused-foreign'
  /** The record cannot be published (`unpublishableRecordProblems`). */
  | 'refused-unpublishable';

export type SyncStep =
  /** No CiliumNode yet: create it with an empty pool (status cannot be set on create). */
  | { readonly kind: 'create'; readonly object: CiliumNode }
  /** Main-resource write: claim the version and drop from the pool what the record removed. */
  | {
      readonly kind: 'spec-claim';
      readonly patch: JsonPatchOperation[];
      readonly pool: AllocationMap;
      readonly removedFromPool: string[];
      readonly recordVersion: number;
    }
  /** /status write: ENIs, operator-owned release states and the operator error. */
  | {
      readonly kind: 'status';
      readonly patch: JsonPatchOperation[];
      readonly enis: Record<string, CiliumEni>;
      readonly releaseIps: Record<string, ReleaseStatus>;
      readonly operatorError: string | undefined;
    }
  /** Main-resource write: the pool (as far as the current status covers it) and the annotation. */
  | {
      readonly kind: 'spec';
      readonly patch: JsonPatchOperation[];
      readonly pool: AllocationMap;
      readonly recordVersion: number;
    }
  /** Nothing may be written. */
  | { readonly kind: 'refuse'; readonly reason: SyncRefusal; readonly detail: string }
  | { readonly kind: 'none'; readonly reason: SyncEnd };

export type SyncWriteStep = Extract<SyncStep, { kind: 'create' | 'spec-claim' | 'status' | 'spec' }>;

/**
 * Whether a record version of a NEWER table generation than `table` has claimed the CiliumNode.
 * Then this sync belongs to a deployment the table switch left behind (an invocation still running
 * with the old table), and it writes nothing: claiming the node back would publish the old table's
 * record over IPs the new deployment has handed out since.
 */
function claimedByNewerTable(cn: CiliumNode, table: string): boolean {
  const version = cn.metadata.annotations?.[RECORD_VERSION_ANNOTATION];
  return version !== undefined && tableOfAnnotation(cn, table) === 'newer';
}

const isIgnoredByOperator = (cn: CiliumNode) => cn.metadata.annotations?.[IPAM_IGNORE_ANNOTATION] === 'true';

/**
 * The next step, decided in this order:
 * 1. retired record: nothing (the instance is gone; Kubernetes deletes the CiliumNode with its Node);
 * 2. unpublishable record (no node name, no VPC primary CIDR): refuse;
 * 3. the record was not reconciled with EC2 in `table` (its stamp names another table generation,
 *    or none): nothing, wait for the allocator (the sweep re-observes such a node within a minute,
 *    and its write wakes this sync through the stream). A point-in-time restore copies items as
 *    they were: a restored record may lack IPs EC2 assigned since the restore point, which pods
 *    may hold; publishing it would claim the node and drop them from `spec.ipam.pool`. Waiting is
 *    the simplest rule that is right by construction: only the allocator's EC2 observation in
 *    this table can make the record complete, and nothing is published before it. (Starting the
 *    allocation from the sync would save at most a minute, at the price of EC2 permissions and
 *    lease handling in the sync);
 * 4. no CiliumNode: `create`;
 * 5. the CiliumNode names another instance: refuse (invariant 6);
 * 6. the CiliumNode counts in a newer table generation than `table`: nothing (this sync's
 *    deployment was superseded by a table switch; see `claimedByNewerTable`);
 * 7. annotation newer than the record (in the same table): nothing (invariant 2, never backwards);
 * 8. something must be removed and this version has not claimed the node: `spec-claim`;
 * 9. status differs from its target: `status` (target = desired ∪ what the pool still references
 *    once claimed; current ∪ desired, grow only, before);
 * 10. pool or annotations differ (record version and table, `ipam.cilium.io/ignore`): `spec`
 *    (pool = desired ∩ what the current status covers);
 * 11. otherwise in sync.
 * `table` is the sync's table generation (`table-generation.ts`); without it (unit tables) steps 3
 * and 6 are skipped and versions are compared as they are.
 */
export function planSyncStep(record: NodeRecord, cn: CiliumNode | undefined, table?: string): SyncStep {
  const gate = gateSync(record, cn, table);
  if ('kind' in gate) return gate;
  const state = syncState(record, gate.cn);
  if (!gate.claimed) {
    const claim = claimStep(record, gate.cn, state, table);
    if (claim !== undefined) return claim;
  }
  return (
    statusStep(record, gate.cn, gate.claimed, state) ?? specStep(record, gate.cn, gate.claimed, state, table)
  );
}

/** Steps 1 to 7: a step decided before anything is compared, or the CiliumNode to compare and whether this version claimed it. */
function gateSync(
  record: NodeRecord,
  cn: CiliumNode | undefined,
  table: string | undefined,
): SyncStep | { readonly cn: CiliumNode; readonly claimed: boolean } {
  if (record.lifecycle === 'retired') return { kind: 'none', reason: 'retired' };
  const problems = unpublishableRecordProblems(record);
  if (problems.length > 0)
    return { kind: 'refuse', reason: 'refused-unpublishable', detail: problems.join('; ') };
  if (table !== undefined && !isReconciledIn(record.reconciledInTable, table))
    return { kind: 'none', reason: 'unreconciled' };
  if (cn === undefined) return { kind: 'create', object: initialCiliumNode(record, table) };

  const owner = instanceIdOfCiliumNode(cn);
  if (owner !== undefined && owner !== record.instanceId) {
    return {
      kind: 'refuse',
      reason: 'refused-foreign',
      detail: `CiliumNode ${cn.metadata.name} belongs to ${owner}, not ${record.instanceId}`,
    };
  }
  if (table !== undefined && claimedByNewerTable(cn, table)) return { kind: 'none', reason: 'superseded' };
  const applied = appliedRecordVersion(cn, table);
  if (applied !== undefined && applied > record.version) return { kind: 'none', reason: 'stale' };
  return { cn, claimed: applied === record.version };
}

/** What the record wants published, beside what the CiliumNode holds now. */
interface SyncState {
  readonly wantedEnis: Record<string, CiliumEni>;
  readonly wantedPool: AllocationMap;
  readonly currentEnis: Record<string, CiliumEni>;
  readonly currentPool: AllocationMap;
}

function syncState(record: NodeRecord, cn: CiliumNode): SyncState {
  // CIDRs on their way out of a multi-pool node, except those the agent lists in `allocated` in
  // THIS version: the patches below test its resourceVersion, so a CIDR leaves status only from a
  // version in which the agent does not hold it (and then it can no longer reclaim it).
  const allocated = allocatedCidrs(cn);
  const withheld = new Set([...withheldCidrs(record)].filter((cidr) => !allocated.has(cidr)));
  return {
    wantedEnis: desiredStatusEnis(record, withheld),
    wantedPool: desiredPool(record, usedIps(cn), {
      withheld,
      currentPool: Object.keys(cn.spec?.ipam?.pool ?? {}),
      multiPool: agentProtocolOf(cn) === 'multi-pool',
    }),
    currentEnis: cn.status?.eni?.enis ?? {},
    currentPool: cn.spec?.ipam?.pool ?? {},
  };
}

/** Step 8: this version must claim the node before status may lose anything or the pool shrinks. */
function claimStep(
  record: NodeRecord,
  cn: CiliumNode,
  state: SyncState,
  table: string | undefined,
): SyncStep | undefined {
  const removedFromPool = poolIpsToRemove(state.currentPool, state.wantedPool);
  if (removedFromPool.length === 0 && !statusHasExtras(state.currentEnis, state.wantedEnis)) return undefined;
  const pool = poolIntersection(state.currentPool, state.wantedPool);
  return {
    kind: 'spec-claim',
    patch: specPatch(cn, pool, record.version, table),
    pool,
    removedFromPool,
    recordVersion: record.version,
  };
}

/** Step 9: status (ENIs, the release handshake, the operator error) to its target, or undefined when it is there. */
function statusStep(
  record: NodeRecord,
  cn: CiliumNode,
  claimed: boolean,
  state: SyncState,
): SyncStep | undefined {
  const { currentEnis, currentPool, wantedEnis } = state;
  const targetEnis = claimed
    ? enisCoveringPool(wantedEnis, currentEnis, currentPool)
    : enisUnion(currentEnis, wantedEnis);
  const currentReleaseIps = cn.status?.ipam?.['release-ips'] ?? {};
  // A multi-pool (1.20) agent takes no part in the handshake: cilium-operator writes it nil for them.
  const targetReleaseIps =
    agentProtocolOf(cn) === 'multi-pool' ? {} : releaseIpsTarget(record, currentReleaseIps);
  const currentError = cn.status?.ipam?.['operator-status']?.error || undefined;
  const targetError = desiredOperatorError(record);
  const enisChanged = !jsonEqual(targetEnis, currentEnis);
  const releaseChanged = !jsonEqual(targetReleaseIps, currentReleaseIps);
  const errorChanged = currentError !== targetError;
  if (!enisChanged && !releaseChanged && !errorChanged) return undefined;
  const builder = new PatchBuilder(cn, cn.metadata.resourceVersion);
  if (enisChanged) builder.setMap(['status', 'eni', 'enis'], targetEnis);
  if (releaseChanged) builder.setMap(['status', 'ipam', 'release-ips'], targetReleaseIps);
  if (errorChanged) {
    builder.set(
      ['status', 'ipam', 'operator-status'],
      targetError === undefined ? {} : { error: targetError },
    );
  }
  return {
    kind: 'status',
    patch: builder.operations,
    enis: targetEnis,
    releaseIps: targetReleaseIps,
    operatorError: targetError,
  };
}

/** Steps 10 and 11: the pool and annotations to their target, else in sync. */
function specStep(
  record: NodeRecord,
  cn: CiliumNode,
  claimed: boolean,
  state: SyncState,
  table: string | undefined,
): SyncStep {
  const targetPool = poolCoveredByStatus(state.wantedPool, state.currentEnis);
  if (
    claimed &&
    jsonEqual(targetPool, state.currentPool) &&
    isIgnoredByOperator(cn) &&
    tableNamed(cn, table)
  ) {
    return { kind: 'none', reason: 'in-sync' };
  }
  return {
    kind: 'spec',
    patch: specPatch(cn, targetPool, record.version, table),
    pool: targetPool,
    recordVersion: record.version,
  };
}

/**
 * The ENIs whose `ipv6-prefixes` a status write asked for but the object the API server stored
 * after it lacks: a CRD that does not declare the field pruned it (`CrdFieldDroppedError`).
 */
export function enisWithDroppedIpv6Prefixes(
  written: Record<string, CiliumEni>,
  stored: CiliumNode,
): string[] {
  const storedEnis = stored.status?.eni?.enis ?? {};
  return Object.entries(written)
    .filter(
      ([eniId, eni]) =>
        (eni['ipv6-prefixes'] ?? []).length > 0 && storedEnis[eniId]?.['ipv6-prefixes'] === undefined,
    )
    .map(([eniId]) => eniId);
}

/**
 * The CiliumNode we create when the agent has not yet: the instance id (so no other record can
 * claim it), an empty pool (invariant 1 holds trivially) and the claim for this record version.
 * The agent later Gets it and Updates it; it keeps `spec.ipam.pool` on Update.
 */
function initialCiliumNode(record: NodeRecord, table?: string): CiliumNode {
  return {
    apiVersion: `${CILIUM_API_GROUP}/${CILIUM_API_VERSION}`,
    kind: CILIUM_NODE_KIND,
    metadata: {
      name: record.nodeName,
      annotations: {
        [RECORD_VERSION_ANNOTATION]: String(record.version),
        ...(table === undefined ? {} : { [RECORD_TABLE_ANNOTATION]: table }),
        [IPAM_IGNORE_ANNOTATION]: 'true',
      },
    },
    spec: { 'instance-id': record.instanceId, ipam: { pool: {} } },
  };
}

/**
 * `status.ipam.release-ips` as the operator side of the handshake writes it (cilium
 * `PopulateIPReleaseStatus`): one entry per IP the record has put into the handshake.
 * - `marked-for-release`: written, unless the agent already answered `ready-for-release` or
 *   `do-not-release`, which is kept;
 * - `released`: written over the entry the handshake left (`marked`/`ready`); once the agent has
 *   deleted the entry (its last step: released and out of the pool) it is not re-created;
 * - `ready-for-release` / `do-not-release` in the record (the allocator copied the agent's answer):
 *   whatever the CiliumNode holds is kept, since those states are the agent's to write;
 * - marks without a state (still inside the release delay) are not published.
 * IPs the record no longer marks drop out, as cilium-operator's own map drives the key set.
 */
export function releaseIpsTarget(
  record: NodeRecord,
  current: Readonly<Record<string, ReleaseStatus>>,
): Record<string, ReleaseStatus> {
  const target: Record<string, ReleaseStatus> = {};
  for (const [ip, mark] of Object.entries(record.excessMarks ?? {})) {
    const published = current[ip];
    switch (mark.state) {
      case 'marked-for-release':
        target[ip] =
          published === 'ready-for-release' || published === 'do-not-release'
            ? published
            : 'marked-for-release';
        break;
      case 'released':
        if (published !== undefined) target[ip] = 'released';
        break;
      case 'ready-for-release':
      case 'do-not-release':
        if (published !== undefined) target[ip] = published;
        break;
      case undefined:
        break;
    }
  }
  return target;
}

/** Pool IPs that are not in the wanted pool, or that now belong to another ENI. */
function poolIpsToRemove(current: AllocationMap, wanted: AllocationMap): string[] {
  return sortAddresses(Object.keys(current).filter((ip) => wanted[ip]?.resource !== current[ip]?.resource));
}

function poolIntersection(current: AllocationMap, wanted: AllocationMap): AllocationMap {
  const pool: AllocationMap = {};
  for (const ip of Object.keys(current)) {
    const wantedEntry = wanted[ip];
    if (wantedEntry !== undefined && wantedEntry.resource === current[ip]?.resource)
      pool[ip] = { ...wantedEntry };
  }
  return pool;
}

/** True when the status publishes an ENI, address or prefix the record no longer has. */
function statusHasExtras(current: Record<string, CiliumEni>, wanted: Record<string, CiliumEni>): boolean {
  return Object.entries(current).some(([eniId, eni]) => {
    const wantedEni = wanted[eniId];
    if (wantedEni === undefined) return true;
    const wantedAddresses = new Set(wantedEni.addresses ?? []);
    const wantedPrefixes = new Set([...(wantedEni.prefixes ?? []), ...(wantedEni['ipv6-prefixes'] ?? [])]);
    return (
      (eni?.addresses ?? []).some((address) => !wantedAddresses.has(address)) ||
      [...(eni?.prefixes ?? []), ...(eni?.['ipv6-prefixes'] ?? [])].some(
        (prefix) => !wantedPrefixes.has(prefix),
      )
    );
  });
}

/**
 * Status target once claimed: the wanted ENIs, plus every pool IP the current status covers and
 * the wanted status would not (an ENI the record dropped keeps its current entry; an address is
 * kept on its ENI). Normally empty, since the claim already cut the pool to the wanted one.
 */
function enisCoveringPool(
  wanted: Record<string, CiliumEni>,
  current: Record<string, CiliumEni>,
  pool: AllocationMap,
): Record<string, CiliumEni> {
  const target = structuredClone(wanted);
  for (const [ip, allocation] of Object.entries(pool)) {
    const eniId = allocation?.resource;
    if (eniId === undefined || (target[eniId]?.addresses ?? []).includes(ip)) continue;
    const currentEni = current[eniId];
    if (currentEni === undefined || !(currentEni.addresses ?? []).includes(ip)) continue;
    const targetEni = target[eniId];
    if (targetEni === undefined) {
      target[eniId] = structuredClone(currentEni);
    } else {
      targetEni.addresses = sortAddresses([...(targetEni.addresses ?? []), ip]);
    }
  }
  return target;
}

/**
 * Status target before the claim (grow only): the current ENIs, with every wanted ENI's fields
 * taken from the record and its addresses and prefixes (/28s and /80s) merged with the current ones. A slower sync
 * of an older version therefore never takes away what a newer one published.
 */
function enisUnion(
  current: Record<string, CiliumEni>,
  wanted: Record<string, CiliumEni>,
): Record<string, CiliumEni> {
  const target = structuredClone(current);
  for (const [eniId, wantedEni] of Object.entries(wanted)) {
    const currentEni = current[eniId];
    const merged = structuredClone(wantedEni);
    if (currentEni !== undefined) {
      const addresses = listUnion(wantedEni.addresses, currentEni.addresses, sortAddresses);
      const prefixes = listUnion(wantedEni.prefixes, currentEni.prefixes, sortPrefixes);
      const ipv6Prefixes = listUnion(wantedEni['ipv6-prefixes'], currentEni['ipv6-prefixes'], sortPrefixes);
      if (addresses.length > 0) merged.addresses = addresses;
      if (prefixes.length > 0) merged.prefixes = prefixes;
      if (ipv6Prefixes.length > 0) merged['ipv6-prefixes'] = ipv6Prefixes;
    }
    target[eniId] = merged;
  }
  return target;
}

/** `wanted` as rendered when `current` adds nothing to it (no reordering), else the sorted union. */
function listUnion(
  wanted: readonly string[] | undefined,
  current: readonly string[] | undefined,
  sort: (items: Iterable<string>) => string[],
): string[] {
  const wantedItems = new Set(wanted ?? []);
  const extras = (current ?? []).filter((item) => !wantedItems.has(item));
  return extras.length === 0 ? [...wantedItems] : sort(new Set([...wantedItems, ...extras]));
}

/**
 * The wanted pool restricted to what the current status covers: the IP's ENI is in
 * `status.eni.enis` and lists the IP in `addresses` (what agents' `validateENIConfig` checks).
 */
function poolCoveredByStatus(wanted: AllocationMap, enis: Record<string, CiliumEni>): AllocationMap {
  const pool: AllocationMap = {};
  const addressSets = new Map<string, Set<string>>();
  for (const [ip, allocation] of Object.entries(wanted)) {
    const eniId = allocation.resource;
    if (eniId === undefined) continue;
    let addresses = addressSets.get(eniId);
    if (addresses === undefined) {
      addresses = new Set(enis[eniId]?.addresses ?? []);
      addressSets.set(eniId, addresses);
    }
    if (addresses.has(ip)) pool[ip] = { ...allocation };
  }
  return pool;
}

/** Whether the CiliumNode's record version counts in `table` by name (nothing to name without one). */
function tableNamed(cn: CiliumNode, table: string | undefined): boolean {
  return table === undefined || cn.metadata.annotations?.[RECORD_TABLE_ANNOTATION] === table;
}

function specPatch(
  cn: CiliumNode,
  pool: AllocationMap,
  recordVersion: number,
  table: string | undefined,
): JsonPatchOperation[] {
  const builder = new PatchBuilder(cn, cn.metadata.resourceVersion);
  if (appliedRecordVersion(cn, table) !== recordVersion) {
    builder.set(['metadata', 'annotations', RECORD_VERSION_ANNOTATION], String(recordVersion));
  }
  if (!tableNamed(cn, table)) builder.set(['metadata', 'annotations', RECORD_TABLE_ANNOTATION], table);
  if (!isIgnoredByOperator(cn)) builder.set(['metadata', 'annotations', IPAM_IGNORE_ANNOTATION], 'true');
  builder.setMap(['spec', 'ipam', 'pool'], pool);
  return builder.operations;
}

/** IPv4 addresses numerically, anything else (never expected) after them in text order. */
function sortAddresses(addresses: Iterable<string>): string[] {
  const all = [...addresses];
  return [...sortIpv4(all.filter(isIpv4Address)), ...all.filter((address) => !isIpv4Address(address)).sort()];
}
