import { type CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type CiliumNodeObject, type K8sEmulator, start } from './index.ts';
import { apiError, CILIUM_NODES, clientsFor, exampleCiliumNode, mergePatch } from './test-helpers.ts';

/** Everything here goes through the real @kubernetes/client-node CustomObjectsApi. */

let emulator: K8sEmulator;
let api: CustomObjectsApi;

beforeEach(async () => {
  emulator = await start();
  ({ api } = clientsFor(emulator));
});

afterEach(async () => {
  await emulator.close();
});

const node = (
  name: string,
  spec: Record<string, unknown> = { 'instance-id': 'i-1' },
  labels?: Record<string, string>,
) => ({
  apiVersion: 'cilium.io/v2',
  kind: 'CiliumNode',
  metadata: { name, ...(labels ? { labels } : {}) },
  spec,
});

const create = (body: unknown): Promise<CiliumNodeObject> =>
  api.createClusterCustomObject({ ...CILIUM_NODES, body });
const get = (name: string): Promise<CiliumNodeObject> =>
  api.getClusterCustomObject({ ...CILIUM_NODES, name });
const replace = (body: CiliumNodeObject): Promise<CiliumNodeObject> =>
  api.replaceClusterCustomObject({ ...CILIUM_NODES, name: body.metadata.name, body });
const replaceStatus = (body: CiliumNodeObject): Promise<CiliumNodeObject> =>
  api.replaceClusterCustomObjectStatus({ ...CILIUM_NODES, name: body.metadata.name, body });
const mergeSpec = (name: string, body: unknown): Promise<CiliumNodeObject> =>
  api.patchClusterCustomObject({ ...CILIUM_NODES, name, body }, mergePatch());
const mergeStatus = (name: string, body: unknown): Promise<CiliumNodeObject> =>
  api.patchClusterCustomObjectStatus({ ...CILIUM_NODES, name, body }, mergePatch());
const jsonPatch = (name: string, body: unknown[]): Promise<CiliumNodeObject> =>
  api.patchClusterCustomObject({ ...CILIUM_NODES, name, body });

describe('create, get, list, delete', () => {
  it('sets uid, creationTimestamp, generation and resourceVersion, and drops status on create', async () => {
    const created = await create(exampleCiliumNode('n1'));
    expect(created.metadata).toEqual({
      name: 'n1',
      uid: expect.stringMatching(/^[0-9a-f-]{36}$/),
      resourceVersion: '1',
      generation: 1,
      creationTimestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
    });
    expect(created.status).toBeUndefined();
    expect(created.spec).toEqual(exampleCiliumNode().spec);
    expect(await get('n1')).toEqual(created);
  });

  it('answers 409 AlreadyExists for a taken name', async () => {
    await create(node('n1'));
    const { code, status } = await apiError(create(node('n1')));
    expect(code).toBe(409);
    expect(status).toMatchObject({
      reason: 'AlreadyExists',
      message: 'ciliumnodes.cilium.io "n1" already exists',
      details: { name: 'n1', group: 'cilium.io', kind: 'ciliumnodes' },
    });
  });

  it('answers 422 for an invalid name and 400 for a resourceVersion on create', async () => {
    expect(await apiError(create(node('Not_A_Name')))).toMatchObject({
      code: 422,
      status: { reason: 'Invalid', details: { causes: [{ field: 'metadata.name' }] } },
    });
    const withVersion = { ...node('n1'), metadata: { name: 'n1', resourceVersion: '5' } };
    expect(await apiError(create(withVersion))).toMatchObject({
      code: 400,
      status: { reason: 'BadRequest' },
    });
  });

  it('lists with the resourceVersion on the List, a label selector, and consistent limit/continue pages', async () => {
    await create(node('a', undefined, { role: 'x' }));
    await create(node('b'));
    await create(node('c'));
    const all = await api.listClusterCustomObject({ ...CILIUM_NODES });
    expect(all).toMatchObject({
      kind: 'CiliumNodeList',
      apiVersion: 'cilium.io/v2',
      metadata: { resourceVersion: '3' },
    });
    expect(all.items.map((o: CiliumNodeObject) => o.metadata.name)).toEqual(['a', 'b', 'c']);

    const selected = await api.listClusterCustomObject({ ...CILIUM_NODES, labelSelector: 'role=x' });
    expect(selected.items.map((o: CiliumNodeObject) => o.metadata.name)).toEqual(['a']);

    const first = await api.listClusterCustomObject({ ...CILIUM_NODES, limit: 2 });
    expect(first.items.map((o: CiliumNodeObject) => o.metadata.name)).toEqual(['a', 'b']);
    expect(first.metadata.remainingItemCount).toBe(1);
    await create(node('bb')); // after the first page: not part of the snapshot the token continues
    const second = await api.listClusterCustomObject({
      ...CILIUM_NODES,
      limit: 2,
      _continue: first.metadata.continue,
    });
    expect(second.items.map((o: CiliumNodeObject) => o.metadata.name)).toEqual(['c']);
    expect(second.metadata).toEqual({ resourceVersion: '3' });
  });

  it('deletes with a Success Status, then answers 404 NotFound', async () => {
    const created = await create(node('n1'));
    const answer = await api.deleteClusterCustomObject({ ...CILIUM_NODES, name: 'n1' });
    expect(answer).toMatchObject({
      kind: 'Status',
      status: 'Success',
      details: { name: 'n1', group: 'cilium.io', kind: 'ciliumnodes', uid: created.metadata.uid },
    });
    const { code, status } = await apiError(get('n1'));
    expect(code).toBe(404);
    expect(status).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: 'ciliumnodes.cilium.io "n1" not found',
      reason: 'NotFound',
      details: { name: 'n1', group: 'cilium.io', kind: 'ciliumnodes' },
      code: 404,
    });
    expect(emulator.history('n1').map((e) => [e.type, e.resourceVersion])).toEqual([
      ['ADDED', '1'],
      ['DELETED', '2'],
    ]);
  });

  it('keeps an object with finalizers until the last one is removed', async () => {
    await create({ ...node('n1'), metadata: { name: 'n1', finalizers: ['example.com/hold'] } });
    const pending = await api.deleteClusterCustomObject({ ...CILIUM_NODES, name: 'n1' });
    expect(pending.metadata.deletionTimestamp).toEqual(expect.any(String));
    expect((await get('n1')).metadata.deletionTimestamp).toBe(pending.metadata.deletionTimestamp);
    await mergeSpec('n1', { metadata: { finalizers: null } });
    expect((await apiError(get('n1'))).code).toBe(404);
  });
});

