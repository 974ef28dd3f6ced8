import type { DynamoDBBatchResponse, DynamoDBStreamEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ConfigurationError, InvalidInputError } from '../../../functions/core/errors.ts';
import type { NodeRecord } from '../../../functions/core/model.ts';
import type { SyncNodeSummary } from '../../../functions/services/sync-node.ts';
import type { handler as syncHandler } from '../../../functions/sync/index.ts';
import { eniFixture, nodeRecordFixture } from '../../fixtures/node-records.ts';
import { type KubernetesUnderTest, startKubernetes } from '../../support/kubernetes.ts';
import { createTestNodeTable, type TestNodeTable } from '../../support/node-table.ts';
import {
  freshNode,
  putRecord,
  type SyncTestEnvironment,
  startSyncEnvironment,
  writeRequests,
} from './support.ts';

/**
 * The Lambda handler as deployed: module-scope dependencies from the environment, real adapters,
 * DynamoDB Local and kube-apiserver reached through KUBECONFIG.
 */

let table: TestNodeTable;
let kubernetes: KubernetesUnderTest;
let env: SyncTestEnvironment;
let handler: typeof syncHandler;

async function importHandler(variables: Record<string, string | undefined>): Promise<typeof syncHandler> {
  vi.resetModules();
  vi.stubEnv('POWERTOOLS_LOG_LEVEL', 'SILENT');
  for (const [name, value] of Object.entries(variables)) vi.stubEnv(name, value);
  try {
    return (await import('../../../functions/sync/index.ts')).handler;
  } finally {
    vi.unstubAllEnvs();
  }
}

beforeAll(async () => {
  [table, kubernetes] = await Promise.all([createTestNodeTable(), startKubernetes()]);
  env = await startSyncEnvironment(kubernetes, table);
  handler = await importHandler({ TABLE_NAME: table.tableName, KUBECONFIG: env.kubeconfigPath });
});
afterAll(async () => {
  await kubernetes?.close();
});

function activeRecord(node: { instanceId: string; nodeName: string }, version = 1): NodeRecord {
  return nodeRecordFixture({ ...node, version, enis: [eniFixture(0, 0), eniFixture(1, 2)] });
}

function streamEvent(
  records: { eventName: 'INSERT' | 'MODIFY' | 'REMOVE'; instanceId: string; sequenceNumber: string }[],
) {
  return {
    Records: records.map(({ eventName, instanceId, sequenceNumber }) => ({
      eventID: `event-${sequenceNumber}`,
      eventName,
      eventVersion: '1.1',
      eventSource: 'aws:dynamodb',
      awsRegion: 'us-east-1',
      eventSourceARN: `arn:aws:dynamodb:us-east-1:123456789012:table/${table.tableName}/stream/2024-01-01T00:00:00.000`,
      dynamodb: {
        Keys: { instanceId: { S: instanceId } },
        SequenceNumber: sequenceNumber,
        SizeBytes: 100,
        StreamViewType: 'NEW_IMAGE',
      },
    })),
  } satisfies DynamoDBStreamEvent;
}

describe('configuration', () => {
  it.each([
    {
      case: 'no TABLE_NAME',
      variables: { TABLE_NAME: undefined, KUBECONFIG: '/tmp/kubeconfig' },
      names: /TABLE_NAME/,
    },
    {
      case: 'neither KUBECONFIG nor the EKS variables',
      variables: { TABLE_NAME: 'nodes', KUBECONFIG: undefined, EKS_CLUSTER_NAME: undefined },
      names: /EKS_CLUSTER_NAME/,
    },
    {
      case: 'EKS endpoint without its CA',
      variables: {
        TABLE_NAME: 'nodes',
        KUBECONFIG: undefined,
        EKS_CLUSTER_NAME: 'prod',
        EKS_ENDPOINT: 'https://example.eks.amazonaws.com',
        EKS_CA_DATA: undefined,
      },
      names: /EKS_CA_DATA/,
    },
  ])('fails at cold start naming what is missing: $case', async ({ variables, names }) => {
    // The module is re-imported, so its error classes are fresh copies: compare by name.
    await expect(importHandler(variables)).rejects.toMatchObject({
      name: ConfigurationError.name,
      message: names,
    });
  });
});

