import { isClusterMember } from '../core/cluster-membership.ts';
import { errorMessage } from '../core/errors.ts';
import { expandCidr } from '../core/ip-math.ts';
import { knobsFromCiliumNode, trustedCiliumNode } from '../core/knobs.ts';
import type { EniState, ExcessMark, InstanceView, NodeRecord } from '../core/model.ts';
import { isLeasedByOther, mergeObservedEnis } from '../core/node-record.ts';
import {
  enisAfterUnassign,
  isMultiPoolNode,
  marksAfterUnassign,
  planRelease,
  type ReleasePlan,
} from '../core/release-plan.ts';
import { fencedNetwork, NodeLease, retryLostRaces, writeNextVersion } from './node-lease.ts';
import { releaseMultiPoolCidrs } from './release-cidrs.ts';
import { type ReleaseDependencies, releaseContent, unassignInTurn } from './release-record.ts';

/**
 * Excess-IP release for one node: observe (EC2, the record, the CiliumNode), plan the handshake
 * with `planRelease`, unassign in EC2 what the plan says, record the outcome with a conditional
 * write. The same lease as `allocateNode` (`NodeLease`): before its first EC2 mutation an invocation
 * claims the node with a write conditional on the version it read, and an invocation that sees
 * another's unexpired claim backs off (`busy`). A crash after an unassignment leaves the marks at
 * `ready-for-release` with the addresses gone from EC2; the next plan turns them into `released`
 * (`gone-from-ec2`), and UnassignPrivateIpAddresses skips what is already gone, so nothing is lost
 * or released twice.
 */

export type ReleaseOutcome =
  | {
      readonly kind: 'ignored';
      readonly reason: 'unknown-instance' | 'not-in-cluster' | 'not-running' | 'no-record' | 'not-active';
      readonly detail: string;
    }
  | { readonly kind: 'busy'; readonly leaseHolder: string }
  | {
      readonly kind: 'reconciled';
      /** What was planned (`none` wrote nothing). */
      readonly plan: ReleasePlan['kind'];
      readonly recordVersion: number;
      /** Addresses EC2 confirmed unassigned (prefix addresses expanded), sorted per ENI. */
      readonly releasedIps: readonly string[];
      /** Marks that changed, per reason. */
      readonly changes: Readonly<Record<string, number>>;
    };

export async function releaseExcess(instanceId: string, deps: ReleaseDependencies): Promise<ReleaseOutcome> {
  return retryLostRaces(instanceId, () => releaseOnce(instanceId, deps), {
    holder: deps,
    busy: (leaseHolder): ReleaseOutcome => ({ kind: 'busy', leaseHolder }),
  });
}

async function releaseOnce(instanceId: string, deps: ReleaseDependencies): Promise<ReleaseOutcome> {
  const { ec2, settings } = deps;
  const gate = await releasableNode(instanceId, deps);
  if ('kind' in gate) return gate;
  const { instance, record } = gate;
  const [ciliumNode, limits, observedEnis] = await Promise.all([
    deps.ciliumNodes.get(record.nodeName),
    ec2.describeInstanceLimits(instance.instanceType),
    ec2.describeAttachedEnis(instanceId, record.vpc.id),
  ]);
  const trusted = trustedCiliumNode(ciliumNode, instanceId);
  const enis = mergeObservedEnis(record.enis, observedEnis, deps.clock(), settings.consistencyGraceMs);
  const previousMarks = record.excessMarks ?? {};
  const plan = planRelease({
    record: { enis, excessMarks: previousMarks },
    ciliumNode: trusted,
    limits,
    knobs: knobsFromCiliumNode(trusted, settings.defaultKnobs),
    prefixDelegationEnabled: settings.prefixDelegationEnabled,
    releaseEnabled: deps.release.enabled,
    releaseDelayMs: deps.release.delayMs,
    nowEpochMs: deps.clock(),
  });
  const changes = countChanges(plan);
  if (plan.kind === 'none' && (isMultiPoolNode(trusted) || record.cidrReleases !== undefined)) {
    // A multi-pool node (or one that just left that protocol) releases by CIDR, once no handshake
    // is left to abandon.
    return releaseByCidr(instance, record, deps);
  }
  if (plan.kind === 'none') {
    return { kind: 'reconciled', plan: plan.kind, recordVersion: record.version, releasedIps: [], changes };
  }
  if (plan.kind === 'update-marks') {
    const next = await writeNextVersion(
      record,
      { ...releaseContent(record, instance, enis), excessMarks: plan.marks },
      deps,
    );
    deps.log.info('release handshake advanced', { instanceId, changes, recordVersion: next.version });
    return { kind: 'reconciled', plan: plan.kind, recordVersion: next.version, releasedIps: [], changes };
  }
  return unassignExcess({ record, instance, enis, plan, previousMarks, changes }, deps);
}

