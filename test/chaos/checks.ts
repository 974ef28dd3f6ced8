import { agentProtocolOf } from '../../functions/core/agent-protocol.ts';
import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import { RECORD_VERSION_ANNOTATION } from '../../functions/core/ciliumnode.ts';
import { desiredPool, desiredStatusEnis } from '../../functions/core/ciliumnode-render.ts';
import { ENI_TAG_KEYS, isOurs } from '../../functions/core/eni-ownership.ts';
import { usedIps } from '../../functions/core/knobs.ts';
import type { NodeRecord } from '../../functions/core/model.ts';
import type { NetworkInterfaceRecord } from '../emulators/ec2/index.ts';
import { k8sEmulatorOf, type LocalCloud, renderDenials } from '../local-cloud/index.ts';
import {
  checkAllocatedNotWithdrawn,
  checkEniEntriesComplete,
  checkMultiPoolReleaseIps,
  checkPoolRemovalsHandshaken,
  checkRightNode,
  checkStatusCoversSpec,
} from '../support/invariants.ts';

/**
 * What a chaos run must end with, once the faults stopped and the sweep ran. Each failed check is
 * one line naming the check, the node and what was found:
 *
 * - `status-covers-spec`, `eni-status-complete`, `right-node`, `never-backwards`, `in-use-sacred`:
 *   over EVERY recorded version of every CiliumNode (what any watcher could have seen), not just
 *   the last one (invariants 1, 6, 2 and 5); an IP the agent reported in use must also still be
 *   assigned in EC2 at the end;
 * - `duplicate-eni`: no instance has two of our ENIs at one device index, and the ENIs EC2 has
 *   attached to an instance are exactly the ones its record lists (invariant 4);
 * - `leaked-eni`: no `available` ENI with our tags is left after garbage collection (invariant 4);
 * - `record-matches-ec2`: each recorded ENI's addresses are what EC2 has on it;
 * - `not-ready`: every live node has an active record with addresses, and its CiliumNode publishes
 *   exactly that record version: pool non-empty and equal to the record's pool, status ENIs equal
 *   to the record's ENIs;
 * - `retired`: a terminated instance's record is retired (or absent);
 * - `emulator`: the EC2 emulator raised no internal error;
 * - `denied`: IAM denied no EC2 call and RBAC no Kubernetes request (injected faults are not denials).
 */

export interface CheckContext {
  readonly cloud: LocalCloud;
  readonly clusterName: string;
  /** Instance ids launched, with whether the run terminated them. */
  readonly instances: readonly { readonly instanceId: string; readonly terminated: boolean }[];
}

export async function checkRun({ cloud, clusterName, instances }: CheckContext): Promise<string[]> {
  const failures: string[] = [];
  const records = await cloud.records();
  const ec2 = cloud.ec2.state;
  for (const { instanceId, terminated } of instances) {
    const record = records.get(instanceId);
    const nodeName = record?.nodeName ?? ec2.instance(instanceId)?.privateDnsName ?? instanceId;
    const history = checkHistory(cloud, nodeName, instanceId);
    failures.push(...history.failures);
    if (terminated) {
      if (record !== undefined && record.lifecycle !== 'retired') {
        failures.push(`retired: ${instanceId} was terminated but its record is ${record.lifecycle}`);
      }
      continue;
    }
    failures.push(...checkInUseStillAssigned(cloud, instanceId, history.usedIps));
    failures.push(...checkEnis(cloud, clusterName, instanceId, record));
  }

  const leaked = ec2
    .networkInterfaces({ status: 'available' })
    .filter((eni) => isOurs(eni.tags, clusterName));
  for (const eni of leaked) {
    failures.push(
      `leaked-eni: ${eni.networkInterfaceId} (made for ${eni.tags[ENI_TAG_KEYS.instanceId]}) is available after garbage collection`,
    );
  }
  for (const error of cloud.ec2.unexpectedErrors) {
    failures.push(`emulator: EC2 emulator internal error: ${String(error)}`);
  }
  const denials = await cloud.denials();
  if (denials.total > 0) failures.push(renderDenials(denials));
  return failures;
}