describe('patch', () => {
  it('merge patch merges maps, deletes on null, replaces lists, and bumps generation for spec', async () => {
    await create(node('n1', { 'instance-id': 'i-1', ipam: { pool: { '10.0.0.1': { resource: 'eni-1' } } } }));
    await mergeSpec('n1', { spec: { eni: { 'subnet-ids': ['subnet-a', 'subnet-b'] } } });
    const patched = await mergeSpec('n1', {
      spec: {
        ipam: { pool: { '10.0.0.1': null, '10.0.0.2': { resource: 'eni-1' } } },
        eni: { 'subnet-ids': ['subnet-c'] },
      },
    });
    expect(patched.spec).toEqual({
      'instance-id': 'i-1',
      ipam: { pool: { '10.0.0.2': { resource: 'eni-1' } } },
      eni: { 'subnet-ids': ['subnet-c'] },
    });
    expect(patched.metadata).toMatchObject({ generation: 3, resourceVersion: '3' });
    expect(
      emulator.requests.count({ verb: 'patch', subresource: 'main', contentType: PatchStrategy.MergePatch }),
    ).toBe(2);
  });

  it('JSON patch applies escaped pointers and honours a passing test on resourceVersion', async () => {
    const created = await create(node('n1'));
    const patched = await jsonPatch('n1', [
      { op: 'test', path: '/metadata/resourceVersion', value: created.metadata.resourceVersion },
      { op: 'add', path: '/metadata/annotations', value: {} },
      { op: 'add', path: '/metadata/annotations/cilium.io~1owner', value: 'eni-ipam' },
      { op: 'add', path: '/spec/ipam', value: { 'pre-allocate': 4 } },
    ]);
    expect(patched.metadata.annotations).toEqual({ 'cilium.io/owner': 'eni-ipam' });
    expect(patched.spec?.ipam).toEqual({ 'pre-allocate': 4 });
    expect(emulator.requests.all({ verb: 'patch' })[0]?.contentType).toBe('application/json-patch+json');
  });

  it('a failed JSON patch test answers 422 and changes nothing', async () => {
    await create(node('n1'));
    await mergeSpec('n1', { spec: { ipam: { 'pre-allocate': 2 } } });
    const before = emulator.history();
    const { code, status } = await apiError(
      jsonPatch('n1', [
        { op: 'replace', path: '/spec/instance-id', value: 'i-2' },
        { op: 'test', path: '/metadata/resourceVersion', value: '1' },
      ]),
    );
    expect(code).toBe(422);
    expect(status).toMatchObject({
      reason: 'Invalid',
      message: 'the server rejected our request due to an error in our request',
      // kube-apiserver v1.36.3 names no cause (the differential suite checks it against the real one).
      details: {},
    });
    expect(emulator.history()).toEqual(before);
    expect((await get('n1')).spec?.['instance-id']).toBe('i-1');
  });

  it.each([
    { case: 'strategic merge patch', contentType: PatchStrategy.StrategicMergePatch },
    { case: 'server-side apply (not emulated)', contentType: PatchStrategy.ServerSideApply },
  ])('answers 415 UnsupportedMediaType for $case', async ({ contentType }) => {
    await create(node('n1'));
    const call = api.patchClusterCustomObject(
      { ...CILIUM_NODES, name: 'n1', body: { spec: { 'instance-id': 'i-2' } }, fieldManager: 'test' },
      setHeaderOptions('Content-Type', contentType),
    );
    expect(await apiError(call)).toMatchObject({ code: 415, status: { reason: 'UnsupportedMediaType' } });
    expect(emulator.history()).toHaveLength(1);
  });

  it('answers 404 for a patch of a missing object', async () => {
    expect(await apiError(mergeSpec('missing', { spec: {} }))).toMatchObject({
      code: 404,
      status: { reason: 'NotFound' },
    });
    expect(await apiError(mergeStatus('missing', { status: {} }))).toMatchObject({ code: 404 });
  });
});

