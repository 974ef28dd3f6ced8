import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CILIUMNODE_ALLOCATOR,
  CILIUMNODE_WATCHER,
  CILIUMNODE_WRITER,
  rbacObjects,
} from '../../../infra/kubernetes-access.ts';
import { DEFAULT_TOKEN, type K8sEmulator, kubeconfigYaml, startK8sEmulator } from './index.ts';
import { apiError, CILIUM_NODES, exampleCiliumNode, mergePatch } from './test-helpers.ts';

const ALLOCATOR_TOKEN = 'allocator-token';
const WATCHER_TOKEN = 'watcher-token';
const WRITER_TOKEN = 'writer-token';

let emulator: K8sEmulator;

function apiAs(token: string): CustomObjectsApi {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromString(kubeconfigYaml(emulator.url, token));
  return kubeConfig.makeApiClient(CustomObjectsApi);
}

function coreAs(token: string): CoreV1Api {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromString(kubeconfigYaml(emulator.url, token));
  return kubeConfig.makeApiClient(CoreV1Api);
}

beforeAll(async () => {
  emulator = await startK8sEmulator({
    identities: {
      [DEFAULT_TOKEN]: { user: 'kubernetes-admin', groups: ['system:masters'] },
      [ALLOCATOR_TOKEN]: { user: 'allocate', groups: [CILIUMNODE_ALLOCATOR.name] },
      [WATCHER_TOKEN]: { user: 'watch', groups: [CILIUMNODE_WATCHER.name] },
      [WRITER_TOKEN]: { user: 'sync', groups: [CILIUMNODE_WRITER.name] },
    },
    rbac: rbacObjects(),
  });
  emulator.store.create(exampleCiliumNode('node-a'));
});
afterAll(() => emulator.close());

const node = { ...CILIUM_NODES, name: 'node-a' };
const statusPatch = { ...node, body: { status: { ipam: { 'operator-status': { error: '' } } } } };

describe('RBAC of the functions’ groups', () => {
  it('lets the watcher group list, and forbids it get and every write with 403 Forbidden', async () => {
    const watcher = apiAs(WATCHER_TOKEN);
    await expect(watcher.listClusterCustomObject(CILIUM_NODES)).resolves.toMatchObject({ items: [{}] });
    expect((await apiError(watcher.getClusterCustomObject(node))).code).toBe(403);
    const denied = await apiError(watcher.patchClusterCustomObjectStatus(statusPatch, mergePatch()));
    expect(denied.code).toBe(403);
    expect(denied.status).toMatchObject({
      reason: 'Forbidden',
      message:
        'ciliumnodes.cilium.io "node-a" is forbidden: User "watch" cannot patch resource "ciliumnodes/status" in API group "cilium.io" at the cluster scope',
    });
    const create = watcher.createClusterCustomObject({ ...CILIUM_NODES, body: exampleCiliumNode('node-b') });
    expect((await apiError(create)).code).toBe(403);
    expect(emulator.store.get('node-b')).toBeUndefined();
  });

  it('lets the writer group create and patch main and status, but not delete, update or watch', async () => {
    const writer = apiAs(WRITER_TOKEN);
    await writer.patchClusterCustomObjectStatus(statusPatch, mergePatch());
    await writer.patchClusterCustomObject(
      { ...node, body: { metadata: { labels: { a: 'b' } } } },
      mergePatch(),
    );
    expect((await apiError(writer.deleteClusterCustomObject(node))).code).toBe(403);
    const current = emulator.store.get('node-a');
    expect((await apiError(writer.replaceClusterCustomObject({ ...node, body: current }))).code).toBe(403);
    const watch = await fetch(`${emulator.url}/apis/cilium.io/v2/ciliumnodes?watch=true`, {
      headers: { authorization: `Bearer ${WRITER_TOKEN}` },
    });
    expect(watch.status).toBe(403);
    expect(emulator.store.get('node-a')?.metadata.labels).toEqual({ a: 'b' });
  });

  it('lets the allocator group get cilium-config in its namespace, and nothing else of ConfigMaps (403)', async () => {
    emulator.configMaps.put('kube-system', 'cilium-config', { 'eni-first-interface-index': '1' });
    emulator.configMaps.put('kube-system', 'aws-auth', { mapRoles: '[]' });
    emulator.configMaps.put('default', 'cilium-config', { ipam: 'eni' });
    const reader = coreAs(ALLOCATOR_TOKEN);
    await expect(
      reader.readNamespacedConfigMap({ namespace: 'kube-system', name: 'cilium-config' }),
    ).resolves.toMatchObject({ data: { 'eni-first-interface-index': '1' } });
    const otherName = await apiError(
      reader.readNamespacedConfigMap({ namespace: 'kube-system', name: 'aws-auth' }),
    );
    expect(otherName.code).toBe(403);
    expect(otherName.status).toMatchObject({
      reason: 'Forbidden',
      message:
        'configmaps "aws-auth" is forbidden: User "allocate" cannot get resource "configmaps" in API group "" in the namespace "kube-system"',
    });
    const otherNamespace = reader.readNamespacedConfigMap({ namespace: 'default', name: 'cilium-config' });
    expect((await apiError(otherNamespace)).code).toBe(403);
    // resourceNames never grant a list.
    expect((await apiError(reader.listNamespacedConfigMap({ namespace: 'kube-system' }))).code).toBe(403);
    const writer = coreAs(WRITER_TOKEN);
    const asWriter = writer.readNamespacedConfigMap({ namespace: 'kube-system', name: 'cilium-config' });
    expect((await apiError(asWriter)).code).toBe(403);
    // An admin may read anything; a missing ConfigMap is 404 to whoever may read it.
    await expect(
      coreAs(DEFAULT_TOKEN).listNamespacedConfigMap({ namespace: 'kube-system' }),
    ).resolves.toMatchObject({
      items: [{ metadata: { name: 'aws-auth' } }, { metadata: { name: 'cilium-config' } }],
    });
    emulator.configMaps.delete('kube-system', 'cilium-config');
    const missing = reader.readNamespacedConfigMap({ namespace: 'kube-system', name: 'cilium-config' });
    expect((await apiError(missing)).code).toBe(404);
    expect(emulator.requests.count({ resource: 'configmaps', user: 'allocate', statusCode: 403 })).toBe(3);
  });

  it('answers 401 to an unknown token and records who asked', async () => {
    const stolen = await fetch(`${emulator.url}/apis/cilium.io/v2/ciliumnodes/node-a`, {
      headers: { authorization: 'Bearer stolen' },
    });
    expect(stolen.status).toBe(401);
    expect(emulator.requests.count({ user: 'allocate', statusCode: 403 })).toBe(3);
    expect(emulator.requests.count({ user: 'watch', statusCode: 403 })).toBe(3);
    // Only the admin's one ConfigMap list above.
    expect(emulator.requests.count({ user: 'kubernetes-admin' })).toBe(1);
  });
});