/**
 * The invariants over every recorded version of a node's CiliumNode, one version and each pair of
 * consecutive versions; also every IP the agent reported in use (with its ENI), for the end check.
 */
function checkHistory(
  cloud: LocalCloud,
  nodeName: string,
  instanceId: string,
): { failures: string[]; usedIps: Map<string, string> } {
  const failures: string[] = [];
  let publishedVersion = 0;
  let previous: CiliumNode | undefined;
  const usedIps = new Map<string, string>();
  for (const entry of k8sEmulatorOf(cloud).history(nodeName)) {
    if (entry.type === 'DELETED') continue;
    const version = entry.object as unknown as CiliumNode;
    const where = `${nodeName} rv ${entry.resourceVersion}`;
    const pairs =
      previous === undefined
        ? []
        : [
            ...checkPoolRemovalsHandshaken(previous, version),
            ...checkAllocatedNotWithdrawn(previous, version),
          ];
    for (const violation of [
      ...checkStatusCoversSpec(version),
      ...checkEniEntriesComplete(version),
      ...checkRightNode(version, instanceId),
      ...checkMultiPoolReleaseIps(version),
      ...pairs,
    ]) {
      failures.push(`${violation.invariant}: ${where}: ${violation.message}`);
    }
    previous = version;
    // Invariant 2: the record version a CiliumNode carries never goes down (no agent here wipes it).
    const annotation = version.metadata.annotations?.[RECORD_VERSION_ANNOTATION];
    if (annotation !== undefined) {
      if (Number(annotation) < publishedVersion) {
        failures.push(`never-backwards: ${where} carries record v${annotation} after v${publishedVersion}`);
      }
      publishedVersion = Math.max(publishedVersion, Number(annotation));
    }
    // Invariant 5: once the agent reported an IP in use, every later version keeps it in the pool.
    for (const [ip, allocation] of Object.entries(version.status?.ipam?.used ?? {})) {
      usedIps.set(ip, allocation?.resource ?? '');
    }
    const pool = version.spec?.ipam?.pool ?? {};
    for (const ip of usedIps.keys()) {
      if (pool[ip] === undefined) failures.push(`in-use-sacred: ${where}: in-use IP ${ip} left the pool`);
    }
  }
  return { failures, usedIps };
}

/** Every IP the agent reported in use is still assigned, on EC2, to the ENI it was on, attached to the instance. */
function checkInUseStillAssigned(
  cloud: LocalCloud,
  instanceId: string,
  usedIps: ReadonlyMap<string, string>,
): string[] {
  const failures: string[] = [];
  for (const [ip, eniId] of usedIps) {
    const eni = cloud.ec2.state.networkInterface(eniId);
    if (eni?.attachment?.instanceId !== instanceId || !eni.secondaryPrivateIpAddresses.includes(ip)) {
      failures.push(`in-use-sacred: ${instanceId}: in-use IP ${ip} is no longer assigned on ${eniId}`);
    }
  }
  return failures;
}

/** A live instance's ENIs: no duplicate, exactly the record's, with the record's addresses; and the node ready. */
function checkEnis(
  cloud: LocalCloud,
  clusterName: string,
  instanceId: string,
  record: NodeRecord | undefined,
): string[] {
  const ec2 = cloud.ec2.state;
  const attached = ec2.instanceNetworkInterfaces(instanceId);
  const ours = attached.filter((eni) => isOurs(eni.tags, clusterName));
  const failures = checkNoDuplicateEni(instanceId, ours);
  if (record === undefined) {
    failures.push(`not-ready: ${instanceId} (${ec2.instance(instanceId)?.instanceType}) has no record`);
    return failures;
  }
  const recordedIds = record.enis.map((eni) => eni.id).sort();
  const attachedIds = attached.map((eni) => eni.networkInterfaceId).sort();
  if (recordedIds.join() !== attachedIds.join()) {
    failures.push(
      `duplicate-eni: ${instanceId} has ENIs [${attachedIds.join(', ')}] attached but its record lists [${recordedIds.join(', ')}]`,
    );
  }
  const recordedOurs = record.enis.filter((eni) => isOurs(eni.tags, clusterName)).length;
  if (recordedOurs !== ours.length) {
    failures.push(`duplicate-eni: ${instanceId} has ${ours.length} ENIs of ours, its record ${recordedOurs}`);
  }
  for (const eni of record.enis) {
    const actual = ec2.networkInterface(eni.id);
    if (actual === undefined) continue; // reported above as an attachment mismatch
    const recordedIps = [...eni.secondaryIps].sort().join();
    const actualIps = [...actual.secondaryPrivateIpAddresses].sort().join();
    const recordedPrefixes = [...eni.prefixes].sort().join();
    const actualPrefixes = [...actual.ipv4Prefixes].sort().join();
    if (recordedIps !== actualIps || recordedPrefixes !== actualPrefixes) {
      failures.push(
        `record-matches-ec2: ${instanceId} ${eni.id}: record [${recordedIps}|${recordedPrefixes}], EC2 [${actualIps}|${actualPrefixes}]`,
      );
    }
  }
  failures.push(...readiness(cloud, instanceId, record));
  return failures;
}

