import type { IncomingMessage, ServerResponse } from 'node:http';
import { parse as parseYaml } from 'yaml';
import type { ConfigMapStore } from './configmaps.ts';
import type { FaultKind, Faults, RequestInfo, RequestLog, RequestRecord } from './faults.ts';
import { actingIdentity, selfSubjectAccessReview, selfSubjectReview } from './identity-requests.ts';
import { isJsonObject } from './json.ts';
import { applyJsonPatch, JsonPatchError, parseJsonPatch } from './json-patch.ts';
import { applyMergePatch } from './merge-patch.ts';
import { ADMIN_IDENTITY, type Identity, type RbacAuthorizer } from './rbac.ts';
import { parseFieldSelector, parseLabelSelector, type Selector } from './selectors.ts';
import {
  API_VERSION,
  ApiError,
  badRequest,
  conflict,
  coreNotFound,
  deleted,
  forbidden,
  forbiddenInNamespace,
  GROUP,
  internalError,
  invalidDryRun,
  LIST_KIND,
  methodNotAllowed,
  notFound,
  patchNotApplicable,
  RESOURCE,
  requestEntityTooLarge,
  routeNotFound,
  tooManyRequests,
  unauthorized,
  unsupportedMediaType,
  VERSION,
} from './status.ts';
import type { CiliumNodeStore, FieldValidation, Subresource, WriteOptions } from './store.ts';
import type { WatchHub } from './watch.ts';

/**
 * The HTTP face of the emulator: routes kube-apiserver paths for `cilium.io/v2` `ciliumnodes`
 * (cluster-scoped) onto the store, and GETs of core `v1` ConfigMaps (namespaced) onto theirs,
 * decodes bodies, encodes answers and Status errors, and applies authentication, RBAC, fault
 * injection and the request log.
 */

export interface ServerDependencies {
  store: CiliumNodeStore;
  configMaps: ConfigMapStore;
  watches: WatchHub;
  faults: Faults;
  requests: RequestLog;
  /** When set, every request must carry `Authorization: Bearer <token>` (else 401). */
  requiredToken: string | undefined;
  /**
   * Bearer token → identity. When set, a request without a known token is 401 and each request is
   * authorized by `rbac` (403 Forbidden outside its rules); unset, every request is the admin.
   */
  identities: ReadonlyMap<string, Identity> | undefined;
  rbac: RbacAuthorizer;
}

/** kube-apiserver's default `--max-request-bytes` for JSON bodies is 3 MiB. */
const MAX_BODY_BYTES = 3 * 1024 * 1024;
const COLLECTION_PATH = `/apis/${GROUP}/${VERSION}/${RESOURCE}`;
const MERGE_PATCH = 'application/merge-patch+json';
const JSON_PATCH = 'application/json-patch+json';

interface Answer {
  code: number;
  body: unknown;
  warnings?: string[];
}

export type Route =
  | { target: 'discovery'; body: unknown }
  | { target: 'collection' }
  | { target: 'object'; name: string; subresource: Subresource }
  | { target: 'configmaps'; namespace: string; name?: string }
  | { target: 'review'; resource: ReviewResource };

type ReviewResource = 'selfsubjectaccessreviews' | 'selfsubjectreviews';

/** The questions an identity asks about itself (`kubectl auth can-i`, `kubectl auth whoami`). */
const REVIEW_PATHS: Readonly<Record<string, ReviewResource>> = {
  '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews': 'selfsubjectaccessreviews',
  '/apis/authentication.k8s.io/v1/selfsubjectreviews': 'selfsubjectreviews',
};

const CONFIG_MAP_PATH = /^\/api\/v1\/namespaces\/([^/]+)\/configmaps(?:\/([^/]+))?\/?$/;

