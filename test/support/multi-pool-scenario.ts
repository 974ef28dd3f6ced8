import { expect } from 'vitest';
import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import type { Log } from '../../functions/core/ports.ts';
import type { SyncDependencies } from '../../functions/services/sync-node.ts';
import type { InstanceRecord } from '../emulators/ec2/index.ts';
import type { AllocationHarness } from './allocation-harness.ts';
import {
  type AgentCiliumNodeApi,
  MultiPoolAgentDriver,
  MultiPoolAgentModel,
} from './cilium-multipool-agent-model.ts';
import {
  checkAllocatedNotWithdrawn,
  checkEniEntriesComplete,
  checkMultiPoolReleaseIps,
  checkRightNode,
  checkStatusCoversSpec,
} from './invariants.ts';

/**
 * Scenario support for nodes whose agent speaks the multi-pool protocol (1.20): a driver of the
 * agent model that remembers which resourceVersions it wrote, and the invariant checks every
 * scenario applies to every stored CiliumNode version.
 */

export const silentLog: Log = { debug() {}, info() {}, warn() {}, error() {} };

export function syncDependencies(harness: AllocationHarness): SyncDependencies {
  return { store: harness.table.store, ciliumNodes: harness.ciliumNodes, log: silentLog };
}

/** A CiliumNode API that records the resourceVersions of the agent's own writes. */
function recordingApi(harness: AllocationHarness, written: Set<string>): AgentCiliumNodeApi {
  const remember = (cn: CiliumNode) => {
    if (cn.metadata.resourceVersion) written.add(cn.metadata.resourceVersion);
    return cn;
  };
  return {
    get: (name) => harness.ciliumNodes.get(name),
    patchMain: async (name, ops) =>
      remember(
        await harness.ciliumNodes.patchMain(name, ops as Parameters<typeof harness.ciliumNodes.patchMain>[1]),
      ),
    patchStatus: async (name, ops) =>
      remember(
        await harness.ciliumNodes.patchStatus(
          name,
          ops as Parameters<typeof harness.ciliumNodes.patchStatus>[1],
        ),
      ),
  };
}

export interface MultiPoolAgent {
  readonly model: MultiPoolAgentModel;
  readonly driver: MultiPoolAgentDriver;
  /** resourceVersions the agent wrote (spec.ipam.pools, the used clearing, its registration). */
  readonly writtenVersions: Set<string>;
}

export function startMultiPoolAgent(
  harness: AllocationHarness,
  instance: InstanceRecord,
  options: { ipv6?: boolean } = {},
): MultiPoolAgent {
  const writtenVersions = new Set<string>();
  const model = new MultiPoolAgentModel(options);
  const driver = new MultiPoolAgentDriver(
    model,
    recordingApi(harness, writtenVersions),
    instance.privateDnsName,
  );
  return { model, driver, writtenVersions };
}

/**
 * Invariants 1, 6 and 7 at every stored version of the node: status covers spec, complete ENI
 * entries, no CIDR of `allocated` withdrawn (unless `goneFromEc2`), `release-ips` empty while
 * multi-pool, and `spec.ipam.pools` / `status.ipam.used` changed only by the agent's own writes.
 */
export async function expectMultiPoolInvariants(
  harness: AllocationHarness,
  instance: InstanceRecord,
  agentWrites: ReadonlySet<string>,
  goneFromEc2: (cidr: string) => boolean = () => false,
): Promise<void> {
  const history = await harness.k8s.history(instance.privateDnsName);
  let previous: CiliumNode | undefined;
  for (const entry of history) {
    const object = entry.object as unknown as CiliumNode;
    const at = `resourceVersion ${entry.resourceVersion} (${entry.type})`;
    expect(checkStatusCoversSpec(object), at).toEqual([]);
    expect(checkEniEntriesComplete(object), at).toEqual([]);
    expect(checkRightNode(object, instance.instanceId), at).toEqual([]);
    expect(checkMultiPoolReleaseIps(object), at).toEqual([]);
    if (previous !== undefined) {
      expect(checkAllocatedNotWithdrawn(previous, object, goneFromEc2), at).toEqual([]);
      if (!agentWrites.has(entry.resourceVersion)) {
        expect(object.spec?.ipam?.pools, `${at}: spec.ipam.pools is the agent's`).toEqual(
          previous.spec?.ipam?.pools,
        );
        expect(object.status?.ipam?.used ?? {}, `${at}: status.ipam.used is the agent's`).toEqual(
          previous.status?.ipam?.used ?? {},
        );
      }
    }
    previous = object;
  }
}
