import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Faults } from '../emulators/k8s/faults.ts';
import {
  type CiliumNodeObject,
  DEFAULT_SCHEMAS,
  DEFAULT_TOKEN,
  type K8sEmulator,
  type SchemaVersion,
  start as startK8sEmulator,
} from '../emulators/k8s/index.ts';
import { ciliumNodeCrdUrl } from '../emulators/k8s/schema.ts';
import {
  type FunctionIdentity,
  functionIdentities,
  kubernetesAuthorization,
  OPERATOR_PEER_USER,
  operatorPeerIdentity,
  personIdentities,
} from '../local-cloud/identities.ts';
import { type ControlPlane, startControlPlane } from '../peers/kubernetes/control-plane.ts';
import { startFaultProxy } from '../peers/kubernetes/fault-proxy.ts';
import { type HttpsJsonClient, WatchRefusedError } from '../peers/kubernetes/https-json.ts';

/**
 * The Kubernetes API a test runs against, behind one asynchronous interface: by default the real
 * kube-apiserver (with etcd) built by `npm run peers:build`; the emulator (test/emulators/k8s) where a
 * test needs what only it can do (injected faults, a synchronous store) or where its speed matters.
 *
 * Fixtures write as the cluster admin through the API (the real server's own validation, pruning and
 * resourceVersions apply to them too). `history()` is every version of every CiliumNode in order, as
 * a watch from the start saw it: on the real server a watch opened before the first object, on the
 * emulator its store's log; it resolves once it holds the version the server serves now.
 */

export type KubernetesBackend = 'kube-apiserver' | 'emulator';

/** One stored version of a CiliumNode, as a watch delivers it. */
export interface ObservedVersion {
  readonly resourceVersion: string;
  readonly name: string;
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED';
  readonly object: CiliumNodeObject;
}

/** One request a function (any identity but the fixtures' admin) made of CiliumNodes or ConfigMaps. */
export interface ObservedRequest {
  readonly verb: string;
  readonly resource: 'ciliumnodes' | 'configmaps';
  /** `main` for the object and the collection, `status` for `/status`. */
  readonly subresource: 'main' | 'status';
  readonly name: string | undefined;
  readonly user: string | undefined;
  readonly statusCode: number;
}

export interface KubernetesUnderTest {
  readonly backend: KubernetesBackend;
  /** The server's version: kube-apiserver's gitVersion, or `emulator`. */
  readonly version: string;
  /** Where the functions reach the server: on the real server, through its fault proxy. */
  readonly url: string;
  /** Faults armed for the functions' requests (the emulator's own, or the proxy's). */
  readonly faults: Faults;
  /** The admin's bearer token. */
  readonly token: string;
  /** Each function's identity (its own token, its group's RBAC), and one without a group. */
  readonly identities: readonly FunctionIdentity[];
  /** A person's identities: each function's group under a user name of its own (`personIdentities`). */
  readonly personIdentities: readonly FunctionIdentity[];
  /**
   * Writes `<dir>/kubeconfig` for a person with kubectl: the admin's context (current) and one
   * context per function's group (`allocate`, `sweep`, `sync`, `watch`); returns its path.
   */
  writePersonKubeconfig(dir: string): string;
  /** The bearer token of a function (`Allocate`, `Sweep`, `Sync`, `Watch`, `Ungrouped`). */
  tokenOf(functionId: string): string;
  /**
   * On the real server, the token of cilium-operator's user with cilium-operator's grants on
   * CiliumNodes (`peers/cilium-1.20/operator-rbac.yaml`), for the operator peer; undefined on the
   * emulator, which does not run the peer.
   */
  readonly operatorPeerToken: string | undefined;
  /** The emulator, when that is the backend (for faults and its request log). */
  readonly emulator: K8sEmulator | undefined;
  /** The control plane, when the real server is the backend (for restarts). */
  readonly controlPlane: ControlPlane | undefined;
  kubeconfigYaml(token?: string): string;
  writeKubeconfig(dir?: string, token?: string): string;
  getCiliumNode(name: string): Promise<CiliumNodeObject | undefined>;
  listCiliumNodes(): Promise<CiliumNodeObject[]>;
  /** POST; `status` in the body is dropped (the CRD has the status subresource). */
  createCiliumNode(object: unknown): Promise<CiliumNodeObject>;
  /** PUT of the main resource or of `/status`, conditional on the body's resourceVersion. */
  replaceCiliumNode(object: CiliumNodeObject, subresource?: 'status'): Promise<CiliumNodeObject>;
  /**
   * Stores the object as given, main resource and status (a fixture: an agent's or an operator's
   * doing), creating it or replacing whatever version is there.
   */
  putCiliumNode(object: unknown): Promise<CiliumNodeObject>;
  deleteCiliumNode(name: string): Promise<void>;
  putConfigMap(namespace: string, name: string, data: Readonly<Record<string, string>>): Promise<void>;
  deleteConfigMap(namespace: string, name: string): Promise<void>;
  history(name?: string): Promise<ObservedVersion[]>;
  /**
   * The functions' requests since the start (or the last `resetRequests`) that match every given
   * field: on the real server its audit log, on the emulator its request log. The fixtures' own
   * requests (the admin's) are not among them.
   */
  requests(filter?: Partial<ObservedRequest>): Promise<ObservedRequest[]>;
  resetRequests(): Promise<void>;
  /**
   * A clean slate on a server tests share: every CiliumNode deleted, the history and the request
   * log forgotten, every fault disarmed (ConfigMaps are the tests' own to remove).
   */
  reset(): Promise<void>;
  /** Calls `listener` for every version stored from now on; returns the unsubscribe. */
  onVersion(listener: (version: ObservedVersion) => void): () => void;
  close(): Promise<void>;
}