export function parseRoute(pathname: string): Route | undefined {
  const discovery = DISCOVERY[pathname.replace(/\/$/, '') || '/'];
  if (discovery !== undefined) return { target: 'discovery', body: discovery };
  const review = REVIEW_PATHS[pathname];
  if (review !== undefined) return { target: 'review', resource: review };
  const configMap = CONFIG_MAP_PATH.exec(pathname);
  if (configMap) {
    const namespace = decodeURIComponent(configMap[1] ?? '');
    return configMap[2] === undefined
      ? { target: 'configmaps', namespace }
      : { target: 'configmaps', namespace, name: decodeURIComponent(configMap[2]) };
  }
  if (pathname === COLLECTION_PATH) return { target: 'collection' };
  if (!pathname.startsWith(`${COLLECTION_PATH}/`)) return undefined;
  const rest = pathname.slice(COLLECTION_PATH.length + 1).split('/');
  const name = decodeURIComponent(rest[0] ?? '');
  if (name === '') return undefined;
  if (rest.length === 1) return { target: 'object', name, subresource: 'main' };
  if (rest.length === 2 && rest[1] === 'status') return { target: 'object', name, subresource: 'status' };
  return undefined;
}

/** The verb kube-apiserver's RequestInfoResolver would give this request. */
export function requestInfo(route: Route, method: string, query: URLSearchParams): RequestInfo | undefined {
  if (route.target === 'discovery') return method === 'GET' ? { verb: 'discovery' } : undefined;
  if (route.target === 'review')
    return method === 'POST' ? { verb: 'create', resource: route.resource } : undefined;
  if (route.target === 'configmaps') {
    const verbs: Record<string, RequestInfo['verb']> =
      route.name === undefined
        ? {
            GET: query.get('watch') === 'true' ? 'watch' : 'list',
            POST: 'create',
            DELETE: 'deletecollection',
          }
        : { GET: 'get', PUT: 'update', PATCH: 'patch', DELETE: 'delete' };
    const verb = verbs[method];
    if (verb === undefined) return undefined;
    return {
      verb,
      resource: 'configmaps',
      namespace: route.namespace,
      ...(route.name !== undefined ? { name: route.name } : {}),
    };
  }
  if (route.target === 'collection') {
    const verbs: Record<string, RequestInfo['verb']> = {
      GET: query.get('watch') === 'true' || query.get('watch') === '1' ? 'watch' : 'list',
      POST: 'create',
      DELETE: 'deletecollection',
    };
    const verb = verbs[method];
    if (verb === undefined) return undefined;
    const fieldName = /^metadata\.name==?(.+)$/.exec(query.get('fieldSelector') ?? '')?.[1];
    return { verb, subresource: 'main', ...(fieldName !== undefined ? { name: fieldName } : {}) };
  }
  const verbs: Record<string, RequestInfo['verb']> =
    route.subresource === 'main'
      ? { GET: 'get', PUT: 'update', PATCH: 'patch', DELETE: 'delete' }
      : { GET: 'get', PUT: 'update', PATCH: 'patch' };
  const verb = verbs[method];
  return verb === undefined ? undefined : { verb, subresource: route.subresource, name: route.name };
}

export function createRequestHandler(
  deps: ServerDependencies,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    handle(deps, req, res).catch((error: unknown) => {
      // A bug in the emulator itself: answer 500 rather than hang the client.
      if (!res.headersSent) send(res, errorAnswer(internalError(String(error))));
    });
  };
}