describe('the status subresource', () => {
  it('a status write changes only status: not spec, labels or generation', async () => {
    await create(node('n1', { 'instance-id': 'i-1' }, { role: 'x' }));
    const written = await replaceStatus({
      ...(await get('n1')),
      metadata: { ...(await get('n1')).metadata, labels: { role: 'changed' } },
      spec: { 'instance-id': 'i-other' },
      status: { ipam: { used: { '10.0.0.1': { owner: 'pod', resource: 'eni-1' } } } },
    });
    expect(written.spec).toEqual({ 'instance-id': 'i-1' });
    expect(written.metadata.labels).toEqual({ role: 'x' });
    expect(written.metadata.generation).toBe(1);
    expect(written.status).toEqual({ ipam: { used: { '10.0.0.1': { owner: 'pod', resource: 'eni-1' } } } });

    const patched = await mergeStatus('n1', {
      spec: { 'instance-id': 'i-3' },
      status: { ipam: { used: null } },
    });
    expect(patched).toMatchObject({
      spec: { 'instance-id': 'i-1' },
      status: { ipam: {} },
      metadata: { generation: 1 },
    });
  });

  it('a main write never changes status, and bumps generation only when spec changes', async () => {
    await create(node('n1'));
    await mergeStatus('n1', { status: { ipam: { used: { '10.0.0.1': { owner: 'pod' } } } } });
    const current = await get('n1');
    const labelled = await mergeSpec('n1', { metadata: { labels: { a: 'b' } }, status: { ipam: null } });
    expect(labelled.status).toEqual(current.status);
    expect(labelled.metadata.generation).toBe(1);
    const replaced = await replace({ ...labelled, spec: { 'instance-id': 'i-2' }, status: {} });
    expect(replaced.status).toEqual(current.status);
    expect(replaced.metadata.generation).toBe(2);
    expect(emulator.history('n1').map((e) => [e.verb, e.subresource, e.object.metadata.generation])).toEqual([
      ['create', 'main', 1],
      ['patch', 'status', 1],
      ['patch', 'main', 1],
      ['update', 'main', 2],
    ]);
  });

  it('a write that changes nothing stores no new version', async () => {
    const created = await create(node('n1'));
    const again = await replace(created);
    expect(again.metadata.resourceVersion).toBe(created.metadata.resourceVersion);
    expect(emulator.history()).toHaveLength(1);
  });
});