export interface KubernetesOptions {
  /** Default `kube-apiserver`. */
  readonly backend?: KubernetesBackend;
  /** CRD generations; the first one is the CRD the server runs (and prunes with). */
  readonly schemas?: readonly SchemaVersion[];
  /** The account the functions' roles are in (their user names); default 123456789012. */
  readonly account?: string;
  /** `--etcd-compaction-interval` of the real server. */
  readonly compactionInterval?: string;
  /** kube-apiserver's watch cache; default on (see `ControlPlaneOptions.watchCache`). */
  readonly watchCache?: boolean;
}

const CILIUMNODES = '/apis/cilium.io/v2/ciliumnodes';

/** The RBAC manifest a user applies (`npm run rbac` writes it from infra/kubernetes-access.ts). */
const RBAC_YAML = fileURLToPath(new URL('../../infra/kubernetes/rbac.yaml', import.meta.url));

/** cilium-operator's grants on CiliumNodes, bound to the operator peer's user. */
const OPERATOR_PEER_RBAC_YAML = fileURLToPath(
  new URL('../peers/cilium-1.20/operator-rbac.yaml', import.meta.url),
);

function tokenFinder(identities: readonly FunctionIdentity[]) {
  return (functionId: string) => {
    const identity = identities.find((candidate) => candidate.functionId === functionId);
    if (identity === undefined) throw new Error(`no Kubernetes identity for function ${functionId}`);
    return identity.kubernetesToken;
  };
}

/** The admin's context (current) and one per person identity, named after its function. */
function personKubeconfig(
  controlPlane: ControlPlane,
  server: string,
  persons: readonly FunctionIdentity[],
): string {
  const contexts = [
    { name: 'admin', token: controlPlane.adminToken },
    ...persons.map((person) => ({ name: person.functionId.toLowerCase(), token: person.kubernetesToken })),
  ];
  return `${JSON.stringify(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'local-cloud',
          cluster: {
            server,
            'certificate-authority-data': Buffer.from(controlPlane.caPem).toString('base64'),
          },
        },
      ],
      users: contexts.map(({ name, token }) => ({ name, user: { token } })),
      contexts: contexts.map(({ name }) => ({ name, context: { cluster: 'local-cloud', user: name } })),
      'current-context': 'admin',
    },
    null,
    2,
  )}\n`;
}

/** The CiliumNode CRD manifest of one cilium generation (test/fixtures/crds). */
function ciliumNodeCrdYaml(version: SchemaVersion): string {
  return readFileSync(ciliumNodeCrdUrl(version), 'utf8');
}

export async function startKubernetes(options: KubernetesOptions = {}): Promise<KubernetesUnderTest> {
  return (options.backend ?? 'kube-apiserver') === 'emulator'
    ? emulatorBackend(options)
    : realBackend(options);
}