async function handle(deps: ServerDependencies, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const method = req.method ?? 'GET';
  const url = new URL(req.url ?? '/', 'http://emulator');
  const route = parseRoute(url.pathname);
  const info = route === undefined ? undefined : requestInfo(route, method, url.searchParams);
  const contentType = req.headers['content-type']?.split(';')[0]?.trim();
  const record: RequestRecord = {
    ...(info ?? { verb: 'unknown' }),
    method,
    path: url.pathname,
    query: url.search,
    ...(contentType !== undefined ? { contentType } : {}),
    statusCode: 0,
  };
  deps.requests.record(record);

  let fault: FaultKind | undefined;
  try {
    // Authentication comes first on the real server, before routing.
    if (deps.requiredToken !== undefined && req.headers.authorization !== `Bearer ${deps.requiredToken}`) {
      throw unauthorized();
    }
    const authenticated = authenticate(deps.identities, req.headers.authorization);
    record.user = authenticated.user;
    // Impersonation comes next, before authorization and routing, as on the real server.
    const identity = actingIdentity(authenticated, req.headers, deps.rbac, info);
    if (route === undefined) throw routeNotFound();
    if (info === undefined) throw methodNotAllowed(method);
    if (!deps.rbac.allows(identity, info)) {
      if (info.resource === 'configmaps') {
        throw forbiddenInNamespace(identity.user, info.verb, info.resource, info.namespace ?? '', info.name);
      }
      const resource = info.subresource === 'status' ? `${RESOURCE}/status` : RESOURCE;
      throw forbidden(identity.user, info.verb, resource, info.name);
    }
    fault = deps.faults.take(info);
    if (fault !== undefined) record.fault = fault;
    if (fault === 'drop-connection') {
      record.statusCode = 'dropped';
      req.socket.destroy();
      return;
    }
    if (fault === 'server-error') throw internalError('injected fault');
    if (fault === 'conflict') throw conflict(info.name ?? '');
    if (fault === 'too-many-requests') throw tooManyRequests(1);

    if (info.verb === 'watch' && route.target !== 'configmaps') {
      record.statusCode = 200;
      deps.watches.open(res, {
        ...watchRequest(url.searchParams),
        dropAfterInitialEvents: fault === 'drop-after-apply',
      });
      if (fault === 'drop-after-apply') record.statusCode = 'dropped';
      return;
    }
    const answer = await execute(deps, { route, info, identity }, req, url.searchParams, contentType);
    if (fault === 'drop-after-apply') {
      record.statusCode = 'dropped';
      req.socket.destroy();
      return;
    }
    record.statusCode = answer.code;
    send(res, answer);
  } catch (error) {
    if (!(error instanceof ApiError)) throw error;
    record.statusCode = error.code;
    send(res, errorAnswer(error), error.headers);
  }
}

function authenticate(
  identities: ReadonlyMap<string, Identity> | undefined,
  header: string | undefined,
): Identity {
  if (identities === undefined) return ADMIN_IDENTITY;
  const token = /^Bearer (.+)$/.exec(header ?? '')?.[1];
  const identity = token === undefined ? undefined : identities.get(token);
  if (identity === undefined) throw unauthorized();
  return identity;
}

function errorAnswer(error: ApiError): Answer {
  return { code: error.code, body: error.status };
}

function send(res: ServerResponse, answer: Answer, headers: Record<string, string> = {}): void {
  const payload = JSON.stringify(answer.body);
  res.writeHead(answer.code, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(payload),
    ...headers,
    ...(answer.warnings?.length ? { Warning: answer.warnings.map((w) => `299 - ${JSON.stringify(w)}`) } : {}),
  });
  res.end(payload);
}

