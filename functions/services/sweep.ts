import { type AgentProtocol, agentProtocolOf } from '../core/agent-protocol.ts';
import { clusterTagKey, nodeNameFor } from '../core/cluster-membership.ts';
import { forEachWithConcurrency } from '../core/concurrency.ts';
import { trustedCiliumNode } from '../core/knobs.ts';
import type { InstanceLimits } from '../core/model.ts';
import { decideNodeSweep, type NodeSweepDecision, recordsMissingFromCluster } from '../core/sweep-plan.ts';
import { readAllRecords } from '../core/unreadable-records.ts';
import { type AllocationDependencies, allocateNode } from './allocate-node.ts';
import { type LifecycleDependencies, retireNode } from './node-lifecycle.ts';
import { releaseExcess } from './release-excess.ts';
import type { ReleaseSettings } from './release-record.ts';

/**
 * The scheduled sweep. EC2 events are best effort, so every minute it compares the whole cluster
 * with the records, from three reads: one filtered DescribeInstances for the cluster's instances
 * (with their ENIs' addresses), one CiliumNode LIST (demand and knobs), one table scan. Then it
 * reconciles only the nodes that need it (missed launch, drift, deficit, changed knobs, a recorded
 * error, an abandoned claim) through the same path as the EC2-event function, advances the excess-IP
 * release handshake of the nodes where it can move (`releaseExcess`), and retires records whose
 * instance is gone. A table item that cannot be read (`readAllRecords`: a newer release's layout,
 * wrong types) is that node's failure, listed and logged, and its instance is left alone this
 * round (neither served as a missed launch nor retired); every other node is swept as usual.
 */

export interface SweepDependencies extends Omit<AllocationDependencies, 'invocationId'> {
  readonly lifecycle: LifecycleDependencies;
  /** Nodes reconciled at a time. */
  readonly concurrency: number;
  readonly invocationId: string;
  /** Excess-IP release (cilium `--aws-release-excess-ips`); absent means off. */
  readonly release?: ReleaseSettings;
}

export interface SweepSummary {
  readonly clusterInstances: number;
  readonly records: number;
  readonly reconciled: Readonly<Record<string, number>>;
  readonly skipped: Readonly<Record<string, number>>;
  readonly retired: number;
  /** Running nodes per agent IPAM protocol, as their CiliumNodes show it now (`agentProtocolOf`). */
  readonly agentProtocols: Readonly<Record<AgentProtocol, number>>;
  readonly failed: readonly { readonly instanceId: string; readonly error: string }[];
}

/** States in which an instance keeps its record (stopped instances keep their ENIs). */
const LIVE_STATES = ['pending', 'running', 'stopping', 'stopped'] as const;

/**
 * One sweep, in four phases: observe the cluster once (`observeCluster`), decide per running node
 * (`decideNodes`, pure), reconcile the nodes that need it (`reconcileNodes`), and retire the
 * records whose instance left (`retireMissing`). A node's failure is listed and logged; the others
 * go on.
 */
export async function sweep(deps: SweepDependencies): Promise<SweepSummary> {
  const observed = await observeCluster(deps);
  const failed: { instanceId: string; error: string }[] = [...observed.unreadable];
  for (const item of observed.unreadable) {
    deps.log.error('sweep cannot read a node record; node left alone', { ...item });
  }
  const { decisions, agentProtocols } = decideNodes(observed, deps);
  const skipped: Record<string, number> = {};
  for (const { decision } of decisions) {
    if (decision.kind === 'skip') skipped[decision.reason] = (skipped[decision.reason] ?? 0) + 1;
  }
  // Paused (the hand-over, the rollback): observe only. What would have been reconciled is counted
  // (and logged) as skipped `paused`; nothing is allocated or released.
  const wouldReconcile = decisions.filter(({ decision }) => decision.kind === 'reconcile');
  if (observed.settings.paused && wouldReconcile.length > 0) {
    skipped.paused = wouldReconcile.length;
    deps.log.info('paused: nodes left to their current allocator', {
      instanceIds: wouldReconcile.map(({ instanceId }) => instanceId),
    });
  }
  const reconciled = await reconcileNodes(
    observed.settings.paused ? [] : wouldReconcile,
    observed,
    deps,
    failed,
  );
  const retired = await retireMissing(observed, deps, failed);
  const summary: SweepSummary = {
    clusterInstances: observed.clusterInstances.length,
    records: observed.records.length,
    reconciled,
    skipped,
    retired,
    agentProtocols,
    failed,
  };
  deps.log.info('sweep finished', { ...summary });
  return summary;
}

type Observed = Awaited<ReturnType<typeof observeCluster>>;

/** Everything the sweep decides from, read once and concurrently. */
async function observeCluster(deps: SweepDependencies) {
  const [clusterInstances, { records, unreadable }, ciliumNodes, defaultKnobs, table] = await Promise.all([
    deps.ec2.listClusterInstances(
      clusterTagKey(deps.settings.clusterName),
      deps.settings.clusterTagValues,
      LIVE_STATES,
    ),
    readAllRecords(deps.store),
    deps.ciliumNodes.list(),
    deps.preAgentKnobs(),
    deps.tableGeneration(),
  ]);
  const limitsByType = await limitsOf(
    new Set(clusterInstances.map((listed) => listed.instance.instanceType)),
    deps,
  );
  return {
    clusterInstances,
    records,
    unreadable,
    ciliumNodes,
    table,
    limitsByType,
    // One reading of the pre-agent knobs for every node of this sweep (and the work it does on them).
    settings: { ...deps.settings, defaultKnobs },
    release: deps.release ?? { enabled: false, delayMs: 0 },
  };
}

