import { randomUUID } from 'node:crypto';

/**
 * Core `v1` ConfigMaps, as far as the functions use them: a test (acting as the cluster admin who
 * installed cilium) puts and deletes them here; clients may GET one or LIST a namespace's over
 * HTTP (`/api/v1/namespaces/<ns>/configmaps[/<name>]`), authorized by RBAC like every request.
 */
export interface ConfigMapObject {
  apiVersion: 'v1';
  kind: 'ConfigMap';
  metadata: {
    name: string;
    namespace: string;
    uid: string;
    resourceVersion: string;
    creationTimestamp: string;
  };
  data: Record<string, string>;
}

export class ConfigMapStore {
  private readonly objects = new Map<string, ConfigMapObject>();
  private version = 0;

  constructor(private readonly now: () => Date = () => new Date()) {}

  /** Creates or replaces the ConfigMap; returns it. */
  put(namespace: string, name: string, data: Readonly<Record<string, string>>): ConfigMapObject {
    const existing = this.objects.get(key(namespace, name));
    const object: ConfigMapObject = {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: {
        name,
        namespace,
        uid: existing?.metadata.uid ?? randomUUID(),
        resourceVersion: String(++this.version),
        creationTimestamp: existing?.metadata.creationTimestamp ?? this.now().toISOString(),
      },
      data: { ...data },
    };
    this.objects.set(key(namespace, name), object);
    return structuredClone(object);
  }

  delete(namespace: string, name: string): boolean {
    return this.objects.delete(key(namespace, name));
  }

  get(namespace: string, name: string): ConfigMapObject | undefined {
    const object = this.objects.get(key(namespace, name));
    return object === undefined ? undefined : structuredClone(object);
  }

  list(namespace: string): ConfigMapObject[] {
    return [...this.objects.values()]
      .filter((object) => object.metadata.namespace === namespace)
      .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))
      .map((object) => structuredClone(object));
  }

  get resourceVersion(): string {
    return String(this.version);
  }
}

function key(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}
