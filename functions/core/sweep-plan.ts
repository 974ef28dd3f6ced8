import { agentDemandOf, agentProtocolOf } from './agent-protocol.ts';
import { computePoolDemand } from './allocation-plan.ts';
import {
  planCidrRelease,
  tombstoneDurationMs,
  tombstonedCidrs,
  withoutTombstoned,
} from './cidr-release-plan.ts';
import type { CiliumNode } from './ciliumnode.ts';
import { jsonEqual } from './json-equal.ts';
import { knobsFromCiliumNode } from './knobs.ts';
import type { EniState, InstanceLimits, NodeKnobs, NodeRecord } from './model.ts';
import type { AttachedEniSummary, ClusterInstance } from './ports.ts';
import { excludedPoolIps, planRelease } from './release-plan.ts';
import { isReconciledIn } from './table-generation.ts';

/**
 * What the scheduled sweep does with each node. Pure. The sweep reads every node at once (one
 * filtered DescribeInstances for the cluster, one CiliumNode LIST, one table scan) and reconciles
 * only the nodes that need it, so its EC2 cost grows with the nodes that changed, not with the
 * cluster's ENIs. The release handshake is judged the same way, from those reads alone: a node
 * whose marks wait (inside the release delay, or for the agent's answer) costs nothing.
 */

/** Why a node's allocation is reconciled. */
type AllocationSweepReason =
  /** A running cluster member without a record: its EC2 event was missed or is still on its way. */
  | 'no-record'
  /** EC2 lists ENIs or addresses the record does not, or the other way round (out-of-band change). */
  | 'drift'
  /** The pool is below its watermarks (cilium `needed > 0`). */
  | 'needs-ips'
  /** The agent asks for IPv6 and has no /80 (cilium `neededPrefixes6 > 0`). */
  | 'needs-ipv6-prefix'
  /** The CiliumNode's knobs differ from the ones the record was planned with. */
  | 'knobs-changed'
  /** The agent now speaks another IPAM protocol than recorded (an upgrade or a downgrade). */
  | 'protocol-changed'
  /** The last attempt recorded an error: try again. */
  | 'last-error'
  /** A claim was left behind by an invocation that did not finish. */
  | 'expired-lease'
  /**
   * The record was not reconciled with EC2 in this table (restored from another table, or written
   * by an earlier release): the sync publishes nothing from it until the allocator has re-observed
   * the node here, so every such node is reconciled on the next sweep.
   */
  | 'unreconciled';

export type NodeSweepDecision =
  | {
      readonly kind: 'reconcile';
      /**
       * The allocation reason, or `release` when only the release handshake has work: the pool has
       * excess, or marks in progress can move (`planRelease` is not `none`).
       */
      readonly reason: AllocationSweepReason | 'release';
      /**
       * Whether to run the release before the allocation too. Allocation and release never both
       * act on EC2 for one node (cilium's `needed` and `excess` are exclusive), but a node that needs
       * IPs may hold marks to abort (cilium `abortNoLongerExcessIPs` runs on every recalculation),
       * so that its ready-for-release IPs return to the pool at once.
       */
      readonly release: boolean;
    }
  | { readonly kind: 'skip'; readonly reason: 'in-sync' | 'not-active' | 'leased' };

export interface NodeSweepInputs {
  readonly cluster: ClusterInstance;
  readonly record: NodeRecord | undefined;
  /** The node's CiliumNode, already checked to belong to this instance (or undefined). */
  readonly ciliumNode: CiliumNode | undefined;
  readonly defaultKnobs: NodeKnobs;
  readonly limits: InstanceLimits | undefined;
  readonly prefixDelegationEnabled: boolean;
  readonly nowEpochMs: number;
  readonly consistencyGraceMs: number;
  /** cilium `--aws-release-excess-ips`; absent means off. */
  readonly releaseEnabled?: boolean;
  /** cilium `--excess-ip-release-delay`, in milliseconds. */
  readonly releaseDelayMs?: number;
  /** How long a CIDR released from a multi-pool node is tombstoned; default `tombstoneDurationMs`. */
  readonly tombstoneMs?: number;
  /** This deployment's table generation (`NodeRecord.reconciledInTable`); absent: not checked. */
  readonly table?: string;
}

/**
 * The first rule that applies, in the order of `AllocationSweepReason`, then `release` (the
 * handshake has work), else `in-sync`. Whatever the allocation reason (except `no-record`, which
 * has no marks yet), `release` says whether the handshake has work too.
 */