async function realBackend(options: KubernetesOptions): Promise<KubernetesUnderTest> {
  const identities = functionIdentities(options.account ?? '123456789012');
  const persons = personIdentities();
  const operatorPeer = operatorPeerIdentity();
  const controlPlane = await startControlPlane({
    identities: Object.fromEntries(
      [...identities, ...persons, operatorPeer].map((identity) => [
        identity.kubernetesToken,
        identity.kubernetes,
      ]),
    ),
    ...(options.compactionInterval === undefined ? {} : { compactionInterval: options.compactionInterval }),
    ...(options.watchCache === undefined ? {} : { watchCache: options.watchCache }),
  });
  try {
    await controlPlane.installCrd(ciliumNodeCrdYaml((options.schemas ?? DEFAULT_SCHEMAS)[0] ?? 'v1.19-dev'));
    await controlPlane.apply(readFileSync(RBAC_YAML, 'utf8'));
    await controlPlane.apply(readFileSync(OPERATOR_PEER_RBAC_YAML, 'utf8'));
    const admin = controlPlane.admin;
    const proxy = await startFaultProxy({
      upstream: controlPlane.url,
      caPem: controlPlane.caPem,
      certPem: controlPlane.caPem,
      keyPem: controlPlane.servingKeyPem,
    });
    const recorder = await WatchRecorder.start(admin);
    const audit = new AuditLog(controlPlane.auditLogPath, admin);
    const ciliumNodes = adminCiliumNodes(admin);
    return {
      backend: 'kube-apiserver',
      version: controlPlane.version,
      url: proxy.url,
      faults: proxy.faults,
      token: controlPlane.adminToken,
      identities,
      personIdentities: persons,
      writePersonKubeconfig: (dir) => {
        const path = join(dir, 'kubeconfig');
        writeFileSync(path, personKubeconfig(controlPlane, proxy.url, persons), { mode: 0o600 });
        return path;
      },
      tokenOf: tokenFinder(identities),
      operatorPeerToken: operatorPeer.kubernetesToken,
      emulator: undefined,
      controlPlane,
      kubeconfigYaml: (token) => controlPlane.kubeconfigYaml(token, proxy.url),
      writeKubeconfig: (dir, token) => controlPlane.writeKubeconfig(dir, token, proxy.url),
      getCiliumNode: ciliumNodes.get,
      listCiliumNodes: ciliumNodes.list,
      createCiliumNode: ciliumNodes.create,
      replaceCiliumNode: ciliumNodes.replace,
      putCiliumNode: ciliumNodes.put,
      deleteCiliumNode: ciliumNodes.delete,
      putConfigMap: async (namespace, name, data) => {
        await controlPlane.apply(
          JSON.stringify({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace }, data }),
          'fixtures',
        );
      },
      deleteConfigMap: async (namespace, name) => {
        const response = await admin.request('DELETE', `/api/v1/namespaces/${namespace}/configmaps/${name}`);
        if (response.status >= 300 && response.status !== 404) {
          throw new KubernetesRequestError(`delete configmap ${name}`, response.status, response.body);
        }
      },
      history: async (name) => {
        // The newest version any CiliumNode holds now (a list's own resourceVersion is etcd's
        // revision, which other kinds of object advance too, so no CiliumNode event may carry it).
        const items = await ciliumNodes.list();
        const newest = Math.max(0, ...items.map((item) => Number(item.metadata.resourceVersion)));
        await recorder.seen(String(newest));
        return recorder.versions.filter((version) => name === undefined || version.name === name);
      },
      requests: async (filter = {}) => matching(await audit.requests(), filter),
      reset: async () => {
        proxy.faults.clear();
        for (const item of await ciliumNodes.list()) await ciliumNodes.delete(item.metadata.name);
        await recorder.forget(admin);
        await audit.reset();
      },
      resetRequests: () => audit.reset(),
      onVersion: (listener) => recorder.subscribe(listener),
      close: async () => {
        recorder.stop();
        await proxy.close();
        await controlPlane.stop();
      },
    };
  } catch (error) {
    await controlPlane.stop();
    throw error;
  }
}

