import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoWatchLeaseStore } from '../aws/watch-lease.ts';
import type { WatchDependencies } from '../services/watch-ciliumnodes.ts';
import { buildAllocationDependencies } from './allocation-dependencies.ts';
import { Environment } from './environment.ts';
import type { createLog } from './logger.ts';

/** The watch function's dependencies (without the invocation id) and its time budget. */
export type WatchFunctionDependencies = Omit<WatchDependencies, 'invocationId'> & {
  /** How long one invocation watches at most (`WATCH_SECONDS`, default 780). */
  readonly watchMs: number;
  /** Kept free before the function's timeout to finish the nodes being served (`DRAIN_SECONDS`, default 90). */
  readonly drainMs: number;
  readonly prepareKubernetes: () => void;
};

/**
 * The allocating functions' dependencies plus `WATCH_TABLE_NAME` (required), `WATCH_LEASE_SECONDS`
 * (default 30), `WATCH_CONCURRENCY` (default 16), `WATCH_STANDBY_SECONDS` (default 75: a little
 * over the schedule's minute, so one tick always stands by for the holder's end).
 */
export function buildWatchDependencies(
  variables: Readonly<Record<string, string | undefined>>,
  log: ReturnType<typeof createLog>,
): WatchFunctionDependencies {
  const environment = new Environment(variables);
  const allocation = buildAllocationDependencies(variables, log);
  return {
    ...allocation,
    watcher: allocation.ciliumNodeWatch,
    leases: new DynamoWatchLeaseStore(new DynamoDBClient({}), environment.string('WATCH_TABLE_NAME')),
    watch: {
      leaseMs: environment.integer('WATCH_LEASE_SECONDS', 30) * 1000,
      concurrency: Math.max(1, environment.integer('WATCH_CONCURRENCY', 16)),
      standbyMs: environment.integer('WATCH_STANDBY_SECONDS', 75) * 1000,
    },
    watchMs: environment.integer('WATCH_SECONDS', 780) * 1000,
    drainMs: environment.integer('DRAIN_SECONDS', 90) * 1000,
  };
}
