import { jsonEqual } from './json-equal.ts';
import type {
  EniState,
  InstanceView,
  MutationLease,
  NodeKnobs,
  NodeRecord,
  RecordedError,
  VpcView,
} from './model.ts';

/**
 * Building node records. The record is EC2's truth as last confirmed: what a filtered Describe
 * reported, corrected by the responses of our own mutating calls while a Describe may still lag
 * behind them (EC2 is eventually consistent: a new ENI or IP can be missing from Describe for a
 * while, and that is not proof of absence).
 */

/**
 * Merges a Describe of the instance's ENIs into the recorded ENIs:
 * 1. an ENI we changed less than `consistencyGraceMs` ago keeps its recorded state (our mutation's
 *    response is newer than what a lagging Describe shows), whether or not Describe lists it;
 * 2. otherwise Describe wins: observed ENIs are taken as they are (drift and adoption included),
 *    and recorded ENIs it no longer lists are dropped (they vanished out of band).
 * The result is sorted by device index.
 */
export function mergeObservedEnis(
  recorded: readonly EniState[],
  observed: readonly EniState[],
  nowEpochMs: number,
  consistencyGraceMs: number,
): EniState[] {
  const isFresh = (eni: EniState) =>
    eni.lastMutatedAtEpochMs !== undefined && nowEpochMs - eni.lastMutatedAtEpochMs < consistencyGraceMs;
  const merged = new Map<string, EniState>();
  for (const eni of observed) merged.set(eni.id, eni);
  for (const eni of recorded) {
    if (isFresh(eni)) merged.set(eni.id, eni);
  }
  return sortByDeviceIndex([...merged.values()]);
}

function sortByDeviceIndex(enis: readonly EniState[]): EniState[] {
  return [...enis].sort(
    (left, right) => left.deviceIndex - right.deviceIndex || left.id.localeCompare(right.id),
  );
}

/** Replaces (or adds) one ENI in a list, keeping the device-index order. */
export function withEni(enis: readonly EniState[], eni: EniState): EniState[] {
  return sortByDeviceIndex([...enis.filter((existing) => existing.id !== eni.id), eni]);
}

/**
 * What one write of the node record says about the node. Fields marked "keeps" leave the recorded
 * value when absent; the others say the whole truth of this write (an absent lease or error means
 * none).
 */
export interface NodeRecordContent {
  /** The instance's identity and placement (an `InstanceView`, or the record's own). */
  readonly instance: Pick<InstanceView, 'id' | 'instanceType' | 'availabilityZone' | 'subnetId'>;
  readonly nodeName: string;
  readonly vpc: VpcView;
  readonly enis: readonly EniState[];
  readonly knobs: NodeKnobs;
  readonly prefixDelegation: boolean;
  readonly lastError?: RecordedError;
  readonly lease?: MutationLease;
  /** Replaces the recorded excess-IP marks (an empty object clears them); absent keeps them. */
  readonly excessMarks?: NodeRecord['excessMarks'];
  /** Replaces the recorded multi-pool release entries (an empty object clears them); absent keeps them. */
  readonly cidrReleases?: NodeRecord['cidrReleases'];
  /** The agent's protocol as just observed; `undefined` keeps the recorded one (no CiliumNode read). */
  readonly agentProtocol?: 'crd' | 'multi-pool';
  /**
   * The table generation this content was observed from EC2 for (the allocator's writes);
   * `undefined` keeps the recorded stamp.
   */
  readonly reconciledInTable?: string;
  /** The node's place in its life (`retireNode`, `drainNode`, `reactivateNode`); absent keeps it. */
  readonly lifecycle?: NodeRecord['lifecycle'];
  /** When DynamoDB's TTL removes the item (a retired record); absent keeps it. */
  readonly expiresAtEpochSeconds?: number;
}

/**
 * The record's content as it stands, without its lease: the base of every writer that changes only
 * part of it (release marks and CIDRs, the lifecycle), which overrides the fields it owns.
 */
export function recordedContent(record: NodeRecord): NodeRecordContent {
  return {
    instance: {
      id: record.instanceId,
      instanceType: record.instanceType,
      availabilityZone: record.availabilityZone,
      subnetId: record.nodeSubnetId,
    },
    nodeName: record.nodeName,
    vpc: record.vpc,
    enis: record.enis,
    knobs: record.knobs,
    prefixDelegation: record.prefixDelegation,
    ...(record.lastError ? { lastError: record.lastError } : {}),
  };
}

/**
 * The next version of a node's record, the ONE way every writer makes it: `previous.version + 1`
 * (or 1 for the first), `content` for what this writer says, and what it does not own kept as
 * recorded (creation time, and the "keeps" fields of `NodeRecordContent` it leaves absent).
 */
