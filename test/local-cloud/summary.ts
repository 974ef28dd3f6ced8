import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import { RECORD_VERSION_ANNOTATION } from '../../functions/core/ciliumnode.ts';
import type { NodeRecord } from '../../functions/core/model.ts';
import type { CallRecord } from '../emulators/ec2/calls.ts';
import type { Ec2State } from '../emulators/ec2/index.ts';
import type { CiliumNodeObject } from '../emulators/k8s/index.ts';
import { checkRightNode, checkStatusCoversSpec, type Violation } from '../support/invariants.ts';
import type { KubernetesUnderTest, ObservedRequest, ObservedVersion } from '../support/kubernetes.ts';
import { PERSON_USER_PREFIX } from './identities.ts';

/**
 * What the local cloud shows: per instance, EC2's view, its node record and its CiliumNode, and
 * the invariants judged over EVERY version of the CiliumNode the Kubernetes API server stored
 * (invariants 1 and 6 of functions/README.md: what any watcher could have seen, not just the last state).
 */

export interface NodeSummary {
  readonly instanceId: string;
  readonly instanceType: string;
  readonly state: string;
  readonly nodeName: string;
  readonly record?: {
    readonly version: number;
    readonly lifecycle: NodeRecord['lifecycle'];
    readonly enis: number;
    /** Secondary IPs plus prefix addresses recorded on the node's ENIs. */
    readonly ips: number;
  };
  readonly ciliumNode?: {
    readonly resourceVersion: string;
    /** How many versions of it were stored. */
    readonly versions: number;
    readonly poolSize: number;
    /** IPs the agent reports in use (`status.ipam.used`). */
    readonly usedIps: number;
    readonly statusEnis: number;
    /** The node-record version the sync last published (its annotation), if any. */
    readonly syncedRecordVersion?: number;
  };
  readonly violations: readonly Violation[];
  /** Recorded with IPs, CiliumNode published from the latest record version, pool non-empty, no violation. */
  readonly ready: boolean;
}

export interface CloudSummary {
  readonly nodes: readonly NodeSummary[];
  readonly readyNodes: number;
  readonly violations: number;
}

/** One read of the server's CiliumNodes and of their history, then the summary of each instance. */
export async function summarize(
  ec2: Ec2State,
  k8s: Pick<KubernetesUnderTest, 'history' | 'listCiliumNodes'>,
  records: ReadonlyMap<string, NodeRecord>,
  instanceIds: readonly string[],
): Promise<CloudSummary> {
  const [history, ciliumNodes] = await Promise.all([k8s.history(), k8s.listCiliumNodes()]);
  const current = new Map(ciliumNodes.map((object) => [object.metadata.name, object]));
  const nodes = instanceIds.map((instanceId) =>
    summarizeNode(ec2, { history, current }, records.get(instanceId), instanceId),
  );
  return {
    nodes,
    readyNodes: nodes.filter((node) => node.ready).length,
    violations: nodes.reduce((sum, node) => sum + node.violations.length, 0),
  };
}

function summarizeNode(
  ec2: Ec2State,
  k8s: {
    readonly history: readonly ObservedVersion[];
    readonly current: ReadonlyMap<string, CiliumNodeObject>;
  },
  record: NodeRecord | undefined,
  instanceId: string,
): NodeSummary {
  const instance = ec2.instance(instanceId);
  const nodeName = record?.nodeName ?? instance?.privateDnsName ?? instanceId;
  const history = k8s.history.filter((entry) => entry.name === nodeName && entry.type !== 'DELETED');
  const violations = history.flatMap((entry) => {
    const version = entry.object as unknown as CiliumNode;
    return [...checkStatusCoversSpec(version), ...checkRightNode(version, instanceId)].map((violation) => ({
      ...violation,
      message: `rv ${entry.resourceVersion}: ${violation.message}`,
    }));
  });
  const current = k8s.current.get(nodeName) as unknown as CiliumNode | undefined;
  const annotation = current?.metadata.annotations?.[RECORD_VERSION_ANNOTATION];
  const poolSize = Object.keys(current?.spec?.ipam?.pool ?? {}).length;
  const recordSummary =
    record === undefined
      ? undefined
      : {
          version: record.version,
          lifecycle: record.lifecycle,
          enis: record.enis.length,
          ips: record.enis.reduce((sum, eni) => sum + eni.secondaryIps.length + eni.prefixes.length * 16, 0),
        };
  const ciliumNode =
    current === undefined
      ? undefined
      : {
          resourceVersion: current.metadata.resourceVersion ?? '',
          versions: history.length,
          poolSize,
          usedIps: Object.keys(current.status?.ipam?.used ?? {}).length,
          statusEnis: Object.keys(current.status?.eni?.enis ?? {}).length,
          ...(annotation === undefined ? {} : { syncedRecordVersion: Number(annotation) }),
        };
  const ready =
    recordSummary !== undefined &&
    recordSummary.lifecycle === 'active' &&
    recordSummary.ips > 0 &&
    ciliumNode !== undefined &&
    ciliumNode.poolSize > 0 &&
    ciliumNode.syncedRecordVersion === recordSummary.version &&
    violations.length === 0;
  return {
    instanceId,
    instanceType: instance?.instanceType ?? '?',
    state: instance?.state ?? 'unknown',
    nodeName,
    ...(recordSummary === undefined ? {} : { record: recordSummary }),
    ...(ciliumNode === undefined ? {} : { ciliumNode }),
    violations,
    ready,
  };
}