async function execute(
  deps: ServerDependencies,
  { route, info, identity }: { route: Route; info: RequestInfo; identity: Identity },
  req: IncomingMessage,
  query: URLSearchParams,
  contentType: string | undefined,
): Promise<Answer> {
  const { store } = deps;
  if (route.target === 'discovery') return { code: 200, body: route.body };
  if (route.target === 'configmaps') return readConfigMaps(deps.configMaps, route, info);
  if (route.target === 'review') {
    const body =
      route.resource === 'selfsubjectreviews'
        ? selfSubjectReview(identity)
        : selfSubjectAccessReview(identity, deps.rbac, decodeBody(await readBody(req), contentType));
    return { code: 201, body };
  }
  if (info.verb === 'delete') return deleteObject(store, route, req, query);
  const options = writeOptions(query, OPTIONS_KIND[info.verb] ?? 'CreateOptions');

  if (route.target === 'collection') {
    const selector = selectorFrom(query);
    switch (info.verb) {
      case 'list':
        return { code: 200, body: list(store, selector, query) };
      case 'create': {
        const result = store.create(decodeBody(await readBody(req), contentType), options);
        return { code: 201, body: result.object, warnings: result.warnings };
      }
      case 'deletecollection': {
        const items = store.list(selector).map((o) => store.delete(o.metadata.name, {}, options).object);
        return { code: 200, body: { apiVersion: API_VERSION, kind: LIST_KIND, metadata: {}, items } };
      }
    }
    throw methodNotAllowed(req.method ?? '');
  }

  const { name, subresource } = route;
  switch (info.verb) {
    case 'get': {
      const object = store.get(name);
      if (object === undefined) throw notFound(name);
      return { code: 200, body: object };
    }
    case 'update': {
      const result = store.update(
        name,
        decodeBody(await readBody(req), contentType),
        subresource,
        'update',
        options,
      );
      return { code: 200, body: result.object, warnings: result.warnings };
    }
    case 'patch': {
      const patched = patch(store, name, contentType, await readBody(req));
      const result = store.update(name, patched, subresource, 'patch', options);
      return { code: 200, body: result.object, warnings: result.warnings };
    }
  }
  throw methodNotAllowed(req.method ?? '');
}

/**
 * DELETE of one object. Its options come from the DeleteOptions body when there is one (what
 * kubectl sends: `kubectl delete --dry-run=server` puts `dryRun` there), else from the query, as
 * kube-apiserver reads them.
 */
async function deleteObject(
  store: CiliumNodeStore,
  route: Route,
  req: IncomingMessage,
  query: URLSearchParams,
): Promise<Answer> {
  if (route.target !== 'object') throw methodNotAllowed(req.method ?? '');
  const { name } = route;
  const body = await readBody(req);
  const options =
    body.trim() === '' ? deleteOptionsOf({}, query) : deleteOptionsOf(parseJson(body), undefined);
  const result = store.delete(name, options.preconditions, {
    fieldValidation: 'Warn',
    dryRun: options.dryRun,
  });
  return { code: 200, body: result.deleted ? deleted(name, result.object.metadata.uid) : result.object };
}

/** ConfigMaps are read-only over HTTP here (tests put them through the store, as an admin would). */
function readConfigMaps(
  configMaps: ConfigMapStore,
  route: { namespace: string; name?: string },
  info: RequestInfo,
): Answer {
  if (info.verb === 'get' && route.name !== undefined) {
    const object = configMaps.get(route.namespace, route.name);
    if (object === undefined) throw coreNotFound('configmaps', route.name);
    return { code: 200, body: object };
  }
  if (info.verb === 'list') {
    return {
      code: 200,
      body: {
        apiVersion: 'v1',
        kind: 'ConfigMapList',
        metadata: { resourceVersion: configMaps.resourceVersion },
        items: configMaps.list(route.namespace),
      },
    };
  }
  throw methodNotAllowed(info.verb);
}

/**
 * PATCH: the patch type comes from Content-Type and is checked first (415), then the object must
 * exist (404), then the patch is applied to it. Strategic merge patch needs Go struct tags, so
 * kube-apiserver refuses it for custom resources with 415. Server-side apply
 * (`application/apply-patch+yaml`) is real for CRs but not emulated: it also answers 415.
 */
function patch(store: CiliumNodeStore, name: string, contentType: string | undefined, body: string): unknown {
  if (contentType !== MERGE_PATCH && contentType !== JSON_PATCH) {
    throw unsupportedMediaType(contentType ?? '', [JSON_PATCH, MERGE_PATCH]);
  }
  const current = store.get(name);
  if (current === undefined) throw notFound(name);
  const document = parseJson(body);
  if (contentType === MERGE_PATCH) {
    if (!isJsonObject(document)) throw badRequest('merge patch body must be a JSON object');
    return applyMergePatch(current, document);
  }
  try {
    return applyJsonPatch(current, parseJsonPatch(document));
  } catch (error) {
    if (!(error instanceof JsonPatchError)) throw error;
    throw error.kind === 'malformed' ? badRequest(error.message) : patchNotApplicable(error.message);
  }
}