describe('optimistic concurrency', () => {
  it('a PUT with a stale resourceVersion answers 409 Conflict', async () => {
    const stale = await create(node('n1'));
    await mergeSpec('n1', { spec: { 'instance-id': 'i-2' } });
    const { code, status } = await apiError(replace({ ...stale, spec: { 'instance-id': 'i-3' } }));
    expect(code).toBe(409);
    expect(status).toEqual({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message:
        'Operation cannot be fulfilled on ciliumnodes.cilium.io "n1": the object has been modified; please apply your changes to the latest version and try again',
      reason: 'Conflict',
      details: { name: 'n1', group: 'cilium.io', kind: 'ciliumnodes' },
      code: 409,
    });
    expect((await get('n1')).spec).toEqual({ 'instance-id': 'i-2' });
  });

  it('a status PUT with a stale resourceVersion answers 409 too', async () => {
    const stale = await create(node('n1'));
    await mergeSpec('n1', { spec: { 'instance-id': 'i-2' } });
    expect((await apiError(replaceStatus({ ...stale, status: { ipam: {} } }))).code).toBe(409);
  });

  it('a merge patch carrying metadata.resourceVersion is a precondition', async () => {
    const created = await create(node('n1'));
    const current = created.metadata.resourceVersion;
    await mergeStatus('n1', { metadata: { resourceVersion: current }, status: { ipam: {} } });
    const { code } = await apiError(
      mergeStatus('n1', { metadata: { resourceVersion: current }, status: { ipam: { used: {} } } }),
    );
    expect(code).toBe(409);
  });

  it('a PUT without resourceVersion answers 422 (custom resources allow no unconditional update)', async () => {
    const created = await create(node('n1'));
    const { resourceVersion: _dropped, ...metadata } = created.metadata;
    const { code, status } = await apiError(replace({ ...created, metadata } as CiliumNodeObject));
    expect(code).toBe(422);
    expect(status.details?.causes).toEqual([
      {
        reason: 'FieldValueInvalid',
        field: 'metadata.resourceVersion',
        message: expect.stringContaining('must be specified'),
      },
    ]);
  });
});

describe('the version record', () => {
  it('keeps every version, so a test can check an invariant over all of them', async () => {
    const example = exampleCiliumNode('n1');
    await create({ ...example, spec: { ...example.spec, ipam: { 'pre-allocate': 8 } } });
    await mergeStatus('n1', { status: example.status }); // status first ...
    await mergeSpec('n1', { spec: { ipam: { pool: example.spec.ipam.pool } } }); // ... then spec
    const statusCoversSpec = (object: CiliumNodeObject) => {
      const pool =
        (object.spec?.ipam as { pool?: Record<string, { resource: string }> } | undefined)?.pool ?? {};
      const enis =
        (object.status?.eni as { enis?: Record<string, { addresses?: string[] }> } | undefined)?.enis ?? {};
      return Object.entries(pool).every(([ip, { resource }]) => enis[resource]?.addresses?.includes(ip));
    };
    const versions = emulator.history('n1');
    expect(versions.map((v) => [v.resourceVersion, v.subresource])).toEqual([
      ['1', 'main'],
      ['2', 'status'],
      ['3', 'main'],
    ]);
    expect(versions.every((v) => statusCoversSpec(v.object))).toBe(true);
    versions[0]!.object.metadata.name = 'mutated';
    expect(emulator.history('n1')[0]?.object.metadata.name).toBe('n1');
  });

  it('answers 400 when the body names another object than the URL', async () => {
    const created = await create(node('n1'));
    const call = api.replaceClusterCustomObject({
      ...CILIUM_NODES,
      name: 'n1',
      body: { ...created, metadata: { ...created.metadata, name: 'n2' } },
    });
    expect(await apiError(call)).toMatchObject({
      code: 400,
      status: { message: 'the name of the object (n2) does not match the name on the URL (n1)' },
    });
  });
});

