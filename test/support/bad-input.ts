import { ScanCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import type { AllocationHarness } from './allocation-harness.ts';

/**
 * Malformed and hostile payloads for every entry point, and the evidence that one was refused
 * without effect: the whole node table, the EC2 stand-in's mutating calls, the Kubernetes stand-in's
 * writes, before and after.
 */

/** The entry points a battery case is given to. */
type EntryPoint = 'allocate' | 'sync' | 'sweep' | 'watch';

/**
 * How an entry point must answer: `rejected` (an EventBridge event: answered, never thrown),
 * `throws` (a direct invoke: `InvalidInputError`), or a stream batch whose records are skipped.
 */
type Answer = 'rejected' | 'throws' | 'skipped-records';

export interface BadInputCase {
  readonly case: string;
  readonly entry: EntryPoint;
  /** Built afresh per run: some payloads are large, and hostile ones come from `JSON.parse`. */
  readonly payload: () => unknown;
  readonly answer: Answer;
  /** The offending field, as the reason must name it (loosely: wording may change). */
  readonly names: RegExp;
}

export const INSTANCE_ID = 'i-0123456789abcdef0';
const ONE_MEGABYTE = 1_048_576;

export function stateChange(instanceId: unknown, state: unknown = 'running'): Record<string, unknown> {
  return {
    version: '0',
    id: 'e1',
    'detail-type': 'EC2 Instance State-change Notification',
    source: 'aws.ec2',
    account: '123456789012',
    time: '2026-01-01T00:00:00Z',
    region: 'us-east-1',
    resources: [],
    detail: { 'instance-id': instanceId, state },
  };
}

/** `{a:{a:{…}}}` `depth` levels deep, ending in `leaf`. */
export function nested(depth: number, leaf: unknown = {}): unknown {
  let value = leaf;
  for (let level = 0; level < depth; level++) value = { a: value };
  return value;
}

/** One serve-nodes entry of the watcher's request. */
export function servedNode(instanceId: string): Record<string, unknown> {
  return { instanceId, allocate: true, release: false };
}

/** A DynamoDB stream record of the node table, as the event-source mapping delivers it. */
export function streamRecord(
  tableName: string,
  fields: { eventName?: string; keys?: unknown; sequenceNumber?: string } = {},
): Record<string, unknown> {
  return {
    eventID: `event-${fields.sequenceNumber ?? '1'}`,
    eventName: fields.eventName ?? 'MODIFY',
    eventVersion: '1.1',
    eventSource: 'aws:dynamodb',
    awsRegion: 'us-east-1',
    eventSourceARN: `arn:aws:dynamodb:us-east-1:123456789012:table/${tableName}/stream/2024-01-01T00:00:00.000`,
    dynamodb: {
      ...(fields.keys === undefined ? {} : { Keys: fields.keys }),
      SequenceNumber: fields.sequenceNumber ?? '1',
      SizeBytes: 100,
      StreamViewType: 'NEW_IMAGE',
    },
  };
}

/** What a refused payload must leave exactly as it was. */
export interface Effects {
  readonly tableItems: string;
  readonly ec2Mutations: number;
  readonly kubernetesWrites: number;
}

export async function effectsOf(harness: AllocationHarness): Promise<Effects> {
  const scanned = await harness.table.client.send(new ScanCommand({ TableName: harness.table.tableName }));
  const items = (scanned.Items ?? []).map((item) => JSON.stringify(item)).sort();
  return {
    tableItems: items.join('\n'),
    ec2Mutations: harness.ec2.calls.mutating(),
    kubernetesWrites: (await harness.k8s.requests()).filter((request) =>
      ['create', 'patch', 'update', 'delete'].includes(request.verb),
    ).length,
  };
}

/** Puts `item` into the node table as is: no adapter, no validation (a hand edit, another release). */
export async function putRawItem(harness: AllocationHarness, item: Record<string, unknown>): Promise<void> {
  await DynamoDBDocumentClient.from(harness.table.client).send(
    new PutCommand({ TableName: harness.table.tableName, Item: item }),
  );
}

/** The payloads of the sweep and watch functions, and hostile JSON for every function. */
export const TASK_CASES: readonly BadInputCase[] = [
  {
    case: 'sweep: an unknown task',
    entry: 'sweep',
    payload: () => ({ task: 'nope' }),
    answer: 'throws',
    names: /task/,
  },
  {
    case: 'sweep: task as a list',
    entry: 'sweep',
    payload: () => ({ task: ['sweep'] }),
    answer: 'throws',
    names: /task/,
  },
  {
    case: 'sweep: null',
    entry: 'sweep',
    payload: () => null,
    answer: 'throws',
    names: /payload|detail-type|source/,
  },
  {
    case: 'sweep: a scheduled event from another source',
    entry: 'sweep',
    payload: () => ({ 'detail-type': 'Scheduled Event', source: 'aws.ec2' }),
    answer: 'throws',
    names: /source/,
  },
  {
    case: 'sweep: task only on the prototype (__proto__ key)',
    entry: 'sweep',
    payload: () => JSON.parse('{"__proto__":{"task":"sweep","polluted":true}}'),
    answer: 'throws',
    names: /detail-type|source|payload/,
  },
  {
    case: 'watch: another function’s task',
    entry: 'watch',
    payload: () => ({ task: 'sweep' }),
    answer: 'throws',
    names: /task/,
  },
  {
    case: 'watch: a bare string',
    entry: 'watch',
    payload: () => 'watch',
    answer: 'throws',
    names: /payload|detail-type/,
  },
  {
    case: 'watch: constructor.prototype keys',
    entry: 'watch',
    payload: () => JSON.parse('{"task":"watsch","constructor":{"prototype":{"polluted":true}}}'),
    answer: 'throws',
    names: /task/,
  },
];

/** The sync function's direct invokes. */
export const SYNC_CASES: readonly BadInputCase[] = [
  {
    case: 'sync: instanceId a number',
    entry: 'sync',
    payload: () => ({ instanceId: 5 }),
    answer: 'throws',
    names: /instanceId/,
  },
  {
    case: 'sync: all a string',
    entry: 'sync',
    payload: () => ({ all: 'yes' }),
    answer: 'throws',
    names: /all/,
  },
  {
    case: 'sync: all and instanceId together',
    entry: 'sync',
    payload: () => ({ all: true, instanceId: INSTANCE_ID }),
    answer: 'throws',
    names: /all|instanceId/,
  },
  { case: 'sync: an empty object', entry: 'sync', payload: () => ({}), answer: 'throws', names: /all/ },
  {
    case: 'sync: an unknown key beside instanceId',
    entry: 'sync',
    payload: () => ({ instanceId: INSTANCE_ID, force: true }),
    answer: 'throws',
    names: /force/,
  },
  {
    case: 'sync: a 1 MB instanceId',
    entry: 'sync',
    payload: () => ({ instanceId: `i-${'0'.repeat(ONE_MEGABYTE)}` }),
    answer: 'throws',
    names: /instanceId/,
  },
  {
    case: 'sync: all only on the prototype (__proto__ key)',
    entry: 'sync',
    payload: () => JSON.parse('{"__proto__":{"all":true,"polluted":true}}'),
    answer: 'throws',
    names: /all/,
  },
  {
    case: 'sync: Records not a list',
    entry: 'sync',
    payload: () => ({ Records: 'x' }),
    answer: 'throws',
    names: /Records/,
  },
  {
    case: 'sync: an empty Records list',
    entry: 'sync',
    payload: () => ({ Records: [] }),
    answer: 'throws',
    names: /Records/,
  },
  {
    case: 'sync: a record from no DynamoDB stream',
    entry: 'sync',
    payload: () => ({ Records: [{ eventSourceARN: 'arn:aws:sqs:us-east-1:123456789012:queue' }] }),
    answer: 'throws',
    names: /eventSourceARN/,
  },
];
