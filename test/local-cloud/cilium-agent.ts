import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import { ApiError, type K8sEmulator } from '../emulators/k8s/index.ts';
import type { MultiPoolAgentModel } from '../support/cilium-multipool-agent-model.ts';

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

/**
 * A 1.19 agent reporting its pods: writes `status.ipam.used` as `usedOf` computes it from the
 * current CiliumNode, re-reading and retrying on a resourceVersion conflict (20 attempts), as the
 * agent's update loop does. `usedOf` may decline (undefined): nothing is written. `absent`: there
 * is no CiliumNode; `conflicts`: every attempt lost the race.
 */
export function writeUsedIps(
  k8s: K8sEmulator,
  nodeName: string,
  usedOf: (current: CiliumNode) => Record<string, unknown> | undefined,
): 'written' | 'declined' | 'absent' | 'conflicts' {
  for (let attempt = 1; attempt <= 20; attempt++) {
    const current = k8s.store.get(nodeName) as unknown as CiliumNode | undefined;
    if (current === undefined) return 'absent';
    const used = usedOf(current);
    if (used === undefined) return 'declined';
    try {
      k8s.store.update(
        nodeName,
        { ...current, status: { ...current.status, ipam: { ...current.status?.ipam, used } } } as never,
        'status',
        'update',
      );
      return 'written';
    } catch (error) {
      if (!(error instanceof ApiError && error.code === 409)) throw error;
    }
  }
  return 'conflicts';
}

function asObject(value: unknown): Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

/** The cilium-agent version a simulated node runs: the CRD protocol (1.19) or multi-pool (1.20). */
export type AgentVersion = '1.19' | '1.20';

/**
 * A running 1.20 agent on the local cloud: the `MultiPoolAgentModel` driven by every write of its
 * CiliumNode (its watch), one pass at a time: observe, write `spec.ipam.pools` when it changed,
 * clear `status.ipam.used` (cilium `updateLocalNode`). A conflict is retried on the next event or
 * after `retryMs`. `stop` ends it (a downgrade or the end of the run).
 */
export class LocalMultiPoolAgent {
  private stopped = false;
  private scheduled: NodeJS.Timeout | undefined;
  private readonly unsubscribe: () => void;
  readonly failures: Error[] = [];

  constructor(
    private readonly k8s: K8sEmulator,
    private readonly nodeName: string,
    readonly model: MultiPoolAgentModel,
    private readonly retryMs = 200,
  ) {
    this.unsubscribe = k8s.store.onWrite((entry) => {
      if (entry.name === nodeName && entry.type !== 'DELETED') this.schedule(0);
    });
    this.schedule(0);
  }

  stop(): void {
    this.stopped = true;
    this.unsubscribe();
    if (this.scheduled) clearTimeout(this.scheduled);
  }

  /** One pass now (synchronously); also what the timers run. */
  pass(): void {
    if (this.stopped) return;
    const current = this.k8s.store.get(this.nodeName) as unknown as CiliumNode | undefined;
    if (current === undefined) return;
    try {
      this.model.observe(current);
      const pools = this.model.plannedPools(current, Date.now());
      let latest = current;
      if (pools !== undefined) {
        const spec = { ...current.spec, ipam: { ...asObject(current.spec?.ipam), pools } };
        latest = this.k8s.store.update(
          this.nodeName,
          { ...current, spec } as never,
          'main',
          'update',
        ) as never;
      }
      if (Object.keys(latest.status?.ipam?.used ?? {}).length > 0) {
        const { used: _cleared, ...ipam } = latest.status?.ipam ?? {};
        this.k8s.store.update(
          this.nodeName,
          { ...latest, status: { ...latest.status, ipam } } as never,
          'status',
          'update',
        );
      }
      this.model.wrote(Date.now());
    } catch (error) {
      if (error instanceof ApiError && (error.code === 409 || error.code === 404))
        this.schedule(this.retryMs);
      else this.failures.push(error as Error);
    }
  }

  private schedule(delayMs: number): void {
    if (this.stopped || this.scheduled) return;
    this.scheduled = setTimeout(() => {
      this.scheduled = undefined;
      this.pass();
    }, delayMs);
  }
}
