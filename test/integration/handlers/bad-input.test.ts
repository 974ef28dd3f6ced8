import type { DynamoDBBatchResponse } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { MAX_NODES_PER_REQUEST } from '../../../functions/core/serve-node-request.ts';
import {
  type AllocationHarness,
  CLUSTER_NAME,
  startAllocationHarness,
} from '../../support/allocation-harness.ts';
import {
  type BadInputCase,
  effectsOf,
  INSTANCE_ID,
  nested,
  putRawItem,
  SYNC_CASES,
  servedNode,
  stateChange,
  streamRecord,
  TASK_CASES,
} from '../../support/bad-input.ts';

/**
 * Bad input, everywhere (issue 14, item 7): every entry point of the deployed functions is given
 * malformed and hostile payloads, in-process against DynamoDB Local and the HTTP stand-ins. Each is
 * answered with a reason naming the offending field, and changes nothing: the node table, EC2 and
 * the CiliumNodes are as before. Then a CiliumNode knob that names something that cannot qualify is
 * refused and reported on the node, and one unreadable table item stops neither the sweep nor a
 * resync of the others.
 */

type Handler = (event: unknown, context?: unknown) => Promise<unknown>;

let harness: AllocationHarness;
let handlers: Record<'allocate' | 'sync' | 'sweep' | 'watch', Handler>;
const context = {
  awsRequestId: 'bad-input',
  getRemainingTimeInMillis: () => 60_000,
};

async function importHandlers(): Promise<typeof handlers> {
  vi.resetModules();
  const variables: Record<string, string> = {
    POWERTOOLS_LOG_LEVEL: 'SILENT',
    TABLE_NAME: harness.table.tableName,
    CLUSTER_NAME,
    CLUSTER_TAG_VALUES: 'owned,shared',
    KUBECONFIG: harness.k8s.writeKubeconfig(),
    AWS_ENDPOINT_URL_EC2: harness.ec2.url,
    WATCH_TABLE_NAME: 'unused-watch-table',
    ALLOCATE_FUNCTION_NAME: 'unused-allocate-function',
    PAUSED: 'false',
    WATCH_LEASE_SECONDS: '60',
    WATCH_CONCURRENCY: '4',
    WATCH_NODES_PER_INVOCATION: '10',
    WATCH_STANDBY_SECONDS: '5',
    WATCH_SECONDS: '50',
    DRAIN_SECONDS: '5',
  };
  for (const [name, value] of Object.entries(variables)) vi.stubEnv(name, value);
  try {
    return {
      allocate: (await import('../../../functions/allocate/index.ts')).handler as Handler,
      sync: (await import('../../../functions/sync/index.ts')).handler as Handler,
      sweep: (await import('../../../functions/sweep/index.ts')).handler as Handler,
      watch: (await import('../../../functions/watch/index.ts')).handler as Handler,
    };
  } finally {
    vi.unstubAllEnvs();
  }
}

beforeAll(async () => {
  harness = await startAllocationHarness();
  handlers = await importHandlers();
});
afterAll(async () => {
  await harness?.close();
});

const ONE_MEGABYTE = 1_048_576;
const spotWarning = (action: unknown) => ({
  ...stateChange(INSTANCE_ID),
  'detail-type': 'EC2 Spot Instance Interruption Warning',
  detail: { 'instance-id': INSTANCE_ID, 'instance-action': action },
});
const serveNodes = (nodes: unknown) => ({ task: 'serve-nodes', nodes });