/** CiliumNodes read and written as the admin, each answer above 299 raised as a KubernetesRequestError. */
function adminCiliumNodes(admin: ControlPlane['admin']) {
  const ok = async <T>(what: string, response: Promise<{ status: number; body: unknown }>): Promise<T> => {
    const { status, body } = await response;
    if (status >= 300) throw new KubernetesRequestError(what, status, body);
    return body as T;
  };
  const path = (name: string) => `${CILIUMNODES}/${encodeURIComponent(name)}`;
  const create = (object: unknown) =>
    ok<CiliumNodeObject>('create', admin.request('POST', CILIUMNODES, withKind(object)));
  const replace = (object: CiliumNodeObject, subresource?: 'status') =>
    ok<CiliumNodeObject>(
      `replace ${object.metadata.name}`,
      admin.request(
        'PUT',
        `${path(object.metadata.name)}${subresource === 'status' ? '/status' : ''}`,
        object,
      ),
    );
  const get = async (name: string) => {
    const response = await admin.request('GET', path(name));
    if (response.status === 404) return undefined;
    return ok<CiliumNodeObject>(`get ${name}`, Promise.resolve(response));
  };
  return {
    get,
    create,
    replace,
    list: async () =>
      (await ok<{ items: CiliumNodeObject[] }>('list', admin.request('GET', CILIUMNODES))).items,
    /** Creates or replaces the object, then its status when it carries one. */
    put: async (object: unknown) => {
      const wanted = withKind(object) as CiliumNodeObject;
      const existing = await get(wanted.metadata.name);
      const main =
        existing === undefined
          ? await create(wanted)
          : await replace({
              ...wanted,
              metadata: { ...wanted.metadata, resourceVersion: existing.metadata.resourceVersion },
            });
      return wanted.status === undefined ? main : replace({ ...main, status: wanted.status }, 'status');
    },
    delete: async (name: string) => {
      await ok('delete', admin.request('DELETE', path(name)));
    },
  };
}

async function emulatorBackend(options: KubernetesOptions): Promise<KubernetesUnderTest> {
  const identities = functionIdentities(options.account ?? '123456789012');
  const persons = personIdentities();
  const emulator = await startK8sEmulator({
    ...(options.schemas === undefined ? {} : { schemas: options.schemas }),
    ...kubernetesAuthorization([...identities, ...persons], DEFAULT_TOKEN),
  });
  const observed = (entry: ReturnType<K8sEmulator['history']>[number]): ObservedVersion => ({
    resourceVersion: entry.resourceVersion,
    name: entry.name,
    type: entry.type,
    object: entry.object,
  });
  const store = emulator.store;
  /** Versions before the last `reset` are not the current test's. */
  let historyFrom = 0;
  return {
    backend: 'emulator',
    version: 'emulator',
    url: emulator.url,
    faults: emulator.faults,
    token: emulator.token,
    identities,
    personIdentities: persons,
    // Plain HTTP: kubectl sends no token over it, so a person gets the admin's kubeconfig only.
    writePersonKubeconfig: (dir) => emulator.writeKubeconfig(dir),
    tokenOf: tokenFinder(identities),
    operatorPeerToken: undefined,
    emulator,
    controlPlane: undefined,
    kubeconfigYaml: (token) => emulator.kubeconfigYaml().replace(emulator.token, token ?? emulator.token),
    writeKubeconfig: (dir, token) => emulator.writeKubeconfig(dir, token),
    getCiliumNode: async (name) => store.get(name),
    listCiliumNodes: async () => store.list(),
    createCiliumNode: async (object) => store.create(withKind(object)).object,
    replaceCiliumNode: async (object, subresource) =>
      store.update(object.metadata.name, object, subresource ?? 'main', 'update').object,
    putCiliumNode: async (object) => store.put(withKind(object)),
    deleteCiliumNode: async (name) => {
      store.delete(name);
    },
    putConfigMap: async (namespace, name, data) => {
      emulator.configMaps.put(namespace, name, data);
    },
    deleteConfigMap: async (namespace, name) => {
      emulator.configMaps.delete(namespace, name);
    },
    history: async (name) =>
      emulator
        .history()
        .slice(historyFrom)
        .filter((entry) => name === undefined || entry.name === name)
        .map(observed),
    requests: async (filter = {}) =>
      matching(
        emulator.requests
          .all()
          // As the real server's audit policy: CiliumNodes and ConfigMaps only (not the reviews).
          .flatMap((request) =>
            request.user !== 'kubernetes-admin' &&
            request.verb !== 'unknown' &&
            (request.resource === undefined || request.resource === 'configmaps')
              ? [{ ...request, resource: request.resource ?? ('ciliumnodes' as const) }]
              : [],
          )
          .map((request) => ({
            verb: request.verb,
            resource: request.resource,
            subresource: request.subresource ?? 'main',
            name: request.name,
            user: request.user,
            statusCode: request.statusCode === 'dropped' ? 0 : request.statusCode,
          })),
        filter,
      ),
    resetRequests: async () => emulator.requests.reset(),
    reset: async () => {
      emulator.faults.clear();
      for (const object of store.list()) store.delete(object.metadata.name);
      historyFrom = emulator.history().length;
      emulator.requests.reset();
    },
    onVersion: (listener) => store.onWrite((entry) => listener(observed(entry))),
    close: () => emulator.close(),
  };
}