describe('CRD schema validation and pruning', () => {
  it('rejects a spec.ipam.pre-allocate string with 422 naming the field, storing nothing', async () => {
    const example = exampleCiliumNode('n1');
    const bad = {
      ...example,
      spec: { ...example.spec, ipam: { ...example.spec.ipam, 'pre-allocate': 'eight' } },
    };
    const { code, status } = await apiError(create(bad));
    expect(code).toBe(422);
    expect(status).toMatchObject({
      reason: 'Invalid',
      message:
        'CiliumNode.cilium.io "n1" is invalid: spec.ipam.pre-allocate: Invalid value: "string": spec.ipam.pre-allocate in body must be of type integer: "string"',
      details: {
        name: 'n1',
        group: 'cilium.io',
        kind: 'CiliumNode',
        causes: [{ field: 'spec.ipam.pre-allocate' }],
      },
    });
    expect(emulator.history()).toEqual([]);
  });

  it('rejects a status.ipam.release-ips state outside the enum, leaving the object as it was', async () => {
    await create(node('n1'));
    const before = await get('n1');
    const { code, status } = await apiError(
      mergeStatus('n1', { status: { ipam: { 'release-ips': { '10.0.0.1': 'gone' } } } }),
    );
    expect(code).toBe(422);
    expect(status.details?.causes).toEqual([
      {
        reason: 'FieldValueNotSupported',
        field: 'status.ipam.release-ips.10.0.0.1',
        message: expect.stringMatching(/^Unsupported value: "gone": supported values: "marked-for-release"/),
      },
    ]);
    expect(await get('n1')).toEqual(before);
  });

  it('names the CRD generation when only some selected schemas reject', async () => {
    await create(node('n1'));
    const example = exampleCiliumNode('n1');
    example.status.eni.enis['eni-0a'].subnet.cidr = 'not-a-cidr';
    const { status } = await apiError(mergeStatus('n1', { status: example.status }));
    expect(status.details?.causes).toEqual([
      expect.objectContaining({
        field: 'status.eni.enis.eni-0a.subnet.cidr',
        message: expect.stringMatching(
          /must be of type cidr: "not-a-cidr" \(CiliumNode CRD v1\.20, v1\.21-dev\)$/,
        ),
      }),
    ]);
  });

  it('prunes unknown fields with a Warning header, or refuses them with fieldValidation=Strict', async () => {
    const body = {
      ...node('n1'),
      spec: { 'instance-id': 'i-1', bogus: 1, ipam: { 'pre-allocate': 1, extra: true } },
    };
    const answer = await api.createClusterCustomObjectWithHttpInfo({ ...CILIUM_NODES, body });
    expect(answer.data.spec).toEqual({ 'instance-id': 'i-1', ipam: { 'pre-allocate': 1 } });
    expect(answer.headers.warning).toBe(
      '299 - "unknown field \\"spec.bogus\\"", 299 - "unknown field \\"spec.ipam.extra\\""',
    );

    const strict = api.createClusterCustomObject({
      ...CILIUM_NODES,
      body: { ...body, metadata: { name: 'n2' } },
      fieldValidation: 'Strict',
    });
    expect(await apiError(strict)).toMatchObject({
      code: 400,
      status: {
        message: 'strict decoding error: unknown field "spec.bogus", unknown field "spec.ipam.extra"',
      },
    });
  });

  it('stores the minimal CRD-protocol example, spec and status, valid under all three CRD generations', async () => {
    const example = exampleCiliumNode();
    const created = await create(example);
    const written = await replaceStatus({ ...created, status: example.status });
    expect(written.spec).toEqual(example.spec);
    expect(written.status).toEqual(example.status);
    expect(emulator.store.schemas).toEqual(['v1.19-dev', 'v1.12', 'v1.20', 'v1.21-dev']);
  });

  it('prunes with the first selected schema', async () => {
    const v112 = await start({ schemas: ['v1.12'] });
    try {
      const created = await clientsFor(v112).api.createClusterCustomObject({
        ...CILIUM_NODES,
        body: exampleCiliumNode(),
      });
      expect(created.spec.eni).not.toHaveProperty('node-subnet-id');
    } finally {
      await v112.close();
    }
  });
});