/** EventBridge events (answered `rejected`) and the watcher's direct invoke (thrown). */
const ALLOCATE_CASES: readonly BadInputCase[] = [
  {
    case: 'allocate: a bare string',
    entry: 'allocate',
    payload: () => 'hello',
    answer: 'rejected',
    names: /payload|detail-type/,
  },
  {
    case: 'allocate: null',
    entry: 'allocate',
    payload: () => null,
    answer: 'rejected',
    names: /payload|detail-type/,
  },
  {
    case: 'allocate: an array',
    entry: 'allocate',
    payload: () => [stateChange(INSTANCE_ID)],
    answer: 'rejected',
    names: /payload|detail-type/,
  },
  {
    case: 'allocate: a number',
    entry: 'allocate',
    payload: () => 42,
    answer: 'rejected',
    names: /payload|detail-type/,
  },
  {
    case: 'allocate: another source',
    entry: 'allocate',
    payload: () => ({ ...stateChange(INSTANCE_ID), source: 'aws.s3' }),
    answer: 'rejected',
    names: /source/,
  },
  {
    case: 'allocate: no detail',
    entry: 'allocate',
    payload: () => ({ ...stateChange(INSTANCE_ID), detail: undefined }),
    answer: 'rejected',
    names: /detail/,
  },
  {
    case: 'allocate: instance-id a number',
    entry: 'allocate',
    payload: () => stateChange(12345),
    answer: 'rejected',
    names: /instance-id/,
  },
  {
    case: 'allocate: instance-id of the wrong pattern',
    entry: 'allocate',
    payload: () => stateChange('i-nope'),
    answer: 'rejected',
    names: /instance-id/,
  },
  {
    case: 'allocate: instance-id carrying an injection',
    entry: 'allocate',
    payload: () => stateChange(`${INSTANCE_ID}' OR '1'='1`),
    answer: 'rejected',
    names: /instance-id/,
  },
  {
    case: 'allocate: instance-id carrying a forged log line',
    entry: 'allocate',
    payload: () => stateChange(`${INSTANCE_ID}\n{"level":"INFO","message":"allocated"}`),
    answer: 'rejected',
    names: /instance-id/,
  },
  {
    case: 'allocate: a 1 MB instance-id',
    entry: 'allocate',
    payload: () => stateChange(`i-${'a'.repeat(ONE_MEGABYTE)}`),
    answer: 'rejected',
    names: /instance-id/,
  },
  {
    case: 'allocate: an unknown state',
    entry: 'allocate',
    payload: () => stateChange(INSTANCE_ID, 'exploded'),
    answer: 'rejected',
    names: /state/,
  },
  {
    case: 'allocate: an unknown detail-type',
    entry: 'allocate',
    payload: () => ({ ...stateChange(INSTANCE_ID), 'detail-type': 'EC2 Instance Rebalance Recommendation' }),
    answer: 'rejected',
    names: /detail-type/,
  },
  {
    case: 'allocate: a spot warning with a 1 MB action',
    entry: 'allocate',
    payload: () => spotWarning('t'.repeat(ONE_MEGABYTE)),
    answer: 'rejected',
    names: /instance-action/,
  },
  {
    case: 'allocate: detail nested 5000 levels deep',
    entry: 'allocate',
    payload: () => ({ ...stateChange(INSTANCE_ID), detail: nested(5000) }),
    answer: 'rejected',
    names: /instance-id/,
  },
  {
    case: 'allocate: source and detail only on the prototype (__proto__ keys)',
    entry: 'allocate',
    payload: () =>
      JSON.parse(
        `{"__proto__":{"source":"aws.ec2","polluted":true},"detail-type":"EC2 Instance State-change Notification",` +
          `"detail":{"__proto__":{"instance-id":"${INSTANCE_ID}","state":"running"}}}`,
      ),
    answer: 'rejected',
    names: /source|instance-id/,
  },
  {
    case: 'serve-nodes: nodes not a list',
    entry: 'allocate',
    payload: () => serveNodes(INSTANCE_ID),
    answer: 'throws',
    names: /nodes/,
  },
  {
    case: 'serve-nodes: no nodes',
    entry: 'allocate',
    payload: () => serveNodes([]),
    answer: 'throws',
    names: /nodes/,
  },
  {
    case: 'serve-nodes: more nodes than one invocation serves',
    entry: 'allocate',
    payload: () =>
      serveNodes(
        Array.from({ length: MAX_NODES_PER_REQUEST + 1 }, (_, index) =>
          servedNode(`i-${index.toString(16).padStart(17, '0')}`),
        ),
      ),
    answer: 'throws',
    names: /nodes/,
  },
  {
    case: 'serve-nodes: a node without instanceId',
    entry: 'allocate',
    payload: () => serveNodes([{ allocate: true, release: false }]),
    answer: 'throws',
    names: /nodes\[0\]\.instanceId/,
  },
  {
    case: 'serve-nodes: the same node twice',
    entry: 'allocate',
    payload: () => serveNodes([servedNode(INSTANCE_ID), servedNode(INSTANCE_ID)]),
    answer: 'throws',
    names: /nodes/,
  },
  {
    case: 'serve-nodes: allocate a string',
    entry: 'allocate',
    payload: () => serveNodes([{ ...servedNode(INSTANCE_ID), allocate: 'yes' }]),
    answer: 'throws',
    names: /nodes\[0\]\.allocate/,
  },
  {
    case: 'allocate: an unknown task',
    entry: 'allocate',
    payload: () => ({ task: 'nope' }),
    answer: 'throws',
    names: /task/,
  },
  {
    case: 'serve-nodes: a node with a prototype-polluting key and a bad id',
    entry: 'allocate',
    payload: () =>
      JSON.parse(
        '{"task":"serve-nodes","nodes":[{"instanceId":"i-x","allocate":true,"release":false,"__proto__":{"polluted":true}}]}',
      ),
    answer: 'throws',
    names: /nodes\[0\]\.instanceId/,
  },
];