function list(store: CiliumNodeStore, selector: Selector, query: URLSearchParams) {
  const limit = Number(query.get('limit') ?? 0);
  if (!Number.isInteger(limit) || limit < 0) throw badRequest(`invalid limit: ${query.get('limit')}`);
  const token = query.get('continue');
  let items: ReturnType<CiliumNodeStore['list']>;
  let resourceVersion: number;
  if (token) {
    const position = decodeContinue(token);
    resourceVersion = position.resourceVersion;
    items = store.listAt(resourceVersion, selector).filter((o) => o.metadata.name > position.after);
  } else {
    resourceVersion = Number(store.resourceVersion);
    items = store.list(selector);
  }
  const metadata: Record<string, unknown> = { resourceVersion: String(resourceVersion) };
  if (limit > 0 && items.length > limit) {
    items = items.slice(0, limit);
    const remaining = (token ? store.listAt(resourceVersion, selector) : store.list(selector)).filter(
      (o) => o.metadata.name > items.at(-1)!.metadata.name,
    ).length;
    metadata.continue = encodeContinue(resourceVersion, items.at(-1)!.metadata.name);
    // Like the real server, the count is only given when no label selector filtered the page.
    if (!query.get('labelSelector')) metadata.remainingItemCount = remaining;
  }
  return { apiVersion: API_VERSION, kind: LIST_KIND, metadata, items };
}

function encodeContinue(resourceVersion: number, after: string): string {
  return Buffer.from(JSON.stringify({ v: 'emulator', rv: resourceVersion, start: after })).toString(
    'base64url',
  );
}

function decodeContinue(token: string): { resourceVersion: number; after: string } {
  try {
    const parsed = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
    if (Number.isInteger(parsed.rv) && typeof parsed.start === 'string') {
      return { resourceVersion: parsed.rv, after: parsed.start };
    }
  } catch {
    // fall through
  }
  throw badRequest(`continue key is not valid: ${token}`);
}

function selectorFrom(query: URLSearchParams): Selector {
  const labels = parseLabelSelector(query.get('labelSelector'));
  const fields = parseFieldSelector(query.get('fieldSelector'));
  return (object) => labels(object) && fields(object);
}

function watchRequest(query: URLSearchParams) {
  const rv = query.get('resourceVersion');
  if (rv !== null && rv !== '' && !/^\d+$/.test(rv)) {
    throw badRequest(`resourceVersion: Invalid value: "${rv}": must be a non-negative integer`);
  }
  const timeout = query.get('timeoutSeconds');
  return {
    resourceVersion: rv === null || rv === '' ? undefined : Number(rv),
    selector: selectorFrom(query),
    allowWatchBookmarks: query.get('allowWatchBookmarks') === 'true',
    sendInitialEvents: query.get('sendInitialEvents') === 'true',
    timeoutSeconds: timeout === null ? undefined : Number(timeout),
  };
}

/** The options kind kube-apiserver decodes a write's query into, by verb. */
const OPTIONS_KIND: Partial<Record<RequestInfo['verb'], string>> = {
  create: 'CreateOptions',
  update: 'UpdateOptions',
  patch: 'PatchOptions',
  deletecollection: 'DeleteOptions',
};

function writeOptions(query: URLSearchParams, optionsKind: string): WriteOptions {
  const fieldValidation = query.get('fieldValidation') ?? 'Warn';
  if (!['Strict', 'Warn', 'Ignore'].includes(fieldValidation)) {
    throw badRequest(
      `fieldValidation must be one of "Ignore", "Warn", or "Strict", got "${fieldValidation}"`,
    );
  }
  const dryRun = query.getAll('dryRun');
  if (dryRun.some((value) => value !== 'All')) throw invalidDryRun(optionsKind, dryRun);
  return { fieldValidation: fieldValidation as FieldValidation, dryRun: dryRun.length > 0 };
}

