import type { CustomObjectsApi, Watch } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type EmulatorOptions, type K8sEmulator, start } from './index.ts';
import { CILIUM_NODES, COLLECTION_PATH, clientsFor, mergePatch } from './test-helpers.ts';

/** Watches through the real @kubernetes/client-node `Watch`. */

interface Received {
  type: string;
  name: string | undefined;
  resourceVersion: string;
  object: {
    metadata: { name?: string; resourceVersion: string };
    spec?: unknown;
    status?: unknown;
    code?: number;
  };
}

let emulator: K8sEmulator;
let api: CustomObjectsApi;
let watch: Watch;
const controllers: AbortController[] = [];

async function open(options: EmulatorOptions = {}) {
  emulator = await start(options);
  ({ api, watch } = clientsFor(emulator));
}

beforeEach(() => open());

afterEach(async () => {
  for (const controller of controllers.splice(0)) controller.abort();
  await emulator.close();
});

/** Starts a watch and returns what it receives and how it ended. */
async function watchCollection(query: Record<string, string | boolean>) {
  const events: Received[] = [];
  const ended: { error: unknown }[] = [];
  const controller = await watch.watch(
    COLLECTION_PATH,
    query,
    (type, object) =>
      events.push({
        type,
        name: object.metadata?.name,
        resourceVersion: object.metadata?.resourceVersion,
        object,
      }),
    (error) => ended.push({ error }),
  );
  controllers.push(controller);
  return { events, ended };
}

const node = (name: string) => ({
  apiVersion: 'cilium.io/v2',
  kind: 'CiliumNode',
  metadata: { name },
  spec: { 'instance-id': 'i-1' },
});
const create = (name: string) => api.createClusterCustomObject({ ...CILIUM_NODES, body: node(name) });
const mergeSpec = (name: string, body: unknown) =>
  api.patchClusterCustomObject({ ...CILIUM_NODES, name, body }, mergePatch());
const mergeStatus = (name: string, body: unknown) =>
  api.patchClusterCustomObjectStatus({ ...CILIUM_NODES, name, body }, mergePatch());
const summary = (events: Received[]) =>
  events.map((e) => `${e.type} ${e.name ?? ''} ${e.resourceVersion}`.trim());