function matching(requests: ObservedRequest[], filter: Partial<ObservedRequest>): ObservedRequest[] {
  const fields = Object.entries(filter) as [keyof ObservedRequest, unknown][];
  return requests.filter((request) => fields.every(([field, value]) => request[field] === value));
}

/** A name no CiliumNode has: the admin's GET of it marks a point in the audit log. */
const AUDIT_BARRIER = 'audit-barrier.invalid';

/**
 * kube-apiserver's audit log as a request log. An event is written as its request completes, just
 * after the response: a read first makes one more request (a GET of a name no object has) and waits
 * for its event, so every request answered before the read is in the file.
 */
class AuditLog {
  private skipLines = 0;

  constructor(
    private readonly path: string,
    private readonly admin: HttpsJsonClient,
  ) {}

  async requests(): Promise<ObservedRequest[]> {
    const lines = await this.linesThroughBarrier();
    return lines
      .slice(this.skipLines)
      .map((line) => JSON.parse(line) as AuditEvent)
      .filter((event) => isFunctionRequest(event))
      .map((event) => ({
        verb: event.verb,
        resource: event.objectRef?.resource === 'configmaps' ? 'configmaps' : 'ciliumnodes',
        subresource: event.objectRef?.subresource === 'status' ? 'status' : 'main',
        name: event.objectRef?.name,
        user: event.user?.username,
        statusCode: event.responseStatus?.code ?? 0,
      }));
  }

  async reset(): Promise<void> {
    this.skipLines = (await this.linesThroughBarrier()).length;
  }

  private async linesThroughBarrier(): Promise<string[]> {
    const barrier = `${AUDIT_BARRIER}-${Date.now()}-${Math.random().toString(36).slice(2)}`;
    await this.admin.request('GET', `${CILIUMNODES}/${barrier}`);
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      const lines = existsSync(this.path) ? readFileSync(this.path, 'utf8').split('\n').filter(Boolean) : [];
      if (lines.some((line) => line.includes(barrier))) return lines;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    throw new Error(`the audit log ${this.path} never recorded the barrier request`);
  }
}

/**
 * Not the fixtures' admin, nor the server's own controllers (`system:apiserver`, `system:kube-*`);
 * the operator peer's service account is a client like the functions.
 */
function isFunctionRequest(event: AuditEvent): boolean {
  const user = event.user?.username ?? '';
  return (
    event.objectRef !== undefined &&
    user !== 'kubernetes-admin' &&
    (!user.startsWith('system:') || user === OPERATOR_PEER_USER)
  );
}

interface AuditEvent {
  verb: string;
  user?: { username?: string };
  objectRef?: { resource?: string; subresource?: string; name?: string };
  responseStatus?: { code?: number };
}

function withKind(object: unknown): unknown {
  return { apiVersion: 'cilium.io/v2', kind: 'CiliumNode', ...(object as object) };
}

export class KubernetesRequestError extends Error {
  constructor(
    what: string,
    readonly status: number,
    readonly body: unknown,
  ) {
    super(`${what}: ${status} ${JSON.stringify(body)}`);
  }
}

/**
 * Every CiliumNode version the server stores, in order: one watch from the resourceVersion of an
 * initial LIST, re-opened from the last event it saw when the server ends it (watch timeouts).
 */
class WatchRecorder {
  readonly versions: ObservedVersion[] = [];
  private lastResourceVersion: string;
  private readonly listeners = new Set<(version: ObservedVersion) => void>();
  private readonly waiters: { resourceVersion: number; resolve: () => void }[] = [];
  private closeWatch: () => void = () => {};
  private stopped = false;
  /** The server ended the watch with a 410 Status event: our resourceVersion is gone from its history. */
  private expired = false;

