import type { InstanceView } from '../core/model.ts';
import type { WatchTrigger } from '../core/watch-plan.ts';
import { type AllocationDependencies, type AllocationOutcome, allocateNode } from './allocate-node.ts';
import { type ReleaseOutcome, releaseExcess } from './release-excess.ts';
import type { ReleaseDependencies } from './release-record.ts';

/** Serving a node both releases and allocates: both services' dependencies. */
type ServeNodeDependencies = AllocationDependencies & ReleaseDependencies;

type ServeNodeOutcome =
  | { readonly kind: 'paused' }
  | { readonly kind: 'served'; readonly release?: ReleaseOutcome; readonly allocation?: AllocationOutcome };

/**
 * What the watcher asked for one node, as the sweep does it: the release step first (on a node
 * that needs IPs it only aborts marks, returning their IPs to the pool before the allocator plans),
 * then the allocation, which a failed release does not hold back; the release's error is thrown
 * after the allocation ran. Paused, nothing runs.
 */
async function serveNode(
  trigger: WatchTrigger,
  deps: ServeNodeDependencies,
  listedInstance?: InstanceView,
): Promise<ServeNodeOutcome> {
  if (deps.settings.paused) {
    deps.log.info('paused: not serving the node the watcher named', { ...trigger });
    return { kind: 'paused' };
  }
  let release: ReleaseOutcome | undefined;
  let releaseFailure: { error: unknown } | undefined;
  if (trigger.release) {
    try {
      release = await releaseExcess(trigger.instanceId, deps);
    } catch (error) {
      releaseFailure = { error };
    }
  }
  const allocation = trigger.allocate
    ? await allocateNode(trigger.instanceId, deps, listedInstance)
    : undefined;
  if (releaseFailure) throw releaseFailure.error;
  return {
    kind: 'served',
    ...(release === undefined ? {} : { release }),
    ...(allocation === undefined ? {} : { allocation }),
  };
}

/** One node of a `serveNodes` request: its outcome, or why it failed. */
export type ServedNode =
  | { readonly instanceId: string; readonly outcome: ServeNodeOutcome }
  | { readonly instanceId: string; readonly error: string };

/**
 * The watcher's request for several nodes, served all at once (`serveNode` each): the instances to
 * allocate for are described in one call (as the sweep lists them), and one node's failure neither
 * stops nor fails the others; each is reported with its own outcome or error. When that one call
 * fails, each node describes its own instance.
 */
export async function serveNodes(
  triggers: readonly WatchTrigger[],
  deps: ServeNodeDependencies,
): Promise<ServedNode[]> {
  const allocating = triggers.filter((trigger) => trigger.allocate).map((trigger) => trigger.instanceId);
  const listed =
    allocating.length > 1 && !deps.settings.paused
      ? await deps.ec2.describeInstances(allocating).catch((error: unknown) => {
          deps.log.warn('could not describe the instances together; each node describes its own', {
            error: String(error),
          });
          return [];
        })
      : [];
  const instances = new Map(listed.map((instance) => [instance.id, instance]));
  return Promise.all(
    triggers.map(async (trigger): Promise<ServedNode> => {
      try {
        const outcome = await serveNode(trigger, deps, instances.get(trigger.instanceId));
        return { instanceId: trigger.instanceId, outcome };
      } catch (error) {
        deps.log.error('could not serve a node the watcher named; the sweep will', {
          instanceId: trigger.instanceId,
          error: String(error),
        });
        return { instanceId: trigger.instanceId, error: String(error) };
      }
    }),
  );
}
