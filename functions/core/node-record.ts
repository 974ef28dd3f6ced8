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

export function sortByDeviceIndex(enis: readonly EniState[]): EniState[] {
  return [...enis].sort(
    (left, right) => left.deviceIndex - right.deviceIndex || left.id.localeCompare(right.id),
  );
}

/** Replaces (or adds) one ENI in a list, keeping the device-index order. */
export function withEni(enis: readonly EniState[], eni: EniState): EniState[] {
  return sortByDeviceIndex([...enis.filter((existing) => existing.id !== eni.id), eni]);
}

/** What one write of the node record says about the node. */
export interface NodeRecordContent {
  readonly instance: InstanceView;
  readonly nodeName: string;
  readonly vpc: VpcView;
  readonly enis: readonly EniState[];
  readonly knobs: NodeKnobs;
  readonly prefixDelegation: boolean;
  readonly lastError?: RecordedError;
  readonly lease?: MutationLease;
  /** Replaces the recorded multi-pool release entries (tombstones of CIDRs assigned again dropped). */
  readonly cidrReleases?: NodeRecord['cidrReleases'];
  /** The agent's protocol as just observed; `undefined` keeps the recorded one (no CiliumNode read). */
  readonly agentProtocol?: 'crd' | 'multi-pool';
  /**
   * The table generation this content was observed from EC2 for (the allocator's writes);
   * `undefined` keeps the recorded stamp.
   */
  readonly reconciledInTable?: string;
}

/**
 * The next version of a node's record: `previous.version + 1` (or 1 for the first), keeping what
 * this writer does not own (creation time, excess marks, lifecycle, the EC2 stamp).
 */
export function nextNodeRecord(
  previous: NodeRecord | undefined,
  content: NodeRecordContent,
  nowEpochMs: number,
): NodeRecord {
  const { instance } = content;
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
    ...(previous?.excessMarks ? { excessMarks: previous.excessMarks } : {}),
    ...cidrReleasesOf(content.cidrReleases ?? previous?.cidrReleases),
    ...protocolFields(previous, content.agentProtocol, nowEpochMs),
    ...stampOf(content.reconciledInTable ?? previous?.reconciledInTable),
    lifecycle: previous?.lifecycle ?? 'active',
    createdAtEpochMs: previous?.createdAtEpochMs ?? nowEpochMs,
    updatedAtEpochMs: nowEpochMs,
    ...(previous?.expiresAtEpochSeconds !== undefined
      ? { expiresAtEpochSeconds: previous.expiresAtEpochSeconds }
      : {}),
  };
}

function stampOf(table: string | undefined): Pick<NodeRecord, 'reconciledInTable'> {
  return table === undefined ? {} : { reconciledInTable: table };
}

function cidrReleasesOf(releases: NodeRecord['cidrReleases']): Pick<NodeRecord, 'cidrReleases'> {
  return releases !== undefined && Object.keys(releases).length > 0 ? { cidrReleases: releases } : {};
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
