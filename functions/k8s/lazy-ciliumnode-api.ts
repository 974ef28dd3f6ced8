import type { CiliumNode, CiliumNodePort, JsonPatchOperation } from '../core/ciliumnode.ts';
import type { CiliumNodeList, CiliumNodeWatchEvent, CiliumNodeWatchPort } from '../core/ports.ts';
import type { KubernetesCiliumNodeApi } from './ciliumnode-api.ts';
import type { KubeConfigDependencies } from './kube-config.ts';
import type { KubernetesConnection } from './kube-connection.ts';

/**
 * `KubernetesCiliumNodeApi`, with @kubernetes/client-node (about half of a function's bundle, and
 * of its module initialisation) loaded on first use instead of at cold start. A handler calls
 * `prepare()` when its invocation starts, so the load overlaps its first AWS round trip rather
 * than lengthening the init phase; every call awaits the same single load.
 */
export class LazyCiliumNodeApi implements CiliumNodePort, CiliumNodeWatchPort {
  private loaded: Promise<KubernetesCiliumNodeApi> | undefined;

  constructor(
    private readonly connection: KubernetesConnection,
    private readonly dependencies: KubeConfigDependencies,
    private readonly options: { fieldManager?: string; listPageSize?: number } = {},
  ) {}

  /** Starts loading the client (idempotent); a failure surfaces on the first call. */
  prepare(): void {
    this.api().catch(() => {});
  }

  private api(): Promise<KubernetesCiliumNodeApi> {
    this.loaded ??= Promise.all([import('./ciliumnode-api.ts'), import('./kube-config.ts')]).then(
      ([{ KubernetesCiliumNodeApi }, { buildKubeConfig }]) =>
        new KubernetesCiliumNodeApi(buildKubeConfig(this.connection, this.dependencies), this.options),
    );
    return this.loaded;
  }

  async get(name: string): Promise<CiliumNode | undefined> {
    return (await this.api()).get(name);
  }

  async create(object: CiliumNode): Promise<CiliumNode> {
    return (await this.api()).create(object);
  }

  async patchMain(name: string, operations: readonly JsonPatchOperation[]): Promise<CiliumNode> {
    return (await this.api()).patchMain(name, operations);
  }

  async patchStatus(name: string, operations: readonly JsonPatchOperation[]): Promise<CiliumNode> {
    return (await this.api()).patchStatus(name, operations);
  }

  async list(): Promise<CiliumNode[]> {
    return (await this.api()).list();
  }

  async listWithResourceVersion(): Promise<CiliumNodeList> {
    return (await this.api()).listWithResourceVersion();
  }

  async watch(
    resourceVersion: string,
    onEvent: (event: CiliumNodeWatchEvent) => void,
    signal: AbortSignal,
  ): Promise<void> {
    return (await this.api()).watch(resourceVersion, onEvent, signal);
  }
}
