import { instanceOfEc2Call } from '../emulators/ec2/call-instance.ts';
import { Ec2ApiError } from '../emulators/ec2/errors.ts';
import type { BeforeApplyHook } from '../emulators/ec2/faults.ts';
import { writeUsedIps } from '../local-cloud/cilium-agent.ts';
import type { LocalCloud } from '../local-cloud/local-cloud.ts';

/**
 * Killing the allocate function in the middle of an allocation, as Lambda kills a runtime that ran
 * out of memory or time: its container is terminated (no `finally`, no lease release, no
 * heartbeat). Shared by the lease-recovery scenario and the bench's recovery phase.
 */

/** Where in an allocation the kill comes. */
export type KillPoint =
  | 'after-claim'
  | 'after-create'
  | 'after-attach'
  | 'after-record-write'
  | 'before-publish';

export const KILL_POINTS: readonly KillPoint[] = [
  'after-claim',
  'after-create',
  'after-attach',
  'after-record-write',
  'before-publish',
];

/** The EC2 calls each point kills at, and whether the call still applies (it was on its way). */
const EC2_KILL_POINTS: Record<Exclude<KillPoint, 'before-publish'>, [readonly string[], boolean]> = {
  // The claim is the first write; the first mutation follows it, and the dead caller never sent it.
  'after-claim': [['AssignPrivateIpAddresses', 'CreateNetworkInterface'], false],
  'after-create': [['CreateNetworkInterface'], true],
  'after-attach': [['AttachNetworkInterface'], true],
  // The attachment was checkpointed in the record before the delete-on-termination flag is set.
  'after-record-write': [['ModifyNetworkInterfaceAttribute'], false],
};

export interface AllocationKiller {
  /**
   * Arms the kill of the allocate invocation that serves `instance` at `point`; resolves with the
   * time of the kill (epoch ms). One kill per instance at a time.
   */
  arm(
    instance: { readonly instanceId: string; readonly privateDnsName: string },
    point: KillPoint,
  ): Promise<number>;
}

/** Installs the cloud's EC2 before-apply hook (it replaces any other) and answers kills per instance. */
export function allocationKiller(cloud: LocalCloud): AllocationKiller {
  const killsBeforeApply = new Map<string, BeforeApplyHook>();
  cloud.ec2.faults.arm({
    kind: 'before-apply',
    hook: async (action, params) => {
      const instanceId = instanceOfEc2Call(cloud.ec2.state, action, params);
      const kill = instanceId === undefined ? undefined : killsBeforeApply.get(instanceId);
      await kill?.(action, params);
    },
  });
  return {
    arm: (instance, point) =>
      new Promise((resolve) => {
        let done = false;
        const kill = async (): Promise<boolean> => {
          const killed = await cloud.crashInvocations('Allocate', (event) =>
            JSON.stringify(event).includes(instance.instanceId),
          );
          if (killed === 0) return false;
          done = true;
          resolve(Date.now());
          return true;
        };
        if (point === 'before-publish') {
          armKillBeforePublish(cloud, instance.privateDnsName, kill);
          return;
        }
        const [actions, applies] = EC2_KILL_POINTS[point];
        killsBeforeApply.set(instance.instanceId, async (action) => {
          if (done || !actions.includes(action)) return;
          if (!(await kill())) return;
          killsBeforeApply.delete(instance.instanceId);
          if (!applies) throw new Ec2ApiError('InternalError', 'the caller died before sending it', 500);
        });
      }),
  };
}

/** The first status publish for the node drops its connection, and its caller is killed meanwhile. */
function armKillBeforePublish(cloud: LocalCloud, nodeName: string, kill: () => Promise<boolean>): void {
  const { faults } = cloud.k8s;
  const fault = faults.inject({
    match: { verb: 'patch', subresource: 'status', name: nodeName },
    kind: 'drop-connection',
  });
  const stop = faults.onHit((request) => {
    if (request.name !== nodeName) return;
    stop();
    void kill().then((killed) => {
      if (!killed) fault.cancel();
    });
  });
}

/** The agent gives `count` pods a pool IP each (status.ipam.used): the demand crosses the watermark. */
export async function startPods(cloud: LocalCloud, nodeName: string, count: number): Promise<void> {
  const outcome = await writeUsedIps(cloud.k8s, nodeName, (node) =>
    Object.fromEntries(
      Object.keys(node.spec?.ipam?.pool ?? {})
        .slice(0, count)
        .map((ip, index) => [ip, { owner: `default/pod-${index}`, resource: '' }]),
    ),
  );
  if (outcome !== 'written') throw new Error(`the pods' IPs on ${nodeName} were not written: ${outcome}`);
}

/** The pool covers `poolSize` IPs and the node is ready (published from its record). */
export async function poolUsable(cloud: LocalCloud, instanceId: string, poolSize: number): Promise<boolean> {
  const [node] = (await cloud.summary([instanceId])).nodes;
  return node?.ready === true && (node.ciliumNode?.poolSize ?? 0) >= poolSize;
}
