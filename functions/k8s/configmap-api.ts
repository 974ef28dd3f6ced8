import { ApiException, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { ConfigMapReader } from '../core/ports.ts';

/**
 * One namespaced ConfigMap over @kubernetes/client-node's CoreV1Api: a GET of that object only (the
 * RBAC grants `get` on that resource name, nothing else). 404 is `undefined`; every other error is
 * rethrown as is. Build one per container: it holds the HTTP agent and the authentication.
 */
export class KubernetesConfigMapReader implements ConfigMapReader {
  private readonly api: CoreV1Api;
  readonly name: string;

  constructor(
    kubeConfig: KubeConfig,
    private readonly location: { readonly namespace: string; readonly name: string },
  ) {
    this.api = kubeConfig.makeApiClient(CoreV1Api);
    this.name = `${location.namespace}/${location.name}`;
  }

  async read(): Promise<Readonly<Record<string, string>> | undefined> {
    try {
      const configMap = await this.api.readNamespacedConfigMap(this.location);
      return { ...(configMap.data ?? {}) };
    } catch (error) {
      if (error instanceof ApiException && error.code === 404) return undefined;
      throw error;
    }
  }
}