/** Stream batches whose records cannot be acted on: each skipped, none failing the batch. */
const STREAM_CASES: readonly BadInputCase[] = [
  { case: 'stream: a record without Keys', keys: undefined },
  { case: 'stream: a key of the wrong type', keys: { instanceId: { N: '5' } } },
  { case: 'stream: a key naming no instance', keys: { instanceId: { S: "i-1'; DROP TABLE nodes; --" } } },
  { case: 'stream: a key under another attribute', keys: { nodeName: { S: INSTANCE_ID } } },
  { case: 'stream: a REMOVE only', keys: { instanceId: { S: INSTANCE_ID } }, eventName: 'REMOVE' },
].map(({ case: name, keys, eventName }) => ({
  case: name,
  entry: 'sync' as const,
  payload: () => ({
    Records: [streamRecord(harness.table.tableName, { keys, ...(eventName ? { eventName } : {}) })],
  }),
  answer: 'skipped-records' as const,
  names: /./,
}));

const BATTERY = [...ALLOCATE_CASES, ...SYNC_CASES, ...STREAM_CASES, ...TASK_CASES];

/** A healthy node, launched, with its agent's CiliumNode, allocated and synced. */
async function serveHealthyNode(label: string) {
  const instance = harness.launch('m5.large');
  await harness.createCiliumNode(instance, { eni: { 'first-interface-index': 1 } });
  const allocated = await handlers.allocate(stateChange(instance.instanceId), { awsRequestId: label });
  expect(allocated).toMatchObject({ status: 'allocated', outcome: { kind: 'reconciled' } });
  // The allocate function publishes the version it wrote itself; the sync finds it there or writes it.
  expect(await handlers.sync({ instanceId: instance.instanceId })).toMatchObject({
    outcome: expect.stringMatching(/^(written|in-sync)$/),
  });
  const ciliumNode = await harness.ciliumNodes.get(instance.privateDnsName);
  expect(ciliumNode?.status?.eni?.enis).toBeDefined();
  expect(Object.keys(ciliumNode?.spec?.ipam?.pool ?? {})).toHaveLength(8);
  return instance;
}

describe('bad input, everywhere', () => {
  it('holds at least 30 distinct kinds', () => {
    expect(new Set(BATTERY.map((item) => item.case)).size).toBe(BATTERY.length);
    expect(BATTERY.length).toBeGreaterThanOrEqual(30);
  });

  it.each(BATTERY)('$case: a clear answer naming the field, and nothing written', async (item) => {
    const before = await effectsOf(harness);
    const answer = handlers[item.entry](item.payload(), context);
    if (item.answer === 'throws') {
      const error = await answer.then(
        (result) => ({ resolved: result }),
        (thrown: unknown) => thrown,
      );
      expect(error).toMatchObject({ name: 'InvalidInputError', message: expect.stringMatching(item.names) });
      expect((error as Error).message.length).toBeLessThan(2_000);
    } else if (item.answer === 'rejected') {
      const result = (await answer) as { status: string; reason: string };
      expect(result).toMatchObject({ status: 'rejected', reason: expect.stringMatching(item.names) });
      expect(result.reason.length).toBeLessThan(2_000);
    } else {
      expect((await answer) as DynamoDBBatchResponse).toEqual({ batchItemFailures: [] });
    }
    expect(await effectsOf(harness)).toEqual(before);
  });

  it('a stream record of an item in a newer schema is failed for a retry, and nothing is published', async () => {
    const instance = harness.launch('m5.large');
    await putRawItem(harness, {
      instanceId: instance.instanceId,
      version: 3,
      nodeName: instance.privateDnsName,
      schemaVersion: 99,
      enis: [],
    });
    const before = await effectsOf(harness);
    const keys = { instanceId: { S: instance.instanceId } };
    const batch = { Records: [streamRecord(harness.table.tableName, { keys, sequenceNumber: '77' })] };
    expect(await handlers.sync(batch, context)).toEqual({ batchItemFailures: [{ itemIdentifier: '77' }] });
    await expect(handlers.sync({ instanceId: instance.instanceId })).rejects.toThrow(/schema version 99/);
    expect(await effectsOf(harness)).toEqual(before);
  });

  it('leaves no prototype polluted, and still serves a healthy node afterwards', async () => {
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.hasOwn(Object.prototype, 'polluted')).toBe(false);
    await serveHealthyNode('healthy-after-battery');
  });
});

