import { expect } from 'vitest';
import { tableGenerationOf } from '../../../functions/aws/table-generation.ts';
import type { CiliumNode } from '../../../functions/core/ciliumnode.ts';
import type { NodeRecord } from '../../../functions/core/model.ts';
import type { Log } from '../../../functions/core/ports.ts';
import { KubernetesCiliumNodeApi } from '../../../functions/k8s/ciliumnode-api.ts';
import { buildKubeConfig, kubernetesConnectionFromEnv } from '../../../functions/k8s/kube-config.ts';
import type { SyncDependencies } from '../../../functions/services/sync-node.ts';
import { checkRightNode, checkStatusCoversSpec } from '../../support/invariants.ts';
import type { KubernetesUnderTest } from '../../support/kubernetes.ts';
import { createTestNodeTable, type TestNodeTable } from '../../support/node-table.ts';

/**
 * The sync's real adapters against the local stand-ins: DynamoDB Local (a fresh node table) and a
 * Kubernetes API (the real kube-apiserver, or the emulator where a test injects faults) reached
 * through a kubeconfig file, exactly as the Lambda connects.
 */

interface LogEntry {
  readonly level: 'debug' | 'info' | 'warn' | 'error';
  readonly message: string;
  readonly fields: Record<string, unknown>;
}

class RecordingLog implements Log {
  readonly entries: LogEntry[] = [];
  debug(message: string, fields: Record<string, unknown> = {}): void {
    this.entries.push({ level: 'debug', message, fields });
  }
  info(message: string, fields: Record<string, unknown> = {}): void {
    this.entries.push({ level: 'info', message, fields });
  }
  warn(message: string, fields: Record<string, unknown> = {}): void {
    this.entries.push({ level: 'warn', message, fields });
  }
  error(message: string, fields: Record<string, unknown> = {}): void {
    this.entries.push({ level: 'error', message, fields });
  }
  errors(): LogEntry[] {
    return this.entries.filter((entry) => entry.level === 'error');
  }
}

export interface SyncTestEnvironment {
  readonly k8s: KubernetesUnderTest;
  readonly kubeconfigPath: string;
  readonly table: TestNodeTable;
  readonly log: RecordingLog;
  readonly deps: SyncDependencies;
}

/**
 * Fresh sync dependencies (a new client, a new log) on a running Kubernetes API: tests of one file
 * share one server, and each uses node names of its own (`freshNode`).
 */
export async function startSyncEnvironment(
  k8s: KubernetesUnderTest,
  table?: TestNodeTable,
): Promise<SyncTestEnvironment> {
  const kubeconfigPath = k8s.writeKubeconfig(undefined, k8s.tokenOf('Sync'));
  const nodeTable = table ?? (await createTestNodeTable());
  const kubeConfig = buildKubeConfig(kubernetesConnectionFromEnv({ KUBECONFIG: kubeconfigPath }), {
    credentials: async () => {
      throw new Error('a kubeconfig connection must not ask for AWS credentials');
    },
  });
  const log = new RecordingLog();
  // A fresh start on the shared server: no fault a previous test armed, no request it made.
  k8s.faults.clear();
  await k8s.resetRequests();
  return {
    k8s,
    kubeconfigPath,
    table: nodeTable,
    log,
    deps: { store: nodeTable.store, ciliumNodes: new KubernetesCiliumNodeApi(kubeConfig), log },
  };
}

const generations = new Map<string, () => Promise<string>>();

/** The table's generation as the functions read it (`<name>@<creation time>`, DescribeTable). */
export function tableGeneration(table: TestNodeTable): Promise<string> {
  let generation = generations.get(table.tableName);
  if (generation === undefined) {
    generation = tableGenerationOf(table.client, table.tableName);
    generations.set(table.tableName, generation);
  }
  return generation();
}

/**
 * Stores `record` as the next version (conditional on the previous one, like every writer),
 * stamped as reconciled with EC2 in this table (as the allocator's writes are) unless it carries
 * a stamp of its own.
 */
export async function putRecord(table: TestNodeTable, record: NodeRecord): Promise<void> {
  const stamped =
    record.reconciledInTable === undefined
      ? { ...record, reconciledInTable: await tableGeneration(table) }
      : record;
  await table.store.put(stamped, record.version === 1 ? undefined : record.version - 1);
}

let instanceCounter = 0;

/** A fresh instance id and node name, so tests sharing one table never meet. */
export function freshNode(): { instanceId: string; nodeName: string } {
  instanceCounter += 1;
  const suffix = (0xa000 + instanceCounter).toString(16);
  return {
    instanceId: `i-0000000000000${suffix}`,
    nodeName: `ip-10-0-${instanceCounter % 250}-${instanceCounter % 250}.ec2.internal`,
  };
}

/** Invariants 1 and 6 over EVERY version the server stored for `name` (what any watcher could see). */
export async function expectInvariantsAtEveryVersion(
  k8s: KubernetesUnderTest,
  name: string,
  instanceId: string,
): Promise<number> {
  const history = await k8s.history(name);
  for (const entry of history) {
    const object = entry.object as unknown as CiliumNode;
    expect(checkStatusCoversSpec(object), `resourceVersion ${entry.resourceVersion} (${entry.type})`).toEqual(
      [],
    );
    expect(checkRightNode(object, instanceId), `resourceVersion ${entry.resourceVersion}`).toEqual([]);
  }
  return history.length;
}

/** Writes the functions made (create, patch, update, delete) since the last reset, optionally of one object. */
export async function writeRequests(k8s: KubernetesUnderTest, name?: string): Promise<number> {
  return (await k8s.requests(name === undefined ? {} : { name })).filter((request) =>
    ['create', 'patch', 'update', 'delete'].includes(request.verb),
  ).length;
}
