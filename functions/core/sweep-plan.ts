import { computePoolDemand } from './allocation-plan.ts';
import type { CiliumNode } from './ciliumnode.ts';
import { knobsFromCiliumNode, usedIps } from './knobs.ts';
import type { EniState, InstanceLimits, NodeKnobs, NodeRecord } from './model.ts';
import { stableJson } from './node-record.ts';
import type { AttachedEniSummary, ClusterInstance } from './ports.ts';

/**
 * What the scheduled sweep does with each node. Pure. The sweep reads every node at once (one
 * filtered DescribeInstances for the cluster, one CiliumNode LIST, one table scan) and reconciles
 * only the nodes that need it, so its EC2 cost grows with the nodes that changed, not with the
 * cluster's ENIs.
 */

export type NodeSweepDecision =
  | {
      readonly kind: 'reconcile';
      readonly reason: /** A running cluster member without a record: its EC2 event was missed or is still on its way. */
        | 'no-record'
        /** EC2 lists ENIs or addresses the record does not, or the other way round (out-of-band change). */
        | 'drift'
        /** The pool is below its watermarks (cilium `needed > 0`). */
        | 'needs-ips'
        /** The CiliumNode's knobs differ from the ones the record was planned with. */
        | 'knobs-changed'
        /** The last attempt recorded an error: try again. */
        | 'last-error'
        /** A claim was left behind by an invocation that did not finish. */
        | 'expired-lease';
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
}

/** The first rule that applies, in the order of `NodeSweepDecision`'s reasons. */
export function decideNodeSweep(inputs: NodeSweepInputs): NodeSweepDecision {
  const { record, nowEpochMs } = inputs;
  if (!record) return { kind: 'reconcile', reason: 'no-record' };
  if (record.lifecycle !== 'active') return { kind: 'skip', reason: 'not-active' };
  if (record.lease) {
    return record.lease.expiresAtEpochMs > nowEpochMs
      ? { kind: 'skip', reason: 'leased' }
      : { kind: 'reconcile', reason: 'expired-lease' };
  }
  if (hasDrifted(record.enis, inputs.cluster.attachedEnis, nowEpochMs, inputs.consistencyGraceMs)) {
    return { kind: 'reconcile', reason: 'drift' };
  }
  const knobs = knobsFromCiliumNode(inputs.ciliumNode, inputs.defaultKnobs);
  const demand = computePoolDemand({
    limits: inputs.limits,
    enis: record.enis,
    knobs,
    usedIpCount: usedIps(inputs.ciliumNode).length,
    prefixDelegationEnabled: inputs.prefixDelegationEnabled,
  });
  if (demand.neededIps > 0) return { kind: 'reconcile', reason: 'needs-ips' };
  if (stableJson(knobs) !== stableJson(record.knobs)) return { kind: 'reconcile', reason: 'knobs-changed' };
  if (record.lastError) return { kind: 'reconcile', reason: 'last-error' };
  return { kind: 'skip', reason: 'in-sync' };
}

/**
 * Whether DescribeInstances disagrees with the record about which ENIs are attached at which
 * device index, or which addresses they hold. ENIs we changed within the consistency window are
 * left out: a lagging Describe is not drift.
 */
export function hasDrifted(
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