  private constructor(
    private readonly admin: HttpsJsonClient,
    resourceVersion: string,
  ) {
    this.lastResourceVersion = resourceVersion;
  }

  static async start(admin: HttpsJsonClient): Promise<WatchRecorder> {
    const { body } = await admin.request('GET', CILIUMNODES);
    const recorder = new WatchRecorder(
      admin,
      (body as { metadata: { resourceVersion: string } }).metadata.resourceVersion,
    );
    await recorder.open();
    return recorder;
  }

  subscribe(listener: (version: ObservedVersion) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Resolves once an event (or bookmark) at or past `resourceVersion` arrived. */
  seen(resourceVersion: string): Promise<void> {
    if (Number(this.lastResourceVersion) >= Number(resourceVersion)) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ resourceVersion: Number(resourceVersion), resolve }));
  }

  /**
   * Forgets every version recorded so far, once the watch has delivered all of them: a marker
   * object is created and deleted, and its DELETED event (in resourceVersion order, after every
   * earlier event) is the cut.
   */
  async forget(admin: HttpsJsonClient): Promise<void> {
    const name = `history-cut-${Date.now()}-${Math.random().toString(36).slice(2)}.invalid`;
    const cut = new Promise<void>((resolve) => {
      const unsubscribe = this.subscribe((version) => {
        if (version.name === name && version.type === 'DELETED') {
          unsubscribe();
          resolve();
        }
      });
    });
    const created = await admin.request('POST', CILIUMNODES, withKind({ metadata: { name }, spec: {} }));
    if (created.status >= 300) throw new KubernetesRequestError('history cut', created.status, created.body);
    await admin.request('DELETE', `${CILIUMNODES}/${name}`);
    await cut;
    this.versions.length = 0;
  }

  stop(): void {
    this.stopped = true;
    this.closeWatch();
  }

  private async open(): Promise<void> {
    const query = `?watch=true&allowWatchBookmarks=true&resourceVersion=${this.lastResourceVersion}`;
    const watch = await this.admin.watch(`${CILIUMNODES}${query}`, (event) => this.onEvent(event));
    this.closeWatch = watch.close;
    void watch.ended.then(() => this.reopen());
  }

  private async reopen(): Promise<void> {
    while (!this.stopped) {
      try {
        if (this.expired) await this.relist();
        await this.open();
        return;
      } catch (error) {
        // A restarted server's watch cache begins after our last event (410 Gone, as a refusal or
        // as an ERROR event in the stream): list again, as any watcher must, and record what the
        // list shows. Otherwise it is still down, or not yet ready: retry.
        if (error instanceof WatchRefusedError && error.status === 410) this.expired = true;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  }

  private async relist(): Promise<void> {
    const { status, body } = await this.admin.request('GET', CILIUMNODES);
    if (status !== 200) throw new KubernetesRequestError('relist', status, body);
    const list = body as { metadata: { resourceVersion: string }; items: CiliumNodeObject[] };
    for (const object of list.items) {
      if (this.versions.some((version) => version.resourceVersion === object.metadata.resourceVersion))
        continue;
      this.onEvent({ type: 'MODIFIED', object });
    }
    this.lastResourceVersion = list.metadata.resourceVersion;
    this.expired = false;
    this.resolveWaiters();
  }

  private onEvent(event: unknown): void {
    const { type, object } = event as { type: string; object: CiliumNodeObject };
    if (type === 'ERROR') {
      if ((object as unknown as { code?: number }).code === 410) this.expired = true;
      return;
    }
    this.lastResourceVersion = object.metadata.resourceVersion ?? this.lastResourceVersion;
    if (type !== 'BOOKMARK') {
      const version: ObservedVersion = {
        resourceVersion: this.lastResourceVersion,
        name: object.metadata.name,
        type: type as ObservedVersion['type'],
        object,
      };
      this.versions.push(version);
      for (const listener of this.listeners) listener(version);
    }
    this.resolveWaiters();
  }

  private resolveWaiters(): void {
    const current = Number(this.lastResourceVersion);
    for (const waiter of this.waiters.filter((candidate) => candidate.resourceVersion <= current)) {
      this.waiters.splice(this.waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  }
}