/** Each running, readable node's decision, and the agent protocols their CiliumNodes show. Pure. */
function decideNodes(observed: Observed, deps: Pick<SweepDependencies, 'clock'>) {
  const { settings, release, table } = observed;
  const recordById = new Map(observed.records.map((record) => [record.instanceId, record]));
  const ciliumNodeByName = new Map(observed.ciliumNodes.map((node) => [node.metadata.name, node]));
  const unreadableIds = new Set(observed.unreadable.map((item) => item.instanceId));
  const agentProtocols: Record<AgentProtocol, number> = { crd: 0, 'multi-pool': 0 };
  const decisions = observed.clusterInstances
    .filter((listed) => listed.instance.state === 'running' && !unreadableIds.has(listed.instance.id))
    .map((listed) => {
      const ciliumNode = trustedCiliumNode(
        ciliumNodeByName.get(nodeNameFor(listed.instance, settings.nodeNaming)),
        listed.instance.id,
      );
      if (ciliumNode) agentProtocols[agentProtocolOf(ciliumNode)]++;
      const decision: NodeSweepDecision = decideNodeSweep({
        cluster: listed,
        record: recordById.get(listed.instance.id),
        ciliumNode,
        defaultKnobs: settings.defaultKnobs,
        limits: observed.limitsByType.get(listed.instance.instanceType),
        prefixDelegationEnabled: settings.prefixDelegationEnabled,
        nowEpochMs: deps.clock(),
        consistencyGraceMs: settings.consistencyGraceMs,
        releaseEnabled: release.enabled,
        releaseDelayMs: release.delayMs,
        ...(release.tombstoneMs !== undefined ? { tombstoneMs: release.tombstoneMs } : {}),
        ...(table === undefined ? {} : { table }),
      });
      return { instanceId: listed.instance.id, instance: listed.instance, decision };
    });
  return { decisions, agentProtocols };
}

/** Releases, then allocates, for each node to reconcile; counts what succeeded and lists what failed. */
async function reconcileNodes(
  toReconcile: ReturnType<typeof decideNodes>['decisions'],
  observed: Observed,
  deps: SweepDependencies,
  failed: { instanceId: string; error: string }[],
): Promise<Record<string, number>> {
  const reconciled: Record<string, number> = {};
  const nodeDeps = { ...deps, settings: observed.settings };
  /** Runs one piece of a node's work; a failure is logged and listed, and the rest goes on. */
  const attempt = async (instanceId: string, reason: string, work: () => Promise<unknown>) => {
    try {
      await work();
      reconciled[reason] = (reconciled[reason] ?? 0) + 1;
    } catch (error) {
      failed.push({ instanceId, error: error instanceof Error ? error.message : String(error) });
      deps.log.error('sweep could not reconcile a node', { instanceId, reason, error: String(error) });
    }
  };
  await forEachWithConcurrency(toReconcile, deps.concurrency, async ({ instanceId, instance, decision }) => {
    if (decision.kind !== 'reconcile') return;
    // Release first: on a node that needs IPs it only aborts marks, returning their IPs to the pool
    // before the allocator plans (a failed release does not hold the allocation back).
    if (decision.release) {
      await attempt(instanceId, 'release', () =>
        releaseExcess(instanceId, {
          ...nodeDeps,
          release: observed.release,
          invocationId: deps.invocationId,
        }),
      );
    }
    if (decision.reason !== 'release') {
      await attempt(instanceId, decision.reason, () =>
        allocateNode(instanceId, { ...nodeDeps, invocationId: deps.invocationId }, instance),
      );
    }
  });
  return reconciled;
}

/** Retires every record whose instance the cluster no longer lists; returns how many were retired. */
async function retireMissing(
  observed: Observed,
  deps: SweepDependencies,
  failed: { instanceId: string; error: string }[],
): Promise<number> {
  let retired = 0;
  const listedIds = new Set(observed.clusterInstances.map((listed) => listed.instance.id));
  await forEachWithConcurrency(
    recordsMissingFromCluster(observed.records, listedIds),
    deps.concurrency,
    async (record) => {
      try {
        const outcome = await retireNode(record.instanceId, deps.lifecycle);
        if (outcome.kind === 'retired') retired++;
      } catch (error) {
        failed.push({
          instanceId: record.instanceId,
          error: error instanceof Error ? error.message : String(error),
        });
      }
    },
  );
  return retired;
}

async function limitsOf(
  instanceTypes: ReadonlySet<string>,
  deps: Pick<SweepDependencies, 'ec2'>,
): Promise<Map<string, InstanceLimits | undefined>> {
  const entries = await Promise.all(
    [...instanceTypes].map(async (type) => [type, await deps.ec2.describeInstanceLimits(type)] as const),
  );
  return new Map(entries);
}
