import {
  type CidrReleasePlan,
  type CidrUnassignment,
  cidrsOf,
  planCidrRelease,
  releasesAfterUnassign,
  tombstoneDurationMs,
  tombstonedCidrs,
  unassignmentStillWanted,
  withoutTombstoned,
  withWithdrawalVersions,
} from '../core/cidr-release-plan.ts';
import type { CiliumNode } from '../core/ciliumnode.ts';
import { knobsFromCiliumNode, trustedCiliumNode } from '../core/knobs.ts';
import type { CidrRelease, EniState, InstanceView, NodeRecord } from '../core/model.ts';
import { isLeasedByOther, mergeObservedEnis } from '../core/node-record.ts';
import { enisAfterUnassign } from '../core/release-plan.ts';
import { fencedNetwork, NodeLease, retryLostRaces, writeNextVersion } from './node-lease.ts';
import { type ReleaseDependencies, releaseContent, unassignInTurn } from './release-record.ts';

/**
 * Release for one multi-pool (1.20) node: observe (EC2, the record, the CiliumNode), plan with
 * `planCidrRelease`, and for CIDRs the sync has already withdrawn from status, in a CiliumNode that
 * carries the record version that withdrew them, re-read the CiliumNode immediately before each
 * UnassignPrivateIpAddresses (the agent may have taken a CIDR back at the last moment, an agent
 * restart may have wiped the annotation), then record what EC2 confirmed with a conditional
 * write. Every write stamps the entries it makes withdrawing with its own record version
 * (`withWithdrawalVersions`). The same lease discipline as the handshake release: the node is
 * claimed before the first EC2 mutation.
 */

export interface CidrReleaseOutcome {
  readonly kind: 'none' | 'updated' | 'busy';
  readonly releasedCidrs: readonly string[];
  readonly changes: Readonly<Record<string, number>>;
}

export async function releaseMultiPoolCidrs(
  instance: InstanceView,
  deps: ReleaseDependencies,
): Promise<CidrReleaseOutcome> {
  return retryLostRaces(instance.id, () => releaseCidrsOnce(instance, deps), {
    holder: deps,
    busy: (): CidrReleaseOutcome => ({ kind: 'busy', releasedCidrs: [], changes: {} }),
  });
}

async function releaseCidrsOnce(
  instance: InstanceView,
  deps: ReleaseDependencies,
): Promise<CidrReleaseOutcome> {
  const { store, ec2, settings, log } = deps;
  const record = await store.get(instance.id);
  if (record?.lifecycle !== 'active') return { kind: 'none', releasedCidrs: [], changes: {} };
  if (isLeasedByOther(record, deps.invocationId, deps.clock()))
    return { kind: 'busy', releasedCidrs: [], changes: {} };
  const [ciliumNode, observedEnis, table] = await Promise.all([
    deps.ciliumNodes.get(record.nodeName).then((node) => trustedCiliumNode(node, instance.id)),
    ec2.describeAttachedEnis(instance.id, record.vpc.id),
    deps.tableGeneration(),
  ]);
  const merged = mergeObservedEnis(record.enis, observedEnis, deps.clock(), settings.consistencyGraceMs);
  let enis = withoutTombstoned(merged, tombstonedCidrs(record));
  const plan = cidrReleasePlan(record, enis, ciliumNode, table, deps);
  if (plan.kind === 'none') return { kind: 'none', releasedCidrs: [], changes: {} };
  const changes = countChanges(plan);
  /** The content of a write of version `version`, its withdrawing entries stamped with it. */
  const content = (releases: Readonly<Record<string, CidrRelease>>, version: number) => ({
    ...releaseContent(record, instance, enis),
    cidrReleases: withWithdrawalVersions(releases, version),
  });
  if (plan.unassignments.length === 0) {
    await writeNextVersion(record, content(plan.releases, record.version + 1), deps);
    log.info('multi-pool release advanced', { instanceId: instance.id, changes });
    return { kind: 'updated', releasedCidrs: [], changes };
  }

  const lease = await NodeLease.claim(record, content(record.cidrReleases ?? {}, record.version + 1), deps);
  let unassigned: Awaited<ReturnType<typeof unassignStillWanted>>;
  try {
    unassigned = await unassignStillWanted(plan.unassignments, record.nodeName, instance, table, {
      ...deps,
      ec2: fencedNetwork(deps.ec2, () => lease.beforeMutation()),
    });
  } catch (error) {
    lease.stop(); // a failed re-check: the lease expires, the next plan starts over
    throw error;
  }
  const { confirmed, failure } = unassigned;
  enis = enisAfterUnassign(enis, confirmed.map(asUnassignment), deps.clock());
  const releases = releasesAfterUnassign(
    plan,
    record.cidrReleases ?? {},
    new Set(confirmed.map((done) => done.eniId)),
  );
  // Stamped with the version the release gets once any renewal in flight has landed.
  await lease.release((version) => content(releases, version));
  const releasedCidrs = confirmed.flatMap(cidrsOf);
  if (failure !== undefined) throw failure;
  log.info('multi-pool CIDRs released', { instanceId: instance.id, releasedCidrs, changes });
  return { kind: 'updated', releasedCidrs, changes };
}

/** `planCidrRelease` over the merged ENIs and the trusted CiliumNode, with the deployment's release settings. */
function cidrReleasePlan(
  record: NodeRecord,
  enis: readonly EniState[],
  ciliumNode: CiliumNode | undefined,
  table: string | undefined,
  deps: ReleaseDependencies,
) {
  const { settings } = deps;
  return planCidrRelease({
    record: {
      version: record.version,
      enis,
      ...(record.cidrReleases ? { cidrReleases: record.cidrReleases } : {}),
    },
    ciliumNode,
    ...(table === undefined ? {} : { table }),
    knobs: knobsFromCiliumNode(ciliumNode, settings.defaultKnobs),
    releaseEnabled: deps.release.enabled,
    releaseDelayMs: deps.release.delayMs,
    tombstoneMs: deps.release.tombstoneMs ?? tombstoneDurationMs(settings.consistencyGraceMs),
    nowEpochMs: deps.clock(),
  });
}

/**
 * Unassigns each CIDR in turn, each re-checked right before its EC2 call on a fresh read of the
 * CiliumNode (cilium re-checks its marks there), until one call fails: what EC2 confirmed, and
 * the failure that stopped it.
 */
async function unassignStillWanted(
  unassignments: readonly CidrUnassignment[],
  nodeName: string,
  instance: InstanceView,
  table: string | undefined,
  deps: ReleaseDependencies,
): Promise<{ readonly confirmed: CidrUnassignment[]; readonly failure: unknown }> {
  return unassignInTurn(unassignments, deps.ec2, async (unassignment) => {
    const fresh = trustedCiliumNode(await deps.ciliumNodes.get(nodeName), instance.id);
    if (unassignmentStillWanted(unassignment, fresh, table)) return true;
    deps.log.info(
      'a CIDR to release is wanted again, or its withdrawal not yet published; not releasing it',
      {
        instanceId: instance.id,
        ...unassignment,
      },
    );
    return false;
  });
}

function asUnassignment(unassignment: CidrUnassignment) {
  return { ...unassignment, addresses: [] };
}

function countChanges(plan: Extract<CidrReleasePlan, { kind: 'update' }>): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const change of plan.changes) counts[change.reason] = (counts[change.reason] ?? 0) + 1;
  return counts;
}
