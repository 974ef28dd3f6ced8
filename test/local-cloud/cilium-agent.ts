import { ApiError, type K8sEmulator } from '../emulators/k8s/index.ts';

/**
 * The agent's side of the CiliumNode, simulated: when a node's cilium-agent starts, it registers
 * its CiliumNode the way cilium's `nodediscovery` does: Get; Create when absent (named after the
 * node, `spec.instance-id` set, pool empty); otherwise Update, setting `spec.instance-id` and
 * keeping what the allocator already put in `spec.ipam.pool`. Retries on a resourceVersion
 * conflict, as the agent's update loop does. Writes go through the Kubernetes emulator's store,
 * with the API server's create/update semantics (status dropped on create, 409 on a stale update).
 */
export function registerCiliumNode(k8s: K8sEmulator, nodeName: string, instanceId: string): void {
  for (let attempt = 1; ; attempt++) {
    try {
      const current = k8s.store.get(nodeName);
      if (current === undefined) {
        k8s.store.create({
          apiVersion: 'cilium.io/v2',
          kind: 'CiliumNode',
          metadata: { name: nodeName },
          spec: { 'instance-id': instanceId },
        });
        return;
      }
      if (current.spec?.['instance-id'] === instanceId) return;
      k8s.store.update(
        nodeName,
        { ...current, spec: { ...current.spec, 'instance-id': instanceId } },
        'main',
        'update',
      );
      return;
    } catch (error) {
      const conflict = error instanceof ApiError && (error.code === 409 || error.code === 404);
      if (!conflict || attempt >= 5) throw error;
    }
  }
}
