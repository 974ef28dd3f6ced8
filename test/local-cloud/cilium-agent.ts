import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import { ApiError, type CiliumNodeObject } from '../emulators/k8s/index.ts';
import type { MultiPoolAgentModel } from '../support/cilium-multipool-agent-model.ts';
import { KubernetesRequestError, type KubernetesUnderTest } from '../support/kubernetes.ts';

/**
 * The agent's side of the CiliumNode, simulated through the Kubernetes API (the real
 * kube-apiserver or the emulator, as an agent would: get, create, conditional replace). When a
 * node's cilium-agent starts, it registers its CiliumNode the way cilium's `nodediscovery` does:
 * Get; Create when absent (named after the node, `spec.instance-id` set, pool empty); otherwise
 * Update, setting `spec.instance-id` and keeping what the allocator already put in
 * `spec.ipam.pool`. Retries on a resourceVersion conflict, as the agent's update loop does (the
 * server drops status on create and answers 409 to a stale update).
 */

/** The calls a simulated agent makes of the Kubernetes API. */
export type AgentKubernetesApi = Pick<
  KubernetesUnderTest,
  'getCiliumNode' | 'createCiliumNode' | 'replaceCiliumNode' | 'onVersion'
>;

export interface AgentKnobs {
  /** What the agent writes into `spec.ipam` (e.g. `min-allocate`, `pre-allocate`). */
  readonly ipam?: Readonly<Record<string, unknown>>;
  /** What the agent writes into `spec.eni` (e.g. `first-interface-index`). */
  readonly eni?: Readonly<Record<string, unknown>>;
}

/** The HTTP status of a failed API call, from either backend (the emulator's store throws its own error). */
function statusCodeOf(error: unknown): number | undefined {
  if (error instanceof ApiError) return error.code;
  if (error instanceof KubernetesRequestError) return error.status;
  return undefined;
}

/** A lost race: a stale resourceVersion (409), or the object gone (404) or already there (409) meanwhile. */
function isLostRace(error: unknown): boolean {
  const code = statusCodeOf(error);
  return code === 409 || code === 404;
}

export async function registerCiliumNode(
  k8s: AgentKubernetesApi,
  nodeName: string,
  instanceId: string,
  knobs: AgentKnobs = {},
): Promise<void> {
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
      const current = await k8s.getCiliumNode(nodeName);
      if (current === undefined) {
        await k8s.createCiliumNode({
          apiVersion: 'cilium.io/v2',
          kind: 'CiliumNode',
          metadata: { name: nodeName },
          spec: withKnobs({}),
        });
        return;
      }
      const spec = withKnobs({ ...current.spec });
      if (JSON.stringify(spec) === JSON.stringify(current.spec)) return;
      await k8s.replaceCiliumNode({ ...current, spec });
      return;
    } catch (error) {
      if (!isLostRace(error) || attempt >= 10) throw error;
    }
  }
}

/**
 * A 1.19 agent reporting its pods: writes `status.ipam.used` as `usedOf` computes it from the
 * current CiliumNode, re-reading and retrying on a resourceVersion conflict (20 attempts), as the
 * agent's update loop does. `usedOf` may decline (undefined): nothing is written. `absent`: there
 * is no CiliumNode; `conflicts`: every attempt lost the race.
 */
export async function writeUsedIps(
  k8s: AgentKubernetesApi,
  nodeName: string,
  usedOf: (current: CiliumNode) => Record<string, unknown> | undefined,
): Promise<'written' | 'declined' | 'absent' | 'conflicts'> {
  for (let attempt = 1; attempt <= 20; attempt++) {
    const current = (await k8s.getCiliumNode(nodeName)) as unknown as CiliumNode | undefined;
    if (current === undefined) return 'absent';
    const used = usedOf(current);
    if (used === undefined) return 'declined';
    try {
      await k8s.replaceCiliumNode(
        { ...current, status: { ...current.status, ipam: { ...current.status?.ipam, used } } } as never,
        'status',
      );
      return 'written';
    } catch (error) {
      if (statusCodeOf(error) !== 409) throw error;
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
 * A running 1.20 agent on the local cloud: the `MultiPoolAgentModel` driven by every stored
 * version of its CiliumNode (its watch, `onVersion`), one pass at a time: observe, write
 * `spec.ipam.pools` when it changed, clear `status.ipam.used` (cilium `updateLocalNode`). A
 * conflict is retried on the next event or after `retryMs`. `stop` ends it (a downgrade or the end
 * of the run).
 */
export class LocalMultiPoolAgent {
  private stopped = false;
  private scheduled: NodeJS.Timeout | undefined;
  /** The pass running now, if any: passes never overlap. */
  private running: Promise<void> | undefined;
  /** A version arrived while a pass ran: one more pass follows it. */
  private again = false;
  private readonly unsubscribe: () => void;
  readonly failures: Error[] = [];

  constructor(
    private readonly k8s: AgentKubernetesApi,
    private readonly nodeName: string,
    readonly model: MultiPoolAgentModel,
    private readonly retryMs = 200,
  ) {
    this.unsubscribe = k8s.onVersion((version) => {
      if (version.name === nodeName && version.type !== 'DELETED') this.schedule(0);
    });
    this.schedule(0);
  }

  stop(): void {
    this.stopped = true;
    this.unsubscribe();
    if (this.scheduled) clearTimeout(this.scheduled);
  }

  /** Whether a pass is running or due now (the cloud is not settled while one is). */
  busy(): boolean {
    return !this.stopped && (this.running !== undefined || this.scheduled !== undefined);
  }

  /** One pass now (after the one running, if any); also what the timers run. */
  async pass(): Promise<void> {
    if (this.running !== undefined) {
      this.again = true;
      return this.running;
    }
    this.running = this.passOnce().finally(() => {
      this.running = undefined;
    });
    await this.running;
    if (this.again) {
      this.again = false;
      await this.pass();
    }
  }

  private async passOnce(): Promise<void> {
    if (this.stopped) return;
    try {
      const current = (await this.k8s.getCiliumNode(this.nodeName)) as unknown as CiliumNode | undefined;
      if (current === undefined || this.stopped) return;
      this.model.observe(current);
      const pools = this.model.plannedPools(current, Date.now());
      let latest = current;
      if (pools !== undefined) {
        const spec = { ...current.spec, ipam: { ...asObject(current.spec?.ipam), pools } };
        latest = (await this.k8s.replaceCiliumNode({
          ...current,
          spec,
        } as unknown as CiliumNodeObject)) as never;
      }
      if (Object.keys(latest.status?.ipam?.used ?? {}).length > 0) {
        const { used: _cleared, ...ipam } = latest.status?.ipam ?? {};
        await this.k8s.replaceCiliumNode(
          { ...latest, status: { ...latest.status, ipam } } as unknown as CiliumNodeObject,
          'status',
        );
      }
      this.model.wrote(Date.now());
    } catch (error) {
      if (isLostRace(error)) this.schedule(this.retryMs);
      else this.failures.push(error as Error);
    }
  }

  private schedule(delayMs: number): void {
    if (this.stopped || this.scheduled) return;
    this.scheduled = setTimeout(() => {
      this.scheduled = undefined;
      void this.pass();
    }, delayMs);
  }
}