/** No two of our ENIs at one device index, and none made for another instance (eth0 aside). */
function checkNoDuplicateEni(instanceId: string, ours: readonly NetworkInterfaceRecord[]): string[] {
  const failures: string[] = [];
  const byIndex = new Map<number, string[]>();
  for (const eni of ours) {
    const index = eni.attachment?.deviceIndex ?? -1;
    byIndex.set(index, [...(byIndex.get(index) ?? []), eni.networkInterfaceId]);
  }
  for (const [index, ids] of byIndex) {
    if (ids.length > 1)
      failures.push(`duplicate-eni: ${instanceId} has ${ids.join(', ')} at device index ${index}`);
  }
  // eth0 is created with the instance (a launch template tags it ours without knowing the
  // instance id): it can be no other instance's ENI.
  const foreignOurs = ours.filter(
    (eni) => eni.attachment?.deviceIndex !== 0 && eni.tags[ENI_TAG_KEYS.instanceId] !== instanceId,
  );
  for (const eni of foreignOurs) {
    failures.push(
      `duplicate-eni: ${instanceId} holds ${eni.networkInterfaceId}, made for ${eni.tags[ENI_TAG_KEYS.instanceId]}`,
    );
  }
  return failures;
}

function readiness(cloud: LocalCloud, instanceId: string, record: NodeRecord): string[] {
  const problems: string[] = [];
  if (record.lifecycle !== 'active') problems.push(`record is ${record.lifecycle}`);
  const ciliumNode = k8sEmulatorOf(cloud).store.get(record.nodeName) as unknown as CiliumNode | undefined;
  if (ciliumNode === undefined) {
    problems.push(`no CiliumNode ${record.nodeName}`);
  } else {
    const pool = Object.keys(ciliumNode.spec?.ipam?.pool ?? {}).sort();
    const expectedPool = Object.keys(
      desiredPool(record, usedIps(ciliumNode), {
        currentPool: Object.keys(ciliumNode.spec?.ipam?.pool ?? {}),
        multiPool: agentProtocolOf(ciliumNode) === 'multi-pool',
      }),
    ).sort();
    if (pool.length === 0) problems.push('pool is empty');
    if (pool.join() !== expectedPool.join()) {
      problems.push(`pool has ${pool.length} IPs, record v${record.version} says ${expectedPool.length}`);
    }
    const statusEnis = Object.keys(ciliumNode.status?.eni?.enis ?? {}).sort();
    const expectedEnis = Object.keys(desiredStatusEnis(record)).sort();
    if (statusEnis.join() !== expectedEnis.join()) {
      problems.push(`status lists ENIs [${statusEnis.join(', ')}], record [${expectedEnis.join(', ')}]`);
    }
    const published = ciliumNode.metadata.annotations?.[RECORD_VERSION_ANNOTATION];
    if (published !== String(record.version)) {
      problems.push(`CiliumNode publishes record v${published ?? '-'}, the record is v${record.version}`);
    }
  }
  return problems.length === 0
    ? []
    : [`not-ready: ${instanceId} (${record.instanceType}): ${problems.join('; ')}`];
}
