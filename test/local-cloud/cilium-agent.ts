import { ApiError, type K8sEmulator } from '../emulators/k8s/index.ts';

/**
 * The agent's side of the CiliumNode, simulated: when a node's cilium-agent starts, it registers
 * its CiliumNode the way cilium's `nodediscovery` does: Get; Create when absent (named after the
 * node, `spec.instance-id` set, pool empty); otherwise Update, setting `spec.instance-id` and
 * keeping what the allocator already put in `spec.ipam.pool`. Retries on a resourceVersion
 * conflict, as the agent's update loop does. Writes go through the Kubernetes emulator's store,
 * with the API server's create/update semantics (status dropped on create, 409 on a stale update).
 */
export interface AgentKnobs {
  /** What the agent writes into `spec.ipam` (e.g. `min-allocate`, `pre-allocate`). */
  readonly ipam?: Readonly<Record<string, unknown>>;
  /** What the agent writes into `spec.eni` (e.g. `first-interface-index`). */
  readonly eni?: Readonly<Record<string, unknown>>;
}

export function registerCiliumNode(
  k8s: K8sEmulator,
  nodeName: string,
  instanceId: string,
  knobs: AgentKnobs = {},
): void {
  const ipamKnobs = knobs.ipam ?? {};
  const eniKnobs = knobs.eni ?? {};
  const withKnobs = (spec: Record<string, unknown>): Record<string, unknown> => ({
    ...spec,
    'instance-id': instanceId,
    ...(Object.keys(ipamKnobs).length > 0 ? { ipam: { ...asObject(spec.ipam), ...ipamKnobs } } : {}),
    ...(Object.keys(eniKnobs).length > 0 ? { eni: { ...asObject(spec.eni), ...eniKnobs } } : {}),
  });
  for (let attempt = 1; ; attempt++) {
    try {
      const current = k8s.store.get(nodeName);
      if (current === undefined) {
        k8s.store.create({
          apiVersion: 'cilium.io/v2',
          kind: 'CiliumNode',
          metadata: { name: nodeName },
          spec: withKnobs({}),
        });
        return;
      }
      const spec = withKnobs({ ...current.spec });
      if (JSON.stringify(spec) === JSON.stringify(current.spec)) return;
      k8s.store.update(nodeName, { ...current, spec }, 'main', 'update');
      return;
    } catch (error) {
      const conflict = error instanceof ApiError && (error.code === 409 || error.code === 404);
      if (!conflict || attempt >= 10) throw error;
    }
  }
}

function asObject(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}