/**
 * Allocates for a node whose CiliumNode sets `eni`, then publishes: the allocation must be refused
 * with `code`, recorded on the node item and shown in its CiliumNode's operator status, and no ENI
 * may be attached in its stead.
 */
async function expectRefusedKnob(eni: Record<string, unknown>, code: string, names: RegExp) {
  const instance = harness.launch('m5.large');
  await harness.createCiliumNode(instance, { eni });
  await handlers
    .allocate(stateChange(instance.instanceId), { awsRequestId: `knob-${code}` })
    .catch(() => undefined);
  await handlers.sync({ instanceId: instance.instanceId });
  const record = await harness.table.store.get(instance.instanceId);
  expect(record?.lastError).toMatchObject({ code, message: expect.stringMatching(names) });
  const status = (await harness.ciliumNodes.get(instance.privateDnsName))?.status;
  expect(status?.ipam?.['operator-status']?.error).toMatch(new RegExp(`^${code.replaceAll('.', '\\.')}: `));
  expect(status?.ipam?.['operator-status']?.error).toMatch(names);
  expect(harness.secondaryEnis(instance.instanceId)).toEqual([]);
  return instance;
}

describe('CiliumNode knobs that cannot qualify: refused and reported on the node, never replaced by a default', () => {
  it('subnet-ids naming only a subnet of another VPC', async () => {
    const elsewhere = harness.ec2.state.addVpc({ cidrBlock: '172.31.0.0/16' });
    const foreign = harness.ec2.state.addSubnet({
      vpcId: elsewhere.vpcId,
      availabilityZone: harness.seed.subnets.nodesA.availabilityZone,
      cidrBlock: '172.31.1.0/24',
    });
    const mutations = harness.ec2.calls.mutating();
    await expectRefusedKnob(
      { 'first-interface-index': 1, 'subnet-ids': [foreign.subnetId] },
      'SubnetIdsUnusable',
      new RegExp(`subnet-ids \\[${foreign.subnetId}\\]`),
    );
    expect(harness.ec2.calls.mutating()).toBe(mutations);
  });

  it('subnet-ids naming an unknown subnet and one of another zone', async () => {
    const ids = ['subnet-0000000000deadbee', harness.seed.subnets.podsB.subnetId];
    await expectRefusedKnob(
      { 'first-interface-index': 1, 'subnet-ids': ids },
      'SubnetIdsUnusable',
      /spec\.eni\.subnet-ids/,
    );
  });

  it('a security group that does not exist: EC2 refuses the ENI, and the node says so', async () => {
    const instance = await expectRefusedKnob(
      { 'first-interface-index': 1, 'security-groups': ['sg-0000000000deadbee'] },
      'InvalidGroup.NotFound',
      /sg-0000000000deadbee/,
    );
    // Not created with the primary ENI's groups instead: no ENI at all.
    expect(harness.ec2.state.networkInterfaces({ instanceId: instance.instanceId })).toHaveLength(1);
  });

  it('a first-interface-index beyond the instance type’s interfaces', async () => {
    const mutations = harness.ec2.calls.mutating();
    await expectRefusedKnob(
      { 'first-interface-index': 9 },
      'FirstInterfaceIndexOutOfRange',
      /first-interface-index 9/,
    );
    expect(harness.ec2.calls.mutating()).toBe(mutations);
  });

  it('a tag filter with an empty key', async () => {
    const mutations = harness.ec2.calls.mutating();
    await expectRefusedKnob(
      { 'first-interface-index': 1, 'subnet-tags': { '': 'pods' } },
      'MalformedKnob',
      /spec\.eni\.subnet-tags/,
    );
    expect(harness.ec2.calls.mutating()).toBe(mutations);
  });

  it('serves the same node once the knob is fixed', async () => {
    const instance = await expectRefusedKnob(
      { 'first-interface-index': 7 },
      'FirstInterfaceIndexOutOfRange',
      /7/,
    );
    await harness.ciliumNodes.patchMain(instance.privateDnsName, [
      { op: 'replace', path: '/spec/eni/first-interface-index', value: 1 },
    ]);
    expect(
      await handlers.allocate(stateChange(instance.instanceId), { awsRequestId: 'knob-fixed' }),
    ).toMatchObject({
      status: 'allocated',
      outcome: { kind: 'reconciled' },
    });
    expect((await harness.table.store.get(instance.instanceId))?.lastError).toBeUndefined();
    expect(harness.secondaryEnis(instance.instanceId)).toHaveLength(1);
  });
});