export function nextNodeRecord(
  previous: NodeRecord | undefined,
  content: NodeRecordContent,
  nowEpochMs: number,
): NodeRecord {
  const { instance } = content;
  const expiresAtEpochSeconds = content.expiresAtEpochSeconds ?? previous?.expiresAtEpochSeconds;
  return {
    instanceId: instance.id,
    version: (previous?.version ?? 0) + 1,
    nodeName: content.nodeName,
    instanceType: instance.instanceType,
    availabilityZone: instance.availabilityZone,
    nodeSubnetId: instance.subnetId,
    vpc: content.vpc,
    enis: sortByDeviceIndex(content.enis),
    knobs: content.knobs,
    prefixDelegation: content.prefixDelegation,
    ...(content.lastError ? { lastError: content.lastError } : {}),
    ...(content.lease ? { lease: content.lease } : {}),
    ...nonEmpty('excessMarks', content.excessMarks ?? previous?.excessMarks),
    ...nonEmpty('cidrReleases', content.cidrReleases ?? previous?.cidrReleases),
    ...protocolFields(previous, content.agentProtocol, nowEpochMs),
    ...stampOf(content.reconciledInTable ?? previous?.reconciledInTable),
    lifecycle: content.lifecycle ?? previous?.lifecycle ?? 'active',
    createdAtEpochMs: previous?.createdAtEpochMs ?? nowEpochMs,
    updatedAtEpochMs: nowEpochMs,
    ...(expiresAtEpochSeconds !== undefined ? { expiresAtEpochSeconds } : {}),
  };
}

/** A claim on the node for `holder` until `durationMs` from now (`NodeRecord.lease`). */
export function leaseFor(holder: string, nowEpochMs: number, durationMs: number): MutationLease {
  return { holder, expiresAtEpochMs: nowEpochMs + durationMs };
}

/**
 * The timing of a node lease of `durationMs` (`LEASE_DURATION_SECONDS`, 15 s by default):
 * - `renewalIntervalMs`: a holder that has not written for this long renews its lease (a third of
 *   the lease, so one renewal may fail or come late and the lease still holds);
 * - `mutationMarginMs`: no EC2 mutation starts on a lease with less than this left (a third of
 *   the lease); a holder that finds less renews first, and stops if the renewal finds the lease
 *   taken. It bounds how long a call started under the lease can still be on its way to EC2 when
 *   the lease lapses: see `NodeLease` for why that keeps a lapse from double-assigning;
 * - `maxHoldMs`: no lease is renewed past 15 minutes after its claim (Lambda's longest invocation),
 *   so not even a holder that never released keeps the node.
 */
export function leaseTiming(durationMs: number): {
  readonly renewalIntervalMs: number;
  readonly mutationMarginMs: number;
  readonly maxHoldMs: number;
} {
  const third = Math.floor(durationMs / 3);
  return { renewalIntervalMs: third, mutationMarginMs: third, maxHoldMs: 15 * 60_000 };
}

function stampOf(table: string | undefined): Pick<NodeRecord, 'reconciledInTable'> {
  return table === undefined ? {} : { reconciledInTable: table };
}

/** `{ [field]: entries }`, or nothing when there are no entries (the record leaves the field out). */
function nonEmpty<Field extends 'excessMarks' | 'cidrReleases'>(
  field: Field,
  entries: NodeRecord[Field],
): Pick<NodeRecord, Field> {
  return (entries !== undefined && Object.keys(entries).length > 0 ? { [field]: entries } : {}) as Pick<
    NodeRecord,
    Field
  >;
}

/** The protocol fields of the next record: the observed protocol, since when it holds. */
function protocolFields(
  previous: NodeRecord | undefined,
  observed: 'crd' | 'multi-pool' | undefined,
  nowEpochMs: number,
): Pick<NodeRecord, 'agentProtocol' | 'agentProtocolSinceEpochMs'> {
  const protocol = observed ?? previous?.agentProtocol;
  if (protocol === undefined) return {};
  const since =
    protocol === previous?.agentProtocol ? (previous.agentProtocolSinceEpochMs ?? nowEpochMs) : nowEpochMs;
  return { agentProtocol: protocol, agentProtocolSinceEpochMs: since };
}

/**
 * Whether writing `content` would change what the record says (ignoring version and timestamps),
 * so an invocation that observes nothing new writes nothing (and wakes no sync).
 */
export function recordWouldChange(previous: NodeRecord | undefined, content: NodeRecordContent): boolean {
  if (!previous) return true;
  const candidate = nextNodeRecord(previous, content, previous.updatedAtEpochMs);
  return !jsonEqual({ ...candidate, version: previous.version }, previous);
}

/** Whether an unexpired lease is held by another invocation. */
export function isLeasedByOther(record: NodeRecord | undefined, holder: string, nowEpochMs: number): boolean {
  const lease = record?.lease;
  return lease !== undefined && lease.holder !== holder && lease.expiresAtEpochMs > nowEpochMs;
}