/** The node, when its release may be planned: a running cluster member with an active record no one else holds. */
async function releasableNode(
  instanceId: string,
  deps: ReleaseDependencies,
): Promise<ReleaseOutcome | { readonly instance: InstanceView; readonly record: NodeRecord }> {
  const { settings } = deps;
  const instance = await deps.ec2.describeInstance(instanceId);
  if (!instance) return ignored('unknown-instance', `EC2 does not know instance ${instanceId}`, deps);
  if (!isClusterMember(instance, settings.clusterName, settings.clusterTagValues)) {
    return ignored(
      'not-in-cluster',
      `instance ${instanceId} is not a member of ${settings.clusterName}`,
      deps,
    );
  }
  if (instance.state !== 'running') {
    return ignored('not-running', `instance ${instanceId} is ${instance.state}, not running`, deps);
  }
  const record = await deps.store.get(instanceId);
  if (!record)
    return ignored('no-record', `node ${instanceId} has no record yet; allocation comes first`, deps);
  if (record.lifecycle !== 'active') {
    return ignored('not-active', `node ${instanceId} is ${record.lifecycle}`, deps);
  }
  if (isLeasedByOther(record, deps.invocationId, deps.clock())) {
    deps.log.info('another invocation holds the node; backing off', { instanceId, lease: record.lease });
    return { kind: 'busy', leaseHolder: record.lease?.holder ?? '' };
  }
  return { instance, record };
}

/** A multi-pool node's release, by whole CIDRs (`releaseMultiPoolCidrs`), as this service's outcome. */
async function releaseByCidr(
  instance: InstanceView,
  record: NodeRecord,
  deps: ReleaseDependencies,
): Promise<ReleaseOutcome> {
  const outcome = await releaseMultiPoolCidrs(instance, deps);
  if (outcome.kind === 'busy') return { kind: 'busy', leaseHolder: '' };
  return {
    kind: 'reconciled',
    plan:
      outcome.releasedCidrs.length > 0 ? 'unassign' : outcome.kind === 'updated' ? 'update-marks' : 'none',
    recordVersion: (await deps.store.get(instance.id))?.version ?? record.version,
    releasedIps: outcome.releasedCidrs.flatMap((cidr) => expandCidr(cidr)),
    changes: outcome.changes,
  };
}

/**
 * Rule (d) of `planRelease`: claim the node (the lease, conditional on the version read), unassign
 * per ENI until one call fails, then record what EC2 confirmed and release the claim, whether or
 * not every call went through.
 */
async function unassignExcess(
  release: {
    readonly record: NodeRecord;
    readonly instance: InstanceView;
    readonly enis: readonly EniState[];
    readonly plan: Extract<ReleasePlan, { kind: 'unassign' }>;
    readonly previousMarks: Readonly<Record<string, ExcessMark>>;
    readonly changes: Readonly<Record<string, number>>;
  },
  deps: ReleaseDependencies,
): Promise<ReleaseOutcome> {
  const { record, instance, enis, plan, previousMarks, changes } = release;
  const instanceId = instance.id;
  const lease = await NodeLease.claim(record, releaseContent(record, instance, enis), deps);
  const fenced = fencedNetwork(deps.ec2, () => lease.beforeMutation());
  const { confirmed, failure } = await unassignInTurn(plan.unassignments, fenced);
  let recorded: NodeRecord;
  try {
    const marks = marksAfterUnassign(plan, previousMarks, new Set(confirmed.map((done) => done.eniId)));
    const enisAfter = enisAfterUnassign(enis, confirmed, deps.clock());
    recorded = await lease.release({ ...releaseContent(record, instance, enisAfter), excessMarks: marks });
  } catch (error) {
    lease.stop();
    deps.log.error('could not record the release; the lease will expire and the next plan recovers', {
      instanceId,
      error: errorMessage(error),
    });
    throw failure ?? error;
  }
  const releasedIps = confirmed.flatMap((done) => done.addresses);
  if (failure !== undefined) {
    deps.log.error('unassigning excess IPs failed part-way; recorded what EC2 confirmed', {
      instanceId,
      releasedIps,
      error: errorMessage(failure),
    });
    throw failure;
  }
  deps.log.info('excess IPs released', { instanceId, releasedIps, changes, recordVersion: recorded.version });
  return { kind: 'reconciled', plan: plan.kind, recordVersion: recorded.version, releasedIps, changes };
}

function countChanges(plan: ReleasePlan): Record<string, number> {
  const counts: Record<string, number> = {};
  if (plan.kind === 'none') return counts;
  for (const change of plan.changes) counts[change.reason] = (counts[change.reason] ?? 0) + 1;
  return counts;
}

function ignored(
  reason: 'unknown-instance' | 'not-in-cluster' | 'not-running' | 'no-record' | 'not-active',
  detail: string,
  deps: ReleaseDependencies,
): ReleaseOutcome {
  deps.log.info('not releasing', { reason, detail });
  return { kind: 'ignored', reason, detail };
}