export function decideNodeSweep(inputs: NodeSweepInputs): NodeSweepDecision {
  const { record, nowEpochMs } = inputs;
  if (!record) return { kind: 'reconcile', reason: 'no-record', release: false };
  if (record.lifecycle !== 'active') return { kind: 'skip', reason: 'not-active' };
  if (record.lease && record.lease.expiresAtEpochMs > nowEpochMs) return { kind: 'skip', reason: 'leased' };
  const knobs = knobsFromCiliumNode(inputs.ciliumNode, inputs.defaultKnobs);
  const release = releaseHasWork(record, knobs, inputs);
  const reconcile = (reason: AllocationSweepReason | 'release'): NodeSweepDecision => ({
    kind: 'reconcile',
    reason,
    release,
  });
  if (record.lease) return reconcile('expired-lease');
  if (inputs.table !== undefined && !isReconciledIn(record.reconciledInTable, inputs.table))
    return reconcile('unreconciled');
  const observed = withoutTombstoned(inputs.cluster.attachedEnis, tombstonedCidrs(record));
  if (hasDrifted(record.enis, observed, nowEpochMs, inputs.consistencyGraceMs)) {
    return reconcile('drift');
  }
  const agentDemand = agentDemandOf(inputs.ciliumNode);
  const demand = computePoolDemand({
    limits: inputs.limits,
    enis: record.enis,
    knobs,
    usedIpCount: agentDemand.usedIpCount,
    wantsIpv6: agentDemand.wantsIpv6,
    prefixDelegationEnabled: inputs.prefixDelegationEnabled,
  });
  if (demand.neededIps > 0) return reconcile('needs-ips');
  if (demand.neededIpv6Prefixes > 0) return reconcile('needs-ipv6-prefix');
  if (!jsonEqual(knobs, record.knobs)) return reconcile('knobs-changed');
  if (inputs.ciliumNode && agentDemand.protocol !== record.agentProtocol)
    return reconcile('protocol-changed');
  if (record.lastError) return reconcile('last-error');
  if (release) return reconcile('release');
  return { kind: 'skip', reason: 'in-sync' };
}

/**
 * Whether the release planner would do anything for the record as it stands: new marks, marks
 * that move or are dropped, or unassignments. With release off, only a node that still holds marks
 * is looked at (they are aborted).
 */
function releaseHasWork(record: NodeRecord, knobs: NodeKnobs, inputs: NodeSweepInputs): boolean {
  const releaseEnabled = inputs.releaseEnabled ?? false;
  if (
    record.cidrReleases !== undefined ||
    (releaseEnabled && agentProtocolOf(inputs.ciliumNode) === 'multi-pool')
  ) {
    const cidrPlan = planCidrRelease({
      record: { ...record, enis: withoutTombstoned(record.enis, tombstonedCidrs(record)) },
      ciliumNode: inputs.ciliumNode,
      ...(inputs.table === undefined ? {} : { table: inputs.table }),
      knobs,
      releaseEnabled,
      releaseDelayMs: inputs.releaseDelayMs ?? 0,
      tombstoneMs: inputs.tombstoneMs ?? tombstoneDurationMs(inputs.consistencyGraceMs),
      nowEpochMs: inputs.nowEpochMs,
    });
    if (cidrPlan.kind !== 'none') return true;
  }
  const idle =
    !releaseEnabled &&
    Object.keys(record.excessMarks ?? {}).length === 0 &&
    excludedPoolIps(record.enis, knobs, inputs.ciliumNode).size === 0;
  if (idle) return false;
  const plan = planRelease({
    record,
    ciliumNode: inputs.ciliumNode,
    limits: inputs.limits,
    knobs,
    prefixDelegationEnabled: inputs.prefixDelegationEnabled,
    releaseEnabled,
    releaseDelayMs: inputs.releaseDelayMs ?? 0,
    nowEpochMs: inputs.nowEpochMs,
  });
  return plan.kind !== 'none';
}

/**
 * Whether DescribeInstances disagrees with the record about which ENIs are attached at which
 * device index, or which addresses they hold. ENIs we changed within the consistency window are
 * left out: a lagging Describe is not drift.
 */
function hasDrifted(
  recorded: readonly EniState[],
  observed: readonly AttachedEniSummary[],
  nowEpochMs: number,
  consistencyGraceMs: number,
): boolean {
  const settled = (eni: EniState) =>
    eni.lastMutatedAtEpochMs === undefined || nowEpochMs - eni.lastMutatedAtEpochMs >= consistencyGraceMs;
  const recentlyChanged = new Set(recorded.filter((eni) => !settled(eni)).map((eni) => eni.id));
  const fingerprint = (eni: Pick<EniState, 'id' | 'deviceIndex' | 'secondaryIps' | 'prefixes'>) =>
    `${eni.id}@${eni.deviceIndex}:${[...eni.secondaryIps].sort().join(',')}|${[...eni.prefixes].sort().join(',')}`;
  const recordedSet = recorded.filter(settled).map(fingerprint).sort();
  const observedSet = observed
    .filter((eni) => !recentlyChanged.has(eni.id))
    .map(fingerprint)
    .sort();
  return recordedSet.join(';') !== observedSet.join(';');
}

/**
 * Records whose instance the cluster listing did not return: candidates for retirement once
 * DescribeInstances confirms the instance is terminated or gone (a stopped instance keeps its
 * ENIs and its record).
 */
export function recordsMissingFromCluster(
  records: readonly NodeRecord[],
  listedInstanceIds: ReadonlySet<string>,
): NodeRecord[] {
  return records.filter(
    (record) => record.lifecycle !== 'retired' && !listedInstanceIds.has(record.instanceId),
  );
}
