import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConfigMapStore } from './configmaps.ts';
import { Faults, RequestLog } from './faults.ts';
import { DEFAULT_TOKEN, kubeconfigYaml, writeKubeconfig } from './kubeconfig.ts';
import { type Identity, RbacAuthorizer } from './rbac.ts';
import type { SchemaVersion } from './schema.ts';
import { createRequestHandler } from './server.ts';
import { CiliumNodeStore, type HistoryEntry } from './store.ts';
import { WatchHub } from './watch.ts';

/**
 * A Kubernetes API emulator for `cilium.io/v2` `ciliumnodes` (and reads of core ConfigMaps): plain HTTP on 127.0.0.1 that the
 * real @kubernetes/client-node reaches through a kubeconfig. See the modules for the API-server
 * behaviour each part mirrors: store.ts (write semantics), schema.ts (CRD pruning and
 * validation), watch.ts, server.ts (routing, patch types, errors), faults.ts.
 */

export { type ConfigMapObject, ConfigMapStore } from './configmaps.ts';
export type {
  FaultKind,
  FaultMatch,
  FaultRule,
  Faults,
  InjectedFault,
  RequestLog,
  RequestRecord,
  RequestVerb,
} from './faults.ts';
export { DEFAULT_TOKEN, kubeconfigYaml, writeKubeconfig } from './kubeconfig.ts';
export { ADMIN_IDENTITY, type Identity, RbacAuthorizer, RbacError } from './rbac.ts';
export {
  CRD_OF_MULTI_POOL_CLUSTERS,
  DEFAULT_SCHEMAS,
  SCHEMA_VERSIONS,
  type SchemaVersion,
} from './schema.ts';
export { ApiError, type KubeStatus } from './status.ts';
export {
  type CiliumNodeObject,
  CiliumNodeStore,
  type HistoryEntry,
  type ObjectMeta,
  type StoreOptions,
  type Subresource,
  type WriteVerb,
} from './store.ts';

export interface EmulatorOptions {
  /** Port on 127.0.0.1; default a free one. */
  port?: number;
  /**
   * CRD generations every object must validate against; the first one prunes. Default
   * `DEFAULT_SCHEMAS` (all four, v1.19-dev first).
   */
  schemas?: readonly SchemaVersion[];
  /** Require `Authorization: Bearer <requireToken>` on every request (401 otherwise). */
  requireToken?: string;
  /**
   * Bearer token → identity (user and groups). When given, only these tokens authenticate and each
   * request is authorized against `rbac`; default: the kubeconfig's token is a cluster admin.
   */
  identities?: Readonly<Record<string, Identity>>;
  /** ClusterRoles, ClusterRoleBindings, Roles and RoleBindings the identities are authorized by (RBAC). */
  rbac?: readonly unknown[];
  /** How many of the newest writes a watch can replay; older resourceVersions get 410. Default all. */
  historyWindow?: number;
  /** Clock for creationTimestamp and deletionTimestamp. */
  now?: () => Date;
}

export interface K8sEmulator {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  /** The token the kubeconfig carries (`requireToken` when set). */
  readonly token: string;
  readonly store: CiliumNodeStore;
  /** Core ConfigMaps (e.g. `kube-system/cilium-config`), put here by tests; clients GET them. */
  readonly configMaps: ConfigMapStore;
  readonly faults: Faults;
  readonly requests: RequestLog;
  /** Every stored version (of one object, or all) in order; see `HistoryEntry`. */
  history(name?: string): HistoryEntry[];
  /** Watch streams currently open (await this to know a watcher is established). */
  openWatches(): number;
  /** Sends a BOOKMARK to every open watch that allows bookmarks; returns how many got one. */
  sendBookmarks(): number;
  kubeconfigYaml(): string;
  /** Writes a kubeconfig file (into `dir`, default a temp dir) carrying `token` (default `token`); returns its path. */
  writeKubeconfig(dir?: string, token?: string): string;
  /** Ends open watch streams and connections, then stops listening. */
  close(): Promise<void>;
}

export async function start(options: EmulatorOptions = {}): Promise<K8sEmulator> {
  const store = new CiliumNodeStore({
    ...(options.schemas !== undefined ? { schemas: options.schemas } : {}),
    ...(options.historyWindow !== undefined ? { historyWindow: options.historyWindow } : {}),
    ...(options.now !== undefined ? { now: options.now } : {}),
  });
  const configMaps = new ConfigMapStore(options.now);
  const watches = new WatchHub(store);
  const faults = new Faults(() => watches.dropAll());
  const requests = new RequestLog();
  const server = createServer(
    createRequestHandler({
      store,
      configMaps,
      watches,
      faults,
      requests,
      requiredToken: options.requireToken,
      identities: options.identities === undefined ? undefined : new Map(Object.entries(options.identities)),
      rbac: new RbacAuthorizer(options.rbac ?? []),
    }),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://127.0.0.1:${port}`;
  const token = options.requireToken ?? DEFAULT_TOKEN;
  return {
    url,
    token,
    store,
    configMaps,
    faults,
    requests,
    history: (name) => store.history(name),
    openWatches: () => watches.count(),
    sendBookmarks: () => watches.sendBookmarks(),
    kubeconfigYaml: () => kubeconfigYaml(url, token),
    writeKubeconfig: (dir, kubeconfigToken = token) => writeKubeconfig(url, dir, kubeconfigToken),
    close: async () => {
      watches.endAll();
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) =>
        server.close((error) => (error ? reject(error) : resolve())),
      );
    },
  };
}

/** Alias of `start` for callers that import several emulators. */
export const startK8sEmulator = start;
