import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { LambdaNodeService } from '../aws/allocate-invoker.ts';
import { DynamoWatchLeaseStore } from '../aws/watch-lease.ts';
import { MAX_NODES_PER_REQUEST } from '../core/serve-node-request.ts';
import { kubernetesConnectionFromEnv } from '../k8s/kube-connection.ts';
import { LazyCiliumNodeApi } from '../k8s/lazy-ciliumnode-api.ts';
import type { WatchDependencies } from '../services/watch-ciliumnodes.ts';
import { Environment, readDefaultKnobs } from './environment.ts';
import type { createLog } from './logger.ts';

/** The watch function's dependencies (without the invocation id) and its time budget. */
export type WatchFunctionDependencies = Omit<WatchDependencies, 'invocationId'> & {
  /** How long one invocation watches at most (`WATCH_SECONDS`, default 780). */
  readonly watchMs: number;
  /** Kept free before the function's timeout to finish the nodes being served (`DRAIN_SECONDS`, default 90). */
  readonly drainMs: number;
  /** Starts loading the Kubernetes client (call when an invocation starts; see `LazyCiliumNodeApi`). */
  readonly prepareKubernetes: () => void;
};

/**
 * From the environment the stack sets: `WATCH_TABLE_NAME` and `ALLOCATE_FUNCTION_NAME` (required),
 * the Kubernetes connection (`EKS_*`, or `KUBECONFIG`), the default knobs (`DEFAULT_*`), `PAUSED`,
 * `WATCH_LEASE_SECONDS` (default 30), `WATCH_CONCURRENCY` (default 50, cilium-operator's
 * `--parallel-alloc-workers`), `WATCH_NODES_PER_INVOCATION` (default 10), `WATCH_STANDBY_SECONDS`
 * (default 75: a little over the schedule's minute, so one tick always stands by for the holder's
 * end). No EC2 client and no node table: the allocate function does that work.
 */
export function buildWatchDependencies(
  variables: Readonly<Record<string, string | undefined>>,
  log: ReturnType<typeof createLog>,
): WatchFunctionDependencies {
  const environment = new Environment(variables);
  const dynamoDb = new DynamoDBClient({});
  const watcher = new LazyCiliumNodeApi(kubernetesConnectionFromEnv(variables), {
    credentials: () => dynamoDb.config.credentials(),
  });
  return {
    watcher,
    prepareKubernetes: () => watcher.prepare(),
    leases: new DynamoWatchLeaseStore(dynamoDb, environment.string('WATCH_TABLE_NAME')),
    nodes: new LambdaNodeService(new LambdaClient({}), environment.string('ALLOCATE_FUNCTION_NAME')),
    defaultKnobs: readDefaultKnobs(environment),
    paused: environment.boolean('PAUSED'),
    clock: Date.now,
    log,
    watch: {
      leaseMs: environment.integer('WATCH_LEASE_SECONDS') * 1000,
      concurrency: Math.max(1, environment.integer('WATCH_CONCURRENCY')),
      nodesPerInvocation: Math.min(
        Math.max(1, environment.integer('WATCH_NODES_PER_INVOCATION')),
        MAX_NODES_PER_REQUEST,
      ),
      standbyMs: environment.integer('WATCH_STANDBY_SECONDS') * 1000,
      nodeLeaseMs: environment.integer('LEASE_DURATION_SECONDS') * 1000,
    },
    watchMs: environment.integer('WATCH_SECONDS') * 1000,
    drainMs: environment.integer('DRAIN_SECONDS') * 1000,
  };
}