/** The DeleteOptions of a body (or of the query when `query` is given): dry run and preconditions. */
function deleteOptionsOf(
  body: unknown,
  query: URLSearchParams | undefined,
): { dryRun: boolean; preconditions: { uid?: string; resourceVersion?: string } } {
  const options = isJsonObject(body) ? body : {};
  const dryRun =
    query === undefined
      ? Array.isArray(options.dryRun)
        ? options.dryRun.map(String)
        : []
      : query.getAll('dryRun');
  if (dryRun.some((value) => value !== 'All')) throw invalidDryRun('DeleteOptions', dryRun);
  const preconditions = isJsonObject(options.preconditions) ? options.preconditions : {};
  return {
    dryRun: dryRun.length > 0,
    preconditions: {
      ...(typeof preconditions.uid === 'string' ? { uid: preconditions.uid } : {}),
      ...(typeof preconditions.resourceVersion === 'string'
        ? { resourceVersion: preconditions.resourceVersion }
        : {}),
    },
  };
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw requestEntityTooLarge(MAX_BODY_BYTES);
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw badRequest(`error decoding request body: ${(error as Error).message}`);
  }
}

/**
 * POST/PUT bodies: JSON, or YAML when the client says so (both are served for CRs). Protobuf, which
 * kube-apiserver takes for built-in types (kubectl sends a SelfSubjectAccessReview that way), is
 * not decoded here: 415, as the real server answers it for a custom resource.
 */
function decodeBody(text: string, contentType: string | undefined): unknown {
  if (contentType === 'application/vnd.kubernetes.protobuf') {
    throw unsupportedMediaType(contentType, ['application/json', 'application/yaml']);
  }
  if (contentType === 'application/yaml') {
    try {
      return parseYaml(text);
    } catch (error) {
      throw badRequest(`error decoding YAML request body: ${(error as Error).message}`);
    }
  }
  return parseJson(text);
}

const CILIUM_GROUP_VERSION = { groupVersion: API_VERSION, version: VERSION };

/** Minimal discovery documents, enough for tools that look before they call. */
const DISCOVERY: Record<string, unknown> = {
  '/version': {
    major: '1',
    minor: '33',
    gitVersion: 'v1.33.0-k8s-emulator',
    gitCommit: '0000000000000000000000000000000000000000',
    gitTreeState: 'clean',
    buildDate: '2025-01-01T00:00:00Z',
    goVersion: 'go1.24.0',
    compiler: 'gc',
    platform: 'linux/amd64',
  },
  '/api': { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [] },
  '/api/v1': {
    kind: 'APIResourceList',
    groupVersion: 'v1',
    resources: [
      {
        name: 'configmaps',
        singularName: 'configmap',
        namespaced: true,
        kind: 'ConfigMap',
        verbs: ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'],
        shortNames: ['cm'],
      },
    ],
  },
  '/apis': {
    kind: 'APIGroupList',
    apiVersion: 'v1',
    groups: [{ name: GROUP, versions: [CILIUM_GROUP_VERSION], preferredVersion: CILIUM_GROUP_VERSION }],
  },
  [`/apis/${GROUP}`]: {
    kind: 'APIGroup',
    apiVersion: 'v1',
    name: GROUP,
    versions: [CILIUM_GROUP_VERSION],
    preferredVersion: CILIUM_GROUP_VERSION,
  },
  [`/apis/${GROUP}/${VERSION}`]: {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: API_VERSION,
    resources: [
      {
        name: RESOURCE,
        singularName: 'ciliumnode',
        namespaced: false,
        kind: 'CiliumNode',
        verbs: ['delete', 'deletecollection', 'get', 'list', 'patch', 'create', 'update', 'watch'],
        shortNames: ['cn', 'ciliumn'],
        categories: ['cilium'],
      },
      {
        name: `${RESOURCE}/status`,
        singularName: '',
        namespaced: false,
        kind: 'CiliumNode',
        verbs: ['get', 'patch', 'update'],
      },
    ],
  },
};
