import type { ConfigMapReader } from '../core/ports.ts';
import type { KubernetesConfigMapReader } from './configmap-api.ts';
import type { KubeConfigDependencies } from './kube-config.ts';
import type { KubernetesConnection } from './kube-connection.ts';

/**
 * `KubernetesConfigMapReader`, with @kubernetes/client-node loaded on the first `read()` instead of
 * at cold start (as `LazyCiliumNodeApi` does for CiliumNodes); every read awaits the same load.
 */
export class LazyConfigMapReader implements ConfigMapReader {
  readonly name: string;
  private loaded: Promise<KubernetesConfigMapReader> | undefined;

  constructor(
    private readonly connection: KubernetesConnection,
    private readonly dependencies: KubeConfigDependencies,
    private readonly location: { readonly namespace: string; readonly name: string },
  ) {
    this.name = `${location.namespace}/${location.name}`;
  }

  async read(): Promise<Readonly<Record<string, string>> | undefined> {
    this.loaded ??= Promise.all([import('./configmap-api.ts'), import('./kube-config.ts')]).then(
      ([{ KubernetesConfigMapReader }, { buildKubeConfig }]) =>
        new KubernetesConfigMapReader(buildKubeConfig(this.connection, this.dependencies), this.location),
    );
    return (await this.loaded).read();
  }
}