describe('one unreadable item in the table', () => {
  it('stops neither the sweep nor a resync of the other nodes; the garbage collection deletes nothing', async () => {
    const healthy = await serveHealthyNode('before-bad-items');
    const newer = harness.launch('m5.large');
    const wrongTypes = harness.launch('m5.large');
    const gone = 'i-0000000000000bad1';
    const missed = harness.launch('m5.large'); // its launch event was lost: the sweep must serve it
    const bad: Record<string, unknown>[] = [
      {
        instanceId: newer.instanceId,
        version: 4,
        nodeName: newer.privateDnsName,
        schemaVersion: 99,
        enis: [],
      },
      {
        instanceId: wrongTypes.instanceId,
        version: 2,
        nodeName: wrongTypes.privateDnsName,
        knobs: {},
        enis: 'garbage',
      },
      { instanceId: gone, version: 'one', nodeName: 'ip-10-0-9-9.ec2.internal', knobs: {}, enis: [] },
    ];
    for (const item of bad) await putRawItem(harness, item);
    const badIds = bad.map((item) => item.instanceId);

    const summary = (await handlers.sweep({ task: 'sweep' }, { awsRequestId: 'sweep-past-bad-items' })) as {
      failed: { instanceId: string; error: string }[];
    };
    // Earlier tests left unreadable items and refused knobs behind too: those fail as well, alone.
    const failedIds = summary.failed.map((failure) => failure.instanceId);
    expect(failedIds).toEqual(expect.arrayContaining(badIds));
    expect(failedIds).not.toContain(healthy.instanceId);
    expect(failedIds).not.toContain(missed.instanceId);
    expect(summary.failed.find((failure) => failure.instanceId === newer.instanceId)?.error).toMatch(
      /schema version 99/,
    );
    expect(summary.failed.find((failure) => failure.instanceId === wrongTypes.instanceId)?.error).toMatch(
      /enis/,
    );
    expect(summary.failed.find((failure) => failure.instanceId === gone)?.error).toMatch(/version/);
    expect(harness.secondaryEnis(missed.instanceId)).toHaveLength(1);
    expect(harness.secondaryEnis(newer.instanceId)).toEqual([]);
    expect(harness.secondaryEnis(wrongTypes.instanceId)).toEqual([]);

    const resync = (await handlers.sync({ all: true }).catch((error: unknown) => error)) as {
      name: string;
      summary: { failed: { instanceId: string }[] };
    };
    expect(resync.name).toBe('SyncAllFailedError');
    const unsynced = resync.summary.failed.map((failure) => failure.instanceId);
    expect(unsynced).toEqual(expect.arrayContaining(badIds));
    expect(unsynced).not.toContain(healthy.instanceId);
    expect(unsynced).not.toContain(missed.instanceId);
    for (const instance of [healthy, missed]) {
      expect((await harness.ciliumNodes.get(instance.privateDnsName))?.status?.eni?.enis).toBeDefined();
    }
    expect(await harness.ciliumNodes.get(newer.privateDnsName)).toBeUndefined();

    const before = await effectsOf(harness);
    await expect(handlers.sweep({ task: 'eni-garbage-collection' }, context)).rejects.toThrow(
      /node record\(s\) cannot be read/,
    );
    expect(await effectsOf(harness)).toEqual(before);
  });
});
