import { randomUUID } from 'node:crypto';
import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { DynamoWatchLeaseStore, WATCH_STATE_KEY } from '../../functions/aws/watch-lease.ts';
import type { NodeServicePort } from '../../functions/core/ports.ts';
import { nodeServiceResult } from '../../functions/core/serve-node-request.ts';
import type { WatchTrigger } from '../../functions/core/watch-plan.ts';
import type { AllocationDependencies } from '../../functions/services/allocate-node.ts';
import { serveNodes } from '../../functions/services/serve-node.ts';
import {
  type WatchDependencies,
  type WatchSummary,
  watchCiliumNodes,
} from '../../functions/services/watch-ciliumnodes.ts';
import type { AllocationHarness } from './allocation-harness.ts';

/**
 * The CiliumNode watcher on an allocation harness: its lease table in the harness's DynamoDB
 * Local, its node service the allocate function's own `serveNodes` run in-process (the deployed
 * watcher invokes the allocate function with the same request), its watch as the harness's
 * admin client (the Watch identity's RBAC is proven in test/integration/kubernetes).
 */
export interface WatchHarness {
  readonly leases: DynamoWatchLeaseStore;
  /** Watches for `milliseconds` of real time (the lease clock is the harness's manual clock). */
  watchFor(milliseconds: number, overrides?: Partial<WatchDependencies>): Promise<WatchSummary>;
  dependencies(overrides?: Partial<WatchDependencies>): WatchDependencies;
  /** A node service that records every request it is handed, serving with `deps()`. */
  nodeService(deps?: () => AllocationDependencies): { service: NodeServicePort; requests: WatchTrigger[] };
}

export async function startWatchHarness(harness: AllocationHarness): Promise<WatchHarness> {
  const tableName = `watch-${randomUUID()}`;
  await harness.table.client.send(
    new CreateTableCommand({
      TableName: tableName,
      AttributeDefinitions: [{ AttributeName: WATCH_STATE_KEY, AttributeType: 'S' }],
      KeySchema: [{ AttributeName: WATCH_STATE_KEY, KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  const leases = new DynamoWatchLeaseStore(harness.table.client, tableName);

  const nodeService: WatchHarness['nodeService'] = (deps = () => harness.publishingDependencies()) => {
    const requests: WatchTrigger[] = [];
    const service: NodeServicePort = {
      serve: async (triggers) => {
        requests.push(...triggers);
        const served = await serveNodes(triggers, {
          ...deps(),
          invocationId: randomUUID(),
          release: { enabled: false, delayMs: 0 },
        });
        // Through JSON, as the answer reaches the watcher from Lambda.
        return nodeServiceResult(JSON.parse(JSON.stringify(served)) as unknown[]);
      },
    };
    return { service, requests };
  };

  const dependencies: WatchHarness['dependencies'] = (overrides = {}) => {
    const base = harness.dependencies();
    return {
      watcher: harness.ciliumNodes,
      leases,
      nodes: nodeService().service,
      defaultKnobs: base.settings.defaultKnobs,
      paused: false,
      clock: base.clock,
      log: base.log,
      invocationId: randomUUID(),
      watch: { leaseMs: 600, concurrency: 4, nodesPerInvocation: 2, standbyMs: 0, nodeLeaseMs: 15_000 },
      sleep: (milliseconds) => new Promise((resolve) => setTimeout(resolve, milliseconds)),
      ...overrides,
    };
  };

  return {
    leases,
    dependencies,
    nodeService,
    watchFor: (milliseconds, overrides = {}) =>
      watchCiliumNodes(dependencies(overrides), harness.clock.now() + milliseconds),
  };
}
