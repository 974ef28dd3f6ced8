import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoNodeRecordStore } from '../aws/node-table.ts';
import { tableGenerationOf } from '../aws/table-generation.ts';
import type { Log } from '../core/ports.ts';
import { kubernetesConnectionFromEnv } from '../k8s/kube-connection.ts';
import { LazyCiliumNodeApi } from '../k8s/lazy-ciliumnode-api.ts';
import { Environment } from '../runtime/environment.ts';
import type { SyncDependencies } from '../services/sync-node.ts';

/** The sync function's dependencies plus its own settings; built once per container. */
export interface SyncFunctionDependencies extends SyncDependencies {
  /** Nodes synced at the same time, for stream batches and `{"all":true}`. */
  readonly concurrency: number;
  /** Starts loading the Kubernetes client (call when an invocation starts; see `LazyCiliumNodeApi`). */
  readonly prepareKubernetes: () => void;
}

/**
 * Builds the sync function's dependencies from its environment: `TABLE_NAME` (required),
 * `SYNC_CONCURRENCY` (default 8), `PAUSED` (default false), and the Kubernetes connection (`KUBECONFIG`, else `EKS_*`, see
 * `kubernetesConnectionFromEnv`). Throws `ConfigurationError` naming the first missing or malformed
 * variable, so a misconfigured function fails at cold start instead of on its first event.
 */
export function buildSyncDependencies(
  variables: Readonly<Record<string, string | undefined>>,
  log: Log,
): SyncFunctionDependencies {
  const environment = new Environment(variables);
  const tableName = environment.string('TABLE_NAME');
  const concurrency = Math.max(1, environment.integer('SYNC_CONCURRENCY'));
  const connection = kubernetesConnectionFromEnv(variables);
  const dynamoDb = new DynamoDBClient({});
  const ciliumNodes = new LazyCiliumNodeApi(
    connection,
    { credentials: () => dynamoDb.config.credentials() },
    { fieldManager: 'serverless-eni-ipam' },
  );
  return {
    store: new DynamoNodeRecordStore(dynamoDb, tableName),
    ciliumNodes,
    prepareKubernetes: () => ciliumNodes.prepare(),
    log,
    concurrency,
    tableGeneration: tableGenerationOf(dynamoDb, tableName),
    paused: environment.boolean('PAUSED'),
  };
}
