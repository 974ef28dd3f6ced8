import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FUNCTION_KUBERNETES_GROUPS, type IpamFunctionId } from '../../../infra/kubernetes-access.ts';
import { exampleCiliumNode } from '../../emulators/k8s/test-helpers.ts';
import { type KubernetesUnderTest, startKubernetes } from '../../support/kubernetes.ts';
import {
  type Backend,
  backendOf,
  CILIUMNODES,
  differences,
  errorShape,
  type Observation,
  strictlyIncreasing,
  warningsOf,
  watchEvents,
} from './differential.ts';
import type { HttpsJsonResponse } from './https-json.ts';

/**
 * The differential suite: the same requests, sent to kube-apiserver v1.36.3 (with etcd) and to the
 * emulator (test/emulators/k8s), must get the same answers in everything the functions depend on:
 * status codes, `reason`, the causes' fields, the content of an object after a write, the
 * annotations the sync writes, resourceVersions present and strictly increasing, watch events in
 * order. Each case builds one observation per backend and asserts that they differ in exactly the
 * keys `ACCEPTED_DIFFERENCES` lists for it (so a new difference fails, and so does a fixed one whose
 * entry was left behind), and pins the real server's answer so no case can pass vacuously.
 */

const RECORD_VERSION = 'serverless-eni-ipam.io/record-version';
const IGNORE = 'ipam.cilium.io/ignore';

/**
 * Differences between the two that do not matter to the functions, by case and observation key,
 * with the reason. Nothing else may differ.
 */
const ACCEPTED_DIFFERENCES: Readonly<Record<string, Readonly<Record<string, string>>>> = {};

let kubernetes: KubernetesUnderTest[] = [];
let real: Backend;
let emulator: Backend;

