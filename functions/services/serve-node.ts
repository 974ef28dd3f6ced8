import type { WatchTrigger } from '../core/watch-plan.ts';
import { type AllocationOutcome, allocateNode } from './allocate-node.ts';
import { type ReleaseOutcome, releaseExcess } from './release-excess.ts';
import type { ReleaseDependencies } from './release-record.ts';

export type ServeNodeOutcome =
  | { readonly kind: 'paused' }
  | { readonly kind: 'served'; readonly release?: ReleaseOutcome; readonly allocation?: AllocationOutcome };

/**
 * What the watcher asked for one node, as the sweep does it: the release step first (on a node
 * that needs IPs it only aborts marks, returning their IPs to the pool before the allocator plans),
 * then the allocation, which a failed release does not hold back; the release's error is thrown
 * after the allocation ran. Paused, nothing runs.
 */
export async function serveNode(trigger: WatchTrigger, deps: ReleaseDependencies): Promise<ServeNodeOutcome> {
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
  const allocation = trigger.allocate ? await allocateNode(trigger.instanceId, deps) : undefined;
  if (releaseFailure) throw releaseFailure.error;
  return {
    kind: 'served',
    ...(release === undefined ? {} : { release }),
    ...(allocation === undefined ? {} : { allocation }),
  };
}