describe('fault injection and request counts', () => {
  it('server-error answers 500 and applies nothing; the next request goes through', async () => {
    await create(node('n1'));
    const fault = emulator.faults.inject({
      match: { verb: 'patch', subresource: 'status' },
      kind: 'server-error',
    });
    expect(await apiError(mergeStatus('n1', { status: { ipam: {} } }))).toMatchObject({
      code: 500,
      status: { reason: 'InternalError' },
    });
    expect(emulator.history()).toHaveLength(1);
    await mergeStatus('n1', { status: { ipam: {} } });
    expect(fault).toMatchObject({ hits: 1, remaining: 0 });
    expect(emulator.requests.count({ verb: 'patch', subresource: 'status' })).toBe(2);
    expect(emulator.requests.count({ verb: 'patch', subresource: 'status', statusCode: 500 })).toBe(1);
  });

  it('conflict answers 409 for the chosen object only, `times` times', async () => {
    await create(node('n1'));
    await create(node('n2'));
    emulator.faults.inject({ match: { verb: 'patch', name: 'n1' }, kind: 'conflict', times: 2 });
    await mergeSpec('n2', { spec: { 'instance-id': 'i-2' } });
    expect((await apiError(mergeSpec('n1', { spec: { 'instance-id': 'i-2' } }))).status.reason).toBe(
      'Conflict',
    );
    expect((await apiError(mergeSpec('n1', { spec: { 'instance-id': 'i-2' } }))).code).toBe(409);
    expect((await mergeSpec('n1', { spec: { 'instance-id': 'i-2' } })).spec).toEqual({
      'instance-id': 'i-2',
    });
    expect(emulator.faults.pending()).toBe(0);
  });

  it('drop-connection fails the call and applies nothing', async () => {
    await create(node('n1'));
    emulator.faults.inject({ match: { verb: 'update', subresource: 'main' }, kind: 'drop-connection' });
    await expect(replace({ ...(await get('n1')), spec: { 'instance-id': 'i-2' } })).rejects.toThrow();
    expect((await get('n1')).spec).toEqual({ 'instance-id': 'i-1' });
    expect(emulator.requests.count({ verb: 'update', statusCode: 'dropped' })).toBe(1);
  });

  it('drop-after-apply fails the call although the write is stored', async () => {
    await create(node('n1'));
    emulator.faults.inject({
      match: { verb: 'patch', subresource: 'main', name: 'n1' },
      kind: 'drop-after-apply',
    });
    await expect(mergeSpec('n1', { spec: { 'instance-id': 'i-2' } })).rejects.toThrow();
    expect((await get('n1')).spec).toEqual({ 'instance-id': 'i-2' });
  });

  it('too-many-requests answers 429 with Retry-After', async () => {
    emulator.faults.inject({ match: { verb: 'list' }, kind: 'too-many-requests' });
    expect(await apiError(api.listClusterCustomObject({ ...CILIUM_NODES }))).toMatchObject({
      code: 429,
      status: { reason: 'TooManyRequests', details: { retryAfterSeconds: 1 } },
    });
  });
});

describe('seeding, listeners and access', () => {
  it('store.put seeds spec and status directly; onWrite sees every version', async () => {
    const seen: string[] = [];
    emulator.store.onWrite((entry) => seen.push(`${entry.verb}:${entry.type}:${entry.resourceVersion}`));
    emulator.store.put(exampleCiliumNode('n1'));
    expect((await get('n1')).status).toEqual(exampleCiliumNode().status);
    await mergeSpec('n1', { spec: { ipam: { 'pre-allocate': 2 } } });
    expect(seen).toEqual(['seed:ADDED:1', 'patch:MODIFIED:2']);
    expect(emulator.store.get('n1')?.metadata.generation).toBe(2);
    expect(() => emulator.store.put({ ...node('n2'), spec: { nope: 1 } })).toThrow(
      'unknown field "spec.nope"',
    );
  });

  it('with requireToken, a request without that bearer token answers 401', async () => {
    const guarded = await start({ requireToken: 'secret' });
    try {
      expect((await clientsFor(guarded).api.listClusterCustomObject({ ...CILIUM_NODES })).items).toEqual([]);
      const response = await fetch(`${guarded.url}/apis/cilium.io/v2/ciliumnodes`, {
        headers: { Authorization: 'Bearer wrong' },
      });
      expect(response.status).toBe(401);
      expect(await response.json()).toMatchObject({ kind: 'Status', reason: 'Unauthorized', code: 401 });
    } finally {
      await guarded.close();
    }
  });

  it('serves minimal discovery', async () => {
    const resources = (await (await fetch(`${emulator.url}/apis/cilium.io/v2`)).json()) as {
      resources: { name: string }[];
    };
    expect(resources.resources.map((r) => r.name)).toEqual(['ciliumnodes', 'ciliumnodes/status']);
    expect((await fetch(`${emulator.url}/version`)).status).toBe(200);
    expect((await fetch(`${emulator.url}/apis/cilium.io/v2/namespaces/x/ciliumnodes`)).status).toBe(404);
  });
});