/** Calls the stand-ins refused for authorization, counted by what was asked. */
export interface Denials {
  /** EC2 calls IAM denied (UnauthorizedOperation), by action. */
  readonly ec2: Readonly<Record<string, number>>;
  /** Kubernetes requests refused 401 or 403 (RBAC), by verb and resource. */
  readonly kubernetes: Readonly<Record<string, number>>;
  /** Lambda invokes IAM denied (one function invoking another), by function name. */
  readonly lambda: Readonly<Record<string, number>>;
  /** The functions' denials: what fails `npm start -- --once`. */
  readonly total: number;
  /**
   * Calls of a person's identities refused (kubectl contexts 401 or 403, the local operator's EC2
   * calls and invokes IAM denied): reported apart, never counted in `total`.
   */
  readonly person: number;
}

/** An invoke IAM denied: of which function, by which access key. */
export interface DeniedInvoke {
  readonly functionName: string;
  readonly accessKeyId: string;
}

/** The authorization denials among the calls made so far (floor 0: the roles allow what the functions do). */
export function denialsOf(
  ec2Calls: readonly CallRecord[],
  k8sRequests: readonly Pick<ObservedRequest, 'verb' | 'subresource' | 'statusCode' | 'user'>[],
  deniedInvokes: readonly DeniedInvoke[] = [],
  personAccessKeyIds: ReadonlySet<string> = new Set(),
): Denials {
  let person = 0;
  const ec2: Record<string, number> = {};
  for (const call of ec2Calls) {
    if (call.deniedByIam !== true) continue;
    if (call.accessKeyId !== undefined && personAccessKeyIds.has(call.accessKeyId)) person++;
    else ec2[call.action] = (ec2[call.action] ?? 0) + 1;
  }
  const kubernetes: Record<string, number> = {};
  for (const request of k8sRequests) {
    if (request.statusCode !== 401 && request.statusCode !== 403) continue;
    if (request.user?.startsWith(PERSON_USER_PREFIX)) {
      person++;
      continue;
    }
    const key = `${request.statusCode} ${request.verb} ${request.subresource === 'status' ? 'ciliumnodes/status' : 'ciliumnodes'}`;
    kubernetes[key] = (kubernetes[key] ?? 0) + 1;
  }
  const lambda: Record<string, number> = {};
  for (const { functionName, accessKeyId } of deniedInvokes) {
    if (personAccessKeyIds.has(accessKeyId)) person++;
    else lambda[functionName] = (lambda[functionName] ?? 0) + 1;
  }
  const total = [...Object.values(ec2), ...Object.values(kubernetes), ...Object.values(lambda)].reduce(
    (sum, count) => sum + count,
    0,
  );
  return { ec2, kubernetes, lambda, total, person };
}

/** One line: the denial counts, or that there were none. */
export function renderDenials(denials: Denials): string {
  const list = (counts: Readonly<Record<string, number>>) =>
    Object.entries(counts)
      .map(([key, count]) => `${key} ${count}`)
      .join(', ') || 'none';
  const yours =
    denials.person > 0
      ? `; your own requests refused (kubectl, aws CLI), not counted: ${denials.person}`
      : '';
  return `denied: ${denials.total} (EC2 by IAM: ${list(denials.ec2)}; Kubernetes: ${list(denials.kubernetes)}; Lambda by IAM: ${list(denials.lambda)})${yours}`;
}

/** A fixed-width table of the nodes, then the first violations, if any. */
export function renderSummary(summary: CloudSummary): string {
  const header = [
    'INSTANCE',
    'TYPE',
    'STATE',
    'CILIUMNODE',
    'RECORD',
    'ENIS',
    'IPS',
    'CN RV',
    'VERSIONS',
    'POOL',
    'USED',
    'SYNCED',
    'READY',
  ];
  const rows = summary.nodes.map((node) => [
    node.instanceId,
    node.instanceType,
    node.state,
    node.nodeName,
    node.record ? `v${node.record.version}${node.record.lifecycle === 'retired' ? ' retired' : ''}` : '-',
    node.record ? String(node.record.enis) : '-',
    node.record ? String(node.record.ips) : '-',
    node.ciliumNode?.resourceVersion ?? '-',
    node.ciliumNode ? String(node.ciliumNode.versions) : '-',
    node.ciliumNode ? String(node.ciliumNode.poolSize) : '-',
    node.ciliumNode ? String(node.ciliumNode.usedIps) : '-',
    node.ciliumNode?.syncedRecordVersion === undefined ? '-' : `v${node.ciliumNode.syncedRecordVersion}`,
    node.ready ? 'yes' : node.violations.length > 0 ? 'VIOLATION' : 'no',
  ]);
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const line = (cells: readonly string[]) =>
    cells.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ');
  const violations = summary.nodes.flatMap((node) =>
    node.violations.map((violation) => `  ${node.nodeName}: ${violation.message}`),
  );
  return [
    `nodes ${summary.nodes.length}, ready ${summary.readyNodes}, invariant violations ${summary.violations} (status covers spec and right node, over every recorded CiliumNode version)`,
    line(header),
    ...rows.map(line),
    ...(violations.length > 0 ? ['violations:', ...violations.slice(0, 20)] : []),
  ].join('\n');
}