beforeAll(async () => {
  const started = await Promise.allSettled([
    startKubernetes({ backend: 'kube-apiserver' }),
    startKubernetes({ backend: 'emulator' }),
  ]);
  kubernetes = started.flatMap((result) => (result.status === 'fulfilled' ? [result.value] : []));
  const failed = started.find((result) => result.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
  const [realServer, emulatorServer] = kubernetes;
  if (realServer === undefined || emulatorServer === undefined) throw new Error('both backends start');
  real = backendOf(realServer);
  emulator = backendOf(emulatorServer);
});

afterAll(async () => {
  await Promise.all(kubernetes.map((server) => server.close()));
});

const checkedCases = new Set<string>();

/**
 * Runs `observe` against each backend (the real server first, then the emulator, never
 * interleaved) and asserts they differ in exactly the accepted keys; returns the real server's
 * observation for the case's own expectations.
 */
async function compare(caseName: string, observe: (backend: Backend) => Promise<Observation>) {
  checkedCases.add(caseName);
  const realObservation = await observe(real);
  const emulatorObservation = await observe(emulator);
  const found = differences(realObservation, emulatorObservation);
  const accepted = ACCEPTED_DIFFERENCES[caseName] ?? {};
  expect({ case: caseName, differences: found }).toEqual({
    case: caseName,
    differences: Object.fromEntries(Object.keys(accepted).map((key) => [key, found[key] ?? 'no difference'])),
  });
  return realObservation;
}

let sequence = 0;
/** A fresh object name per case (the same on both backends). */
const uniqueName = (caseName: string) => `differential-${caseName}-${++sequence}`;
const objectPath = (name: string, subresource = '') =>
  `${CILIUMNODES}/${encodeURIComponent(name)}${subresource}`;

interface NodeBody {
  metadata: { name: string; resourceVersion?: string; annotations?: Record<string, string> };
  spec?: { ipam?: Record<string, unknown>; [field: string]: unknown };
  status?: { ipam?: Record<string, unknown>; [field: string]: unknown };
}

const bodyOf = (response: HttpsJsonResponse) => response.body as NodeBody;

/** Creates the example node (status dropped by the server) and stores its status; returns the last version. */
async function seed(backend: Backend, name: string): Promise<NodeBody> {
  const example = exampleCiliumNode(name);
  const created = await backend.admin.request('POST', CILIUMNODES, example);
  if (created.status !== 201)
    throw new Error(`seed ${name}: ${created.status} ${JSON.stringify(created.body)}`);
  const withStatus = await backend.admin.request('PUT', objectPath(name, '/status'), {
    ...bodyOf(created),
    status: example.status,
  });
  if (withStatus.status !== 200) throw new Error(`seed status ${name}: ${withStatus.status}`);
  return bodyOf(withStatus);
}

const resourceVersionTest = (resourceVersion: string | undefined) => ({
  op: 'test',
  path: '/metadata/resourceVersion',
  value: resourceVersion,
});
const JSON_PATCH = 'application/json-patch+json';
const MERGE_PATCH = 'application/merge-patch+json';
const SELF_SUBJECT_ACCESS_REVIEWS = '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews';
const SELF_SUBJECT_REVIEWS = '/apis/authentication.k8s.io/v1/selfsubjectreviews';
const SELF_SUBJECT_REVIEW = { kind: 'SelfSubjectReview', apiVersion: 'authentication.k8s.io/v1' };

describe('the emulator answers as kube-apiserver does', () => {
  it('get: the object, its resourceVersion, spec and status', async () => {
    const observed = await compare('get', async (backend) => {
      const name = uniqueName('get');
      await seed(backend, name);
      const response = await backend.as('Allocate').request('GET', objectPath(name));
      const body = bodyOf(response);
      return {
        status: response.status,
        kind: (response.body as { kind?: string }).kind,
        hasResourceVersion: typeof body.metadata.resourceVersion === 'string',
        spec: body.spec,
        status_: body.status,
      };
    });
    expect(observed).toMatchObject({ status: 200, kind: 'CiliumNode', hasResourceVersion: true });
  });

  it('list: limit and continue page through the objects of a label, in name order', async () => {
    const observed = await compare('list', async (backend) => {
      const label = uniqueName('list');
      const names = ['c', 'a', 'b'].map((suffix) => `${label}-${suffix}`);
      for (const name of names) {
        const example = exampleCiliumNode(name);
        await backend.admin.request('POST', CILIUMNODES, {
          ...example,
          metadata: { name, labels: { 'differential-case': label } },
        });
      }
      const client = backend.as('Sync');
      const query = `labelSelector=${encodeURIComponent(`differential-case=${label}`)}`;
      const first = await client.request('GET', `${CILIUMNODES}?${query}&limit=2`);
      const firstMeta = (first.body as { metadata: { continue?: string; resourceVersion?: string } })
        .metadata;
      const itemNames = (response: HttpsJsonResponse) =>
        (response.body as { items: NodeBody[] }).items.map((item) => item.metadata.name);
      const second = await client.request(
        'GET',
        `${CILIUMNODES}?${query}&limit=2&continue=${encodeURIComponent(firstMeta.continue ?? '')}`,
      );
      const secondMeta = (second.body as { metadata: Record<string, unknown> }).metadata;
      const whole = await backend.as('Watch').request('GET', `${CILIUMNODES}?${query}`);
      // Without a label selector (as the sweep lists), a page also counts what remains.
      const unselected = await client.request('GET', `${CILIUMNODES}?limit=1`);
      const unselectedMeta = (unselected.body as { metadata: Record<string, unknown> }).metadata;
      return {
        firstStatus: first.status,
        firstNames: itemNames(first).map((name) => name.slice(label.length)),
        firstHasContinue: typeof firstMeta.continue === 'string' && firstMeta.continue !== '',
        firstHasResourceVersion: typeof firstMeta.resourceVersion === 'string',
        secondStatus: second.status,
        secondNames: itemNames(second).map((name) => name.slice(label.length)),
        secondHasContinue: secondMeta.continue !== undefined && secondMeta.continue !== '',
        wholeStatus: whole.status,
        wholeNames: itemNames(whole).map((name) => name.slice(label.length)),
        itemsHaveResourceVersions: (whole.body as { items: NodeBody[] }).items.every(
          (item) => typeof item.metadata.resourceVersion === 'string',
        ),
        firstCountsRemaining: 'remainingItemCount' in firstMeta,
        unselectedCountsRemaining: typeof unselectedMeta.remainingItemCount === 'number',
      };
    });
    expect(observed).toMatchObject({
      firstStatus: 200,
      firstNames: ['-a', '-b'],
      firstHasContinue: true,
      secondNames: ['-c'],
      secondHasContinue: false,
      wholeNames: ['-a', '-b', '-c'],
      itemsHaveResourceVersions: true,
      firstCountsRemaining: false,
      unselectedCountsRemaining: true,
    });
  });

  it('watch from a resourceVersion: every later version in order, ADDED then MODIFIED', async () => {
    const observed = await compare('watch', async (backend) => {
      const name = uniqueName('watch');
      const list = await backend.as('Watch').request('GET', CILIUMNODES);
      const from = (list.body as { metadata: { resourceVersion: string } }).metadata.resourceVersion;
      const watch = await watchEvents(
        backend.as('Watch'),
        `${CILIUMNODES}?watch=true&resourceVersion=${from}&fieldSelector=${encodeURIComponent(`metadata.name=${name}`)}`,
        3,
      );
      try {
        const created = bodyOf(await backend.admin.request('POST', CILIUMNODES, exampleCiliumNode(name)));
        const patch = (value: number, resourceVersion: string | undefined) =>
          backend
            .as('Sync')
            .request(
              'PATCH',
              objectPath(name),
              [
                resourceVersionTest(resourceVersion),
                { op: 'replace', path: '/spec/ipam/pre-allocate', value },
              ],
              JSON_PATCH,
            );
        const patched = bodyOf(await patch(9, created.metadata.resourceVersion));
        await patch(10, patched.metadata.resourceVersion);
        const events = await watch.events;
        return {
          types: events.map((event) => event.type),
          preAllocate: events.map((event) => event.object.spec?.ipam?.['pre-allocate']),
          increasing: strictlyIncreasing(events.map((event) => event.object.metadata.resourceVersion)),
        };
      } finally {
        watch.close();
      }
    });
    expect(observed).toEqual({
      types: ['ADDED', 'MODIFIED', 'MODIFIED'],
      preAllocate: [8, 9, 10],
      increasing: true,
    });
  });

  it('create: 201, status dropped (the status subresource), the annotations kept', async () => {
    const observed = await compare('create', async (backend) => {
      const name = uniqueName('create');
      const example = exampleCiliumNode(name);
      const annotations = { [RECORD_VERSION]: '7', [IGNORE]: 'true' };
      const response = await backend
        .as('Sync')
        .request('POST', CILIUMNODES, { ...example, metadata: { name, annotations } });
      const stored = bodyOf(await backend.admin.request('GET', objectPath(name)));
      return {
        status: response.status,
        hasResourceVersion: typeof bodyOf(response).metadata.resourceVersion === 'string',
        responseHasStatus: bodyOf(response).status !== undefined,
        storedHasStatus: stored.status !== undefined,
        spec: stored.spec,
        annotations: stored.metadata.annotations,
      };
    });
    expect(observed).toMatchObject({
      status: 201,
      hasResourceVersion: true,
      responseHasStatus: false,
      storedHasStatus: false,
      annotations: { [RECORD_VERSION]: '7', [IGNORE]: 'true' },
    });
  });

  it('create of a name that exists: 409 AlreadyExists', async () => {
    const observed = await compare('already-exists', async (backend) => {
      const name = uniqueName('exists');
      await seed(backend, name);
      return errorShape(await backend.as('Sync').request('POST', CILIUMNODES, exampleCiliumNode(name)));
    });
    expect(observed).toMatchObject({ status: 409, reason: 'AlreadyExists' });
  });

  it.each([
    { case: 'json-patch-main', subresource: '', path: '/spec/ipam/pre-allocate', value: 12 },
    {
      case: 'json-patch-status',
      subresource: '/status',
      path: '/status/ipam/operator-status',
      value: { error: 'x' },
    },
  ])('JSON Patch with a resourceVersion test ($case): applied, and 422 Invalid when stale', async (row) => {
    const observed = await compare(row.case, async (backend) => {
      const name = uniqueName(row.case);
      const seeded = await seed(backend, name);
      const client = backend.as('Sync');
      const operations = [
        resourceVersionTest(seeded.metadata.resourceVersion),
        { op: 'add', path: row.path, value: row.value },
      ];
      const applied = await client.request(
        'PATCH',
        objectPath(name, row.subresource),
        operations,
        JSON_PATCH,
      );
      const stale = await client.request('PATCH', objectPath(name, row.subresource), operations, JSON_PATCH);
      // A path absent at the tested version: the same 422 as a failed test (the adapter relies on it).
      const missingPath = await client.request(
        'PATCH',
        objectPath(name, row.subresource),
        [
          resourceVersionTest(bodyOf(applied).metadata.resourceVersion),
          { op: 'replace', path: `${row.path}/not-there/deeper`, value: 1 },
        ],
        JSON_PATCH,
      );
      const stored = bodyOf(await backend.admin.request('GET', objectPath(name)));
      return {
        appliedStatus: applied.status,
        increasing: strictlyIncreasing([
          seeded.metadata.resourceVersion,
          bodyOf(applied).metadata.resourceVersion,
        ]),
        spec: stored.spec,
        status_: stored.status,
        ...errorShape(stale, 'stale.'),
        staleDetails: (stale.body as { details?: unknown }).details,
        // Older servers name the failed test in the message; the adapter looks for that text too.
        staleMentionsTest: String((stale.body as { message?: string }).message).includes(
          'testing value /metadata/resourceVersion failed',
        ),
        ...errorShape(missingPath, 'missingPath.'),
        unchangedByStale: stored.metadata.resourceVersion === bodyOf(applied).metadata.resourceVersion,
      };
    });
    expect(observed).toMatchObject({
      appliedStatus: 200,
      increasing: true,
      'stale.status': 422,
      'stale.reason': 'Invalid',
      'stale.hasCauses': false,
      staleDetails: {},
      staleMentionsTest: false,
      'missingPath.status': 422,
      'missingPath.reason': 'Invalid',
      'missingPath.hasCauses': false,
      unchangedByStale: true,
    });
  });

  it('a /status patch leaves the spec as it is, a main-resource patch the status', async () => {
    const observed = await compare('subresource-scope', async (backend) => {
      const name = uniqueName('scope');
      const seeded = await seed(backend, name);
      const client = backend.as('Sync');
      const viaStatus = await client.request(
        'PATCH',
        objectPath(name, '/status'),
        [{ op: 'replace', path: '/spec/ipam/pre-allocate', value: 99 }],
        JSON_PATCH,
      );
      const viaMain = await client.request(
        'PATCH',
        objectPath(name),
        [{ op: 'add', path: '/status/ipam/operator-status', value: { error: 'y' } }],
        JSON_PATCH,
      );
      const stored = bodyOf(await backend.admin.request('GET', objectPath(name)));
      return {
        viaStatus: viaStatus.status,
        viaMain: viaMain.status,
        preAllocate: stored.spec?.ipam?.['pre-allocate'],
        operatorStatus: stored.status?.ipam?.['operator-status'],
        // Neither write changed what it may touch: no new version.
        unchanged: stored.metadata.resourceVersion === seeded.metadata.resourceVersion,
      };
    });
    expect(observed).toEqual({
      viaStatus: 200,
      viaMain: 200,
      preAllocate: 8,
      operatorStatus: undefined,
      unchanged: true,
    });
  });

  it('merge patch: the spec and the sync’s annotations written, other annotations kept', async () => {
    const observed = await compare('merge-patch', async (backend) => {
      const name = uniqueName('merge');
      const seeded = await seed(backend, name);
      await backend.admin.request(
        'PATCH',
        objectPath(name),
        { metadata: { annotations: { [IGNORE]: 'true' } } },
        MERGE_PATCH,
      );
      const response = await backend.as('Sync').request(
        'PATCH',
        objectPath(name),
        {
          metadata: { annotations: { [RECORD_VERSION]: '3' } },
          spec: { ipam: { pool: { '10.0.1.22': { resource: 'eni-0a' } } } },
        },
        MERGE_PATCH,
      );
      const stored = bodyOf(await backend.admin.request('GET', objectPath(name)));
      return {
        status: response.status,
        increasing: strictlyIncreasing([
          seeded.metadata.resourceVersion,
          bodyOf(response).metadata.resourceVersion,
        ]),
        annotations: stored.metadata.annotations,
        pool: stored.spec?.ipam?.pool,
      };
    });
    expect(observed).toMatchObject({
      status: 200,
      increasing: true,
      annotations: { [RECORD_VERSION]: '3', [IGNORE]: 'true' },
    });
  });

  it('JSON Patch of the sync’s annotations (escaped paths) keeps both', async () => {
    const observed = await compare('annotations', async (backend) => {
      const name = uniqueName('annotations');
      const seeded = await seed(backend, name);
      const response = await backend
        .as('Allocate')
        .request(
          'PATCH',
          objectPath(name),
          [
            resourceVersionTest(seeded.metadata.resourceVersion),
            { op: 'add', path: '/metadata/annotations', value: { [IGNORE]: 'true' } },
            { op: 'add', path: '/metadata/annotations/serverless-eni-ipam.io~1record-version', value: '11' },
          ],
          JSON_PATCH,
        );
      const stored = bodyOf(await backend.as('Allocate').request('GET', objectPath(name)));
      return { status: response.status, annotations: stored.metadata.annotations };
    });
    expect(observed).toEqual({ status: 200, annotations: { [IGNORE]: 'true', [RECORD_VERSION]: '11' } });
  });

  it('resourceVersions strictly increase across create, patches, PUT; a no-op write keeps it', async () => {
    const observed = await compare('resource-version-order', async (backend) => {
      const name = uniqueName('order');
      const created = bodyOf(await backend.admin.request('POST', CILIUMNODES, exampleCiliumNode(name)));
      const versions = [created.metadata.resourceVersion];
      const write = async (response: Promise<HttpsJsonResponse>) => {
        const body = bodyOf(await response);
        versions.push(body.metadata.resourceVersion);
        return body;
      };
      const sync = backend.as('Sync');
      await write(
        sync.request(
          'PATCH',
          objectPath(name),
          [{ op: 'replace', path: '/spec/ipam/pre-allocate', value: 4 }],
          JSON_PATCH,
        ),
      );
      await write(
        sync.request('PATCH', objectPath(name, '/status'), { status: { ipam: { used: {} } } }, MERGE_PATCH),
      );
      const last = await write(
        sync.request('PATCH', objectPath(name), { spec: { ipam: { 'pre-allocate': 5 } } }, MERGE_PATCH),
      );
      const put = await write(
        backend.admin.request('PUT', objectPath(name), {
          ...last,
          spec: { ...last.spec, 'instance-id': 'i-0def' },
        }),
      );
      const noOp = await sync.request(
        'PATCH',
        objectPath(name),
        { spec: { ipam: { 'pre-allocate': 5 } } },
        MERGE_PATCH,
      );
      return {
        increasing: strictlyIncreasing(versions),
        noOpStatus: noOp.status,
        noOpKeepsVersion: bodyOf(noOp).metadata.resourceVersion === put.metadata.resourceVersion,
      };
    });
    expect(observed).toEqual({ increasing: true, noOpStatus: 200, noOpKeepsVersion: true });
  });

  it('PUT with a stale resourceVersion: 409 Conflict, nothing written', async () => {
    const observed = await compare('stale-put', async (backend) => {
      const name = uniqueName('stale-put');
      const seeded = await seed(backend, name);
      await backend.admin.request(
        'PATCH',
        objectPath(name),
        { spec: { ipam: { 'pre-allocate': 6 } } },
        MERGE_PATCH,
      );
      const response = await backend.admin.request('PUT', objectPath(name), seeded);
      const stored = bodyOf(await backend.admin.request('GET', objectPath(name)));
      return { ...errorShape(response), preAllocate: stored.spec?.ipam?.['pre-allocate'] };
    });
    expect(observed).toMatchObject({ status: 409, reason: 'Conflict', preAllocate: 6 });
  });

  it('404 NotFound for a missing object (get, JSON Patch, /status patch)', async () => {
    const observed = await compare('not-found', async (backend) => {
      const name = uniqueName('missing');
      const get = await backend.as('Allocate').request('GET', objectPath(name));
      const patch = await backend
        .as('Sync')
        .request('PATCH', objectPath(name), [resourceVersionTest('1')], JSON_PATCH);
      const statusPatch = await backend
        .as('Sync')
        .request('PATCH', objectPath(name, '/status'), [resourceVersionTest('1')], JSON_PATCH);
      return {
        ...errorShape(get, 'get.'),
        ...errorShape(patch, 'patch.'),
        ...errorShape(statusPatch, 'statusPatch.'),
        detailsName: (get.body as { details?: { name?: string } }).details?.name === name,
      };
    });
    expect(observed).toMatchObject({
      'get.status': 404,
      'get.reason': 'NotFound',
      'patch.status': 404,
      'statusPatch.status': 404,
      detailsName: true,
    });
  });

  it('403 Forbidden for every verb a function identity is not granted', async () => {
    const denied = forbiddenRequests();
    expect(denied.length).toBeGreaterThan(10);
    const observed = await compare('forbidden', async (backend) => {
      const name = uniqueName('forbidden');
      await seed(backend, name);
      const answers: Record<string, unknown> = {};
      for (const request of denied) {
        const response = await backend
          .as(request.functionId)
          .request(request.method, request.path(name), request.body(name), request.contentType);
        answers[`${request.functionId} ${request.verb} ${request.resource}`] = [
          response.status,
          (response.body as { reason?: string }).reason,
        ];
      }
      return answers;
    });
    for (const answer of Object.values(observed)) expect(answer).toEqual([403, 'Forbidden']);
  });

  it('401 Unauthorized for a token the server does not know', async () => {
    const observed = await compare('unauthorized', async (backend) => {
      const client = backend.withToken('k8s-aws-v1.not-a-known-token');
      return {
        ...errorShape(await client.request('GET', CILIUMNODES), 'list.'),
        ...errorShape(await client.request('GET', objectPath('anything')), 'get.'),
      };
    });
    expect(observed).toMatchObject({
      'list.status': 401,
      'list.reason': 'Unauthorized',
      'get.status': 401,
    });
  });

  it('422 Invalid naming the field for a schema violation (create, merge patch, /status)', async () => {
    const observed = await compare('schema-violation', async (backend) => {
      const name = uniqueName('invalid');
      const example = exampleCiliumNode(name);
      const create = await backend.as('Sync').request('POST', CILIUMNODES, {
        ...example,
        spec: { ...example.spec, ipam: { ...example.spec.ipam, 'pre-allocate': 'three' } },
      });
      await seed(backend, name);
      const patch = await backend
        .as('Sync')
        .request('PATCH', objectPath(name), { spec: { ipam: { 'pre-allocate': 'three' } } }, MERGE_PATCH);
      const statusPatch = await backend
        .as('Sync')
        .request('PATCH', objectPath(name, '/status'), { status: { ipam: { used: 'none' } } }, MERGE_PATCH);
      return {
        ...errorShape(create, 'create.'),
        ...errorShape(patch, 'patch.'),
        ...errorShape(statusPatch, 'statusPatch.'),
      };
    });
    expect(observed).toMatchObject({
      'create.status': 422,
      'create.reason': 'Invalid',
      'create.causeFields': ['spec.ipam.pre-allocate'],
      'patch.status': 422,
      'patch.causeFields': ['spec.ipam.pre-allocate'],
      'statusPatch.status': 422,
      'statusPatch.causeFields': ['status.ipam.used'],
    });
  });

  it('an unknown field is pruned, with a Warning naming it', async () => {
    const observed = await compare('pruning', async (backend) => {
      const name = uniqueName('prune');
      const example = exampleCiliumNode(name);
      const create = await backend.as('Sync').request('POST', CILIUMNODES, {
        ...example,
        spec: { ...example.spec, 'not-a-field': 1 },
      });
      const patch = await backend
        .as('Sync')
        .request('PATCH', objectPath(name), { spec: { ipam: { 'also-not-a-field': true } } }, MERGE_PATCH);
      const stored = bodyOf(await backend.admin.request('GET', objectPath(name)));
      return {
        createStatus: create.status,
        createWarnings: warningsOf(create),
        patchStatus: patch.status,
        patchWarnings: warningsOf(patch),
        storedHasUnknown:
          'not-a-field' in (stored.spec ?? {}) || 'also-not-a-field' in (stored.spec?.ipam ?? {}),
      };
    });
    expect(observed).toMatchObject({
      createStatus: 201,
      createWarnings: ['unknown field "spec.not-a-field"'],
      patchStatus: 200,
      storedHasUnknown: false,
    });
  });

  it('dryRun: create, update and patch (in the query) and delete (query or DeleteOptions body) answer as done and store nothing', async () => {
    const observed = await compare('dry-run', async (backend) => {
      const name = uniqueName('dry-run');
      const seeded = await seed(backend, name);
      const admin = backend.admin;
      const created = await admin.request(
        'POST',
        `${CILIUMNODES}?dryRun=All`,
        exampleCiliumNode(`${name}-new`),
      );
      const createdThere = (await admin.request('GET', objectPath(`${name}-new`))).status;
      const patched = await admin.request(
        'PATCH',
        `${objectPath(name)}?dryRun=All`,
        { spec: { ipam: { 'pre-allocate': 13 } } },
        MERGE_PATCH,
      );
      const put = await admin.request('PUT', `${objectPath(name)}?dryRun=All`, {
        ...seeded,
        spec: { ...seeded.spec, 'instance-id': 'i-0dry' },
      });
      // What `kubectl delete --dry-run=server` sends: the dryRun in the DeleteOptions body.
      const deletedByBody = await admin.request('DELETE', objectPath(name), {
        kind: 'DeleteOptions',
        apiVersion: 'v1',
        propagationPolicy: 'Background',
        dryRun: ['All'],
      });
      const deletedByQuery = await admin.request('DELETE', `${objectPath(name)}?dryRun=All`);
      const badQuery = await admin.request(
        'POST',
        `${CILIUMNODES}?dryRun=Everything`,
        exampleCiliumNode(`${name}-bad`),
      );
      const badBody = await admin.request('DELETE', objectPath(name), {
        kind: 'DeleteOptions',
        apiVersion: 'v1',
        dryRun: ['Nope'],
      });
      const afterResponse = await admin.request('GET', objectPath(name));
      const after = bodyOf(afterResponse);
      return {
        afterStatus: afterResponse.status,
        createStatus: created.status,
        createKind: (created.body as { kind?: string }).kind,
        createdThere,
        patchStatus: patched.status,
        patchAnswersPatched: bodyOf(patched).spec?.ipam?.['pre-allocate'],
        putStatus: put.status,
        putAnswersPut: bodyOf(put).spec?.['instance-id'],
        deleteByBodyStatus: deletedByBody.status,
        deleteByBodyKind: (deletedByBody.body as { kind?: string }).kind,
        deleteByQueryStatus: deletedByQuery.status,
        ...errorShape(badQuery, 'badQuery.'),
        ...errorShape(badBody, 'badBody.'),
        preAllocate: after.spec?.ipam?.['pre-allocate'],
        instanceId: after.spec?.['instance-id'],
        unchanged: after.metadata?.resourceVersion === seeded.metadata.resourceVersion,
      };
    });
    expect(observed).toMatchObject({
      createdThere: 404,
      patchStatus: 200,
      patchAnswersPatched: 13,
      putStatus: 200,
      putAnswersPut: 'i-0dry',
      deleteByBodyStatus: 200,
      deleteByQueryStatus: 200,
      preAllocate: 8,
      unchanged: true,
    });
  });

  it('impersonation: honoured for the admin as the impersonated identity’s RBAC says, refused to a function identity', async () => {
    const observed = await compare('impersonation', async (backend) => {
      const name = uniqueName('impersonation');
      await seed(backend, name);
      const sync = backend.identityOf('Sync');
      const asSync = { 'Impersonate-User': sync.user, 'Impersonate-Group': [...sync.groups] };
      const admin = backend.admin;
      const statusPatch = await admin.request(
        'PATCH',
        objectPath(name, '/status'),
        { status: { ipam: { 'operator-status': { error: 'z' } } } },
        MERGE_PATCH,
        asSync,
      );
      const deleteAsSync = await admin.request('DELETE', objectPath(name), undefined, undefined, asSync);
      const userOnly = await admin.request('GET', objectPath(name), undefined, undefined, {
        'Impersonate-User': sync.user,
      });
      const whoami = await admin.request(
        'POST',
        SELF_SUBJECT_REVIEWS,
        SELF_SUBJECT_REVIEW,
        undefined,
        asSync,
      );
      const escalation = await backend
        .as('Allocate')
        .request('DELETE', objectPath(name), undefined, undefined, {
          'Impersonate-User': 'kubernetes-admin',
          'Impersonate-Group': 'system:masters',
        });
      const stillThere = (await admin.request('GET', objectPath(name))).status;
      const userInfo = (whoami.body as { status?: { userInfo?: { username?: string; groups?: string[] } } })
        .status?.userInfo;
      return {
        statusPatch: statusPatch.status,
        ...errorShape(deleteAsSync, 'deleteAsSync.'),
        ...errorShape(userOnly, 'userOnly.'),
        whoamiStatus: whoami.status,
        whoamiUser: userInfo?.username === sync.user,
        whoamiGroups: [...(userInfo?.groups ?? [])].sort(),
        ...errorShape(escalation, 'escalation.'),
        escalationMessage: (escalation.body as { message?: string }).message
          ?.replace(/"arn:[^"]+"/, '<user>')
          .replace(name, '<name>'),
        stillThere,
      };
    });
    expect(observed).toMatchObject({
      statusPatch: 200,
      'deleteAsSync.status': 403,
      'userOnly.status': 403,
      whoamiStatus: 201,
      whoamiUser: true,
      'escalation.status': 403,
      'escalation.reason': 'Forbidden',
      stillThere: 200,
    });
  });

  it('SelfSubjectAccessReview answers what RBAC allows each identity (kubectl auth can-i)', async () => {
    const questions = [
      { functionId: 'admin', verb: 'delete', resource: 'ciliumnodes' },
      { functionId: 'Allocate', verb: 'get', resource: 'ciliumnodes' },
      { functionId: 'Allocate', verb: 'delete', resource: 'ciliumnodes' },
      { functionId: 'Sync', verb: 'patch', resource: 'ciliumnodes', subresource: 'status' },
      { functionId: 'Watch', verb: 'watch', resource: 'ciliumnodes' },
      { functionId: 'Watch', verb: 'patch', resource: 'ciliumnodes', subresource: 'status' },
      { functionId: 'Ungrouped', verb: 'get', resource: 'ciliumnodes' },
      {
        functionId: 'Allocate',
        verb: 'get',
        resource: 'configmaps',
        group: '',
        namespace: 'kube-system',
        name: 'cilium-config',
      },
      {
        functionId: 'Allocate',
        verb: 'get',
        resource: 'configmaps',
        group: '',
        namespace: 'default',
        name: 'cilium-config',
      },
    ];
    const observed = await compare('self-subject-access-review', async (backend) => {
      const answers: Record<string, unknown> = {};
      for (const { functionId, group = 'cilium.io', ...attributes } of questions) {
        const client = functionId === 'admin' ? backend.admin : backend.as(functionId);
        const resourceAttributes = { group, ...attributes };
        const response = await client.request('POST', SELF_SUBJECT_ACCESS_REVIEWS, {
          kind: 'SelfSubjectAccessReview',
          apiVersion: 'authorization.k8s.io/v1',
          spec: { resourceAttributes },
        });
        const body = response.body as {
          kind?: string;
          spec?: unknown;
          status?: { allowed?: boolean; denied?: boolean; reason?: string };
        };
        answers[`${functionId} ${JSON.stringify(resourceAttributes)}`] = {
          status: response.status,
          kind: body.kind,
          spec: body.spec,
          allowed: body.status?.allowed,
          denied: body.status?.denied,
          reason: body.status?.reason,
        };
      }
      const get = await backend.admin.request('GET', SELF_SUBJECT_ACCESS_REVIEWS);
      answers.get = get.status;
      return answers;
    });
    const allowed = Object.values(observed).map((answer) => (answer as { allowed?: boolean }).allowed);
    expect(allowed).toEqual([true, true, false, true, true, false, false, true, false, undefined]);
  });

  it('SelfSubjectReview answers who the token is (kubectl auth whoami)', async () => {
    const observed = await compare('self-subject-review', async (backend) => {
      const answers: Record<string, unknown> = {};
      for (const functionId of ['admin', 'Sync', 'Ungrouped']) {
        const client = functionId === 'admin' ? backend.admin : backend.as(functionId);
        const response = await client.request('POST', SELF_SUBJECT_REVIEWS, SELF_SUBJECT_REVIEW);
        const body = response.body as {
          kind?: string;
          apiVersion?: string;
          status?: { userInfo?: { username?: string; groups?: string[] } };
        };
        const username = body.status?.userInfo?.username;
        answers[functionId] = {
          status: response.status,
          kind: body.kind,
          apiVersion: body.apiVersion,
          username: functionId === 'admin' ? username : username === backend.identityOf(functionId).user,
          groups: [...(body.status?.userInfo?.groups ?? [])].sort(),
        };
      }
      return answers;
    });
    expect(observed).toMatchObject({
      admin: {
        status: 201,
        username: 'kubernetes-admin',
        groups: ['system:authenticated', 'system:masters'],
      },
      Sync: { status: 201, username: true },
    });
  });

  it('every accepted difference belongs to a case this suite runs', () => {
    expect(Object.keys(ACCEPTED_DIFFERENCES).filter((name) => !checkedCases.has(name))).toEqual([]);
  });
});

interface DeniedRequest {
  readonly functionId: string;
  readonly verb: string;
  readonly resource: 'ciliumnodes' | 'ciliumnodes/status';
  readonly method: string;
  path(name: string): string;
  body(name: string): unknown;
  readonly contentType?: string;
}

/** One request per verb, on the main resource and on /status, as kube-apiserver's request info names it. */
const VERB_REQUESTS: readonly Omit<DeniedRequest, 'functionId'>[] = [
  ...(['ciliumnodes', 'ciliumnodes/status'] as const).flatMap((resource) => {
    const subresource = resource === 'ciliumnodes' ? '' : '/status';
    return [
      {
        verb: 'get',
        resource,
        method: 'GET',
        path: (name: string) => objectPath(name, subresource),
        body: () => undefined,
      },
      {
        verb: 'patch',
        resource,
        method: 'PATCH',
        path: (name: string) => objectPath(name, subresource),
        body: () => [{ op: 'test', path: '/metadata/name', value: 'x' }],
        contentType: JSON_PATCH,
      },
      {
        verb: 'update',
        resource,
        method: 'PUT',
        path: (name: string) => objectPath(name, subresource),
        body: (name: string) => exampleCiliumNode(name),
      },
    ];
  }),
  { verb: 'list', resource: 'ciliumnodes', method: 'GET', path: () => CILIUMNODES, body: () => undefined },
  {
    verb: 'watch',
    resource: 'ciliumnodes',
    method: 'GET',
    path: () => `${CILIUMNODES}?watch=true`,
    body: () => undefined,
  },
  {
    verb: 'create',
    resource: 'ciliumnodes',
    method: 'POST',
    path: () => CILIUMNODES,
    body: (name: string) => exampleCiliumNode(`${name}-denied`),
  },
  {
    verb: 'delete',
    resource: 'ciliumnodes',
    method: 'DELETE',
    path: (name: string) => objectPath(name),
    body: () => undefined,
  },
];

/**
 * Every (identity, verb, resource) that FUNCTION_KUBERNETES_GROUPS does not grant, plus every
 * request of the identity without a group.
 */
function forbiddenRequests(): DeniedRequest[] {
  const identities = [
    ...(Object.keys(FUNCTION_KUBERNETES_GROUPS) as IpamFunctionId[]).map((functionId) => ({
      functionId: functionId as string,
      rules: FUNCTION_KUBERNETES_GROUPS[functionId].rules,
    })),
    { functionId: 'Ungrouped', rules: [] },
  ];
  return identities.flatMap(({ functionId, rules }) =>
    VERB_REQUESTS.filter(
      (request) =>
        !rules.some(
          (rule) =>
            rule.apiGroups.includes('cilium.io') &&
            rule.resources.includes(request.resource) &&
            rule.verbs.includes(request.verb),
        ),
    ).map((request) => ({ ...request, functionId })),
  );
}