describe('direct invokes', () => {
  it.each([
    { case: 'empty object', event: {}, field: /all: expected true, got undefined/ },
    {
      case: 'malformed instance id',
      event: { instanceId: 'i-XYZ' },
      field: /instanceId: must be an instance id/,
    },
    { case: 'all as a string', event: { all: 'true' }, field: /all: expected true, got "true"/ },
    {
      case: 'an EventBridge EC2 event',
      event: { source: 'aws.ec2', detail: { 'instance-id': 'i-0123456789abcdef0' } },
      field: /unexpected "source", "detail"/,
    },
  ])(
    'rejects $case with InvalidInputError naming the field, and touches nothing',
    async ({ event, field }) => {
      await env.k8s.resetRequests();
      await expect(handler(event)).rejects.toMatchObject({
        name: InvalidInputError.name,
        message: expect.stringMatching(/^expected \{"instanceId":"i-…"\} or \{"all":true\}; /),
      });
      await expect(handler(event)).rejects.toThrow(field);
      expect(await env.k8s.requests()).toHaveLength(0);
    },
  );

  it('{"instanceId"} syncs that node and returns its summary', async () => {
    const node = freshNode();
    await putRecord(table, activeRecord(node));
    const summary = (await handler({ instanceId: node.instanceId })) as SyncNodeSummary;
    expect(summary).toMatchObject({ instanceId: node.instanceId, outcome: 'written', writes: 3 });
    expect(await handler({ instanceId: node.instanceId })).toMatchObject({ outcome: 'in-sync', writes: 0 });
  });

  it('{"all":true} syncs every node and fails loudly if one of them failed', async () => {
    const node = freshNode();
    await putRecord(table, activeRecord(node));
    expect(await handler({ all: true })).toMatchObject({ failed: [] });
    expect(await env.deps.ciliumNodes.get(node.nodeName)).toBeDefined();

    const broken = freshNode();
    await putRecord(table, activeRecord(broken));
    const fault = env.k8s.faults.inject({
      match: { verb: 'get', name: broken.nodeName },
      kind: 'server-error',
      times: Number.POSITIVE_INFINITY,
    });
    try {
      await expect(handler({ all: true })).rejects.toThrow(
        new RegExp(`1 of \\d+ nodes failed to sync: ${broken.instanceId}`),
      );
    } finally {
      fault.cancel();
    }
  });
});

describe('DynamoDB stream batches', () => {
  it('syncs each instance once, ignores REMOVE, and reports only the failing instance', async () => {
    const healthy = freshNode();
    const failing = freshNode();
    const removed = freshNode();
    await putRecord(table, activeRecord(healthy));
    await putRecord(table, activeRecord(healthy, 2));
    await putRecord(table, activeRecord(failing));
    const fault = env.k8s.faults.inject({
      match: { verb: 'get', name: failing.nodeName },
      kind: 'server-error',
      times: Number.POSITIVE_INFINITY,
    });
    await env.k8s.resetRequests();
    let response: DynamoDBBatchResponse;
    try {
      response = (await handler(
        streamEvent([
          { eventName: 'INSERT', instanceId: healthy.instanceId, sequenceNumber: '100' },
          { eventName: 'INSERT', instanceId: failing.instanceId, sequenceNumber: '101' },
          { eventName: 'MODIFY', instanceId: healthy.instanceId, sequenceNumber: '102' },
          { eventName: 'REMOVE', instanceId: removed.instanceId, sequenceNumber: '103' },
        ]),
      )) as DynamoDBBatchResponse;
    } finally {
      fault.cancel();
    }
    expect(response).toEqual({ batchItemFailures: [{ itemIdentifier: '101' }] });
    // Two records named the healthy node; it was read (GET) once and synced from the latest version.
    expect(await env.k8s.requests({ verb: 'get', name: healthy.nodeName })).toHaveLength(1);
    expect((await env.deps.ciliumNodes.get(healthy.nodeName))?.metadata.annotations).toMatchObject({
      'serverless-eni-ipam.io/record-version': '2',
    });
    expect(await env.k8s.requests({ name: removed.nodeName })).toHaveLength(0);
  });

  it('treats a redelivered batch as a no-op', async () => {
    const node = freshNode();
    await putRecord(table, activeRecord(node));
    const event = streamEvent([{ eventName: 'INSERT', instanceId: node.instanceId, sequenceNumber: '200' }]);
    expect(await handler(event)).toEqual({ batchItemFailures: [] });
    await env.k8s.resetRequests();
    expect(await handler(event)).toEqual({ batchItemFailures: [] });
    expect(await writeRequests(env.k8s)).toBe(0);
  });
});