describe('watch', () => {
  it('delivers every version after the given resourceVersion in order, then live events', async () => {
    await create('n1'); // rv 1
    await mergeStatus('n1', { status: { ipam: { used: {} } } }); // rv 2
    await mergeSpec('n1', { spec: { ipam: { 'pre-allocate': 1 } } }); // rv 3
    await mergeSpec('n1', { spec: { ipam: { 'pre-allocate': 2 } } }); // rv 4
    const { events } = await watchCollection({ resourceVersion: '1', allowWatchBookmarks: true });
    await vi.waitFor(() => expect(events).toHaveLength(3));
    expect(summary(events)).toEqual(['MODIFIED n1 2', 'MODIFIED n1 3', 'MODIFIED n1 4']);
    expect(events.map((e) => e.object.spec)).toEqual([
      { 'instance-id': 'i-1' },
      { 'instance-id': 'i-1', ipam: { 'pre-allocate': 1 } },
      { 'instance-id': 'i-1', ipam: { 'pre-allocate': 2 } },
    ]);

    await create('n2');
    await api.deleteClusterCustomObject({ ...CILIUM_NODES, name: 'n1' });
    await vi.waitFor(() => expect(events).toHaveLength(5));
    expect(summary(events).slice(3)).toEqual(['ADDED n2 5', 'DELETED n1 6']);
  });

  it('without a resourceVersion starts with ADDED for the current objects', async () => {
    await create('b');
    await create('a');
    const { events } = await watchCollection({});
    await vi.waitFor(() => expect(emulator.openWatches()).toBe(1));
    await mergeSpec('a', { spec: { 'instance-id': 'i-9' } });
    await vi.waitFor(() => expect(events).toHaveLength(3));
    expect(summary(events)).toEqual(['ADDED a 2', 'ADDED b 1', 'MODIFIED a 3']);
  });

  it('filters by fieldSelector metadata.name', async () => {
    await create('n1');
    await create('n2');
    const { events } = await watchCollection({ resourceVersion: '0', fieldSelector: 'metadata.name=n2' });
    await vi.waitFor(() => expect(emulator.openWatches()).toBe(1));
    await mergeSpec('n1', { spec: { 'instance-id': 'i-3' } });
    await mergeSpec('n2', { spec: { 'instance-id': 'i-3' } });
    await vi.waitFor(() => expect(events).toHaveLength(2));
    expect(summary(events)).toEqual(['ADDED n2 2', 'MODIFIED n2 4']);
  });

  it('turns leaving a label selector into DELETED and entering it into ADDED', async () => {
    await create('n1');
    const { events } = await watchCollection({ resourceVersion: '1', labelSelector: 'pool=blue' });
    await mergeSpec('n1', { metadata: { labels: { pool: 'blue' } } });
    await mergeSpec('n1', { metadata: { labels: { pool: 'green' } } });
    await vi.waitFor(() => expect(events).toHaveLength(2));
    expect(summary(events)).toEqual(['ADDED n1 2', 'DELETED n1 3']);
  });

  it('answers a resourceVersion older than the history window with an ERROR event (410 Expired)', async () => {
    await emulator.close();
    await open({ historyWindow: 2 });
    await create('n1'); // rv 1
    for (const id of ['i-2', 'i-3', 'i-4']) await mergeSpec('n1', { spec: { 'instance-id': id } }); // rv 2..4
    const inWindow = await watchCollection({ resourceVersion: '2' });
    const tooOld = await watchCollection({ resourceVersion: '1' });
    await vi.waitFor(() => expect(tooOld.ended).toHaveLength(1));
    expect(tooOld.events).toEqual([
      expect.objectContaining({
        type: 'ERROR',
        object: expect.objectContaining({
          kind: 'Status',
          status: 'Failure',
          reason: 'Expired',
          code: 410,
          message: 'too old resource version: 1 (2)',
        }),
      }),
    ]);
    expect(tooOld.ended).toEqual([{ error: null }]);
    await vi.waitFor(() => expect(summary(inWindow.events)).toEqual(['MODIFIED n1 3', 'MODIFIED n1 4']));
  });

  it('answers 410 after compaction, as after etcd compaction', async () => {
    await create('n1');
    await mergeSpec('n1', { spec: { 'instance-id': 'i-2' } });
    emulator.store.compact();
    const { events } = await watchCollection({ resourceVersion: '1' });
    await vi.waitFor(() => expect(events.map((e) => [e.type, e.object.code])).toEqual([['ERROR', 410]]));
  });

  it('sends BOOKMARK events only to watches that allow them', async () => {
    await create('n1');
    const withBookmarks = await watchCollection({ resourceVersion: '1', allowWatchBookmarks: true });
    const without = await watchCollection({ resourceVersion: '1' });
    await vi.waitFor(() => expect(emulator.openWatches()).toBe(2));
    expect(emulator.sendBookmarks()).toBe(1);
    await vi.waitFor(() => expect(withBookmarks.events).toHaveLength(1));
    expect(withBookmarks.events[0]).toMatchObject({ type: 'BOOKMARK', resourceVersion: '1' });
    await mergeSpec('n1', { spec: { 'instance-id': 'i-2' } });
    await vi.waitFor(() => expect(summary(without.events)).toEqual(['MODIFIED n1 2']));
  });

  it('ends open watches on close (the client sees done without an error)', async () => {
    const { ended } = await watchCollection({});
    await vi.waitFor(() => expect(emulator.openWatches()).toBe(1));
    await emulator.close();
    await vi.waitFor(() => expect(ended).toEqual([{ error: null }]));
    await open();
  });

  it('dropWatches cuts every open stream', async () => {
    const first = await watchCollection({});
    const second = await watchCollection({});
    await vi.waitFor(() => expect(emulator.openWatches()).toBe(2));
    expect(emulator.faults.dropWatches()).toBe(2);
    await vi.waitFor(() => expect([first.ended.length, second.ended.length]).toEqual([1, 1]));
    await vi.waitFor(() => expect(emulator.openWatches()).toBe(0));
  });

  it('drop-after-apply on a watch delivers the replay, then cuts the connection', async () => {
    await create('n1');
    await mergeSpec('n1', { spec: { 'instance-id': 'i-2' } });
    emulator.faults.inject({ match: { verb: 'watch' }, kind: 'drop-after-apply' });
    const { events, ended } = await watchCollection({ resourceVersion: '1' });
    await vi.waitFor(() => expect(ended).toHaveLength(1));
    expect(summary(events)).toEqual(['MODIFIED n1 2']);
    expect(emulator.requests.count({ verb: 'watch', statusCode: 'dropped' })).toBe(1);
  });
});
