import { ApiException } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  type CiliumNode,
  CiliumNodeNotFoundError,
  ResourceVersionConflictError,
} from '../../../functions/core/ciliumnode.ts';
import { KubernetesCiliumNodeApi } from '../../../functions/k8s/ciliumnode-api.ts';
import { buildKubeConfig, kubernetesConnectionFromEnv } from '../../../functions/k8s/kube-config.ts';
import { type K8sEmulator, start } from '../../emulators/k8s/index.ts';

/** The client-node adapter against the Kubernetes emulator: shapes on the wire and error mapping. */

let emulator: K8sEmulator;
let api: KubernetesCiliumNodeApi;

beforeEach(async () => {
  emulator = await start();
  const kubeConfig = buildKubeConfig(
    kubernetesConnectionFromEnv({ KUBECONFIG: emulator.writeKubeconfig() }),
    {
      credentials: async () => {
        throw new Error('not used with a kubeconfig');
      },
    },
  );
  api = new KubernetesCiliumNodeApi(kubeConfig, { listPageSize: 2 });
});
afterEach(async () => {
  await emulator.close();
});

const ciliumNode = (name: string): CiliumNode => ({
  apiVersion: 'cilium.io/v2',
  kind: 'CiliumNode',
  metadata: { name },
  spec: { 'instance-id': 'i-0123456789abcdef0', ipam: { pool: {} } },
});

describe('KubernetesCiliumNodeApi', () => {
  it('answers undefined for a missing CiliumNode and returns stored objects', async () => {
    expect(await api.get('absent')).toBeUndefined();
    const created = await api.create(ciliumNode('n1'));
    expect(created.metadata.resourceVersion).toBeDefined();
    expect(await api.get('n1')).toEqual(created);
  });

  it('sends JSON Patch to the main resource and to /status, with our field manager', async () => {
    const created = await api.create(ciliumNode('n1'));
    const test = {
      op: 'test',
      path: '/metadata/resourceVersion',
      value: created.metadata.resourceVersion,
    } as const;
    const patched = await api.patchStatus('n1', [
      test,
      { op: 'add', path: '/status', value: { ipam: { 'operator-status': { error: 'x' } } } },
    ]);
    expect(patched.status?.ipam?.['operator-status']).toEqual({ error: 'x' });
    await api.patchMain('n1', [
      { ...test, value: patched.metadata.resourceVersion },
      { op: 'add', path: '/spec/ipam/pool/10.0.0.5', value: { resource: 'eni-1' } },
    ]);
    const patches = emulator.requests.all({ verb: 'patch' });
    expect(patches.map((request) => [request.subresource, request.contentType])).toEqual([
      ['status', 'application/json-patch+json'],
      ['main', 'application/json-patch+json'],
    ]);
    expect(patches.every((request) => request.query.includes('fieldManager=serverless-eni-ipam'))).toBe(true);
  });

  it.each([
    { case: 'main', patch: (name: string, ops: never[]) => api.patchMain(name, ops) },
    { case: 'status', patch: (name: string, ops: never[]) => api.patchStatus(name, ops) },
  ])(
    'maps a failed resourceVersion test (422) and a 409 to ResourceVersionConflictError ($case)',
    async ({ patch }) => {
      await api.create(ciliumNode('n1'));
      const stale = [{ op: 'test', path: '/metadata/resourceVersion', value: '999' }] as never[];
      await expect(patch('n1', stale)).rejects.toBeInstanceOf(ResourceVersionConflictError);
      emulator.faults.inject({ match: { verb: 'patch' }, kind: 'conflict' });
      await expect(patch('n1', [])).rejects.toBeInstanceOf(ResourceVersionConflictError);
    },
  );

  it('maps AlreadyExists on create to ResourceVersionConflictError and 404 on patch to CiliumNodeNotFoundError', async () => {
    await api.create(ciliumNode('n1'));
    await expect(api.create(ciliumNode('n1'))).rejects.toBeInstanceOf(ResourceVersionConflictError);
    await expect(api.patchMain('absent', [])).rejects.toBeInstanceOf(CiliumNodeNotFoundError);
    await expect(api.patchStatus('absent', [])).rejects.toBeInstanceOf(CiliumNodeNotFoundError);
  });

  it('passes other failures through untouched: a schema-invalid patch (422 Invalid) and a 500', async () => {
    await api.create(ciliumNode('n1'));
    const invalid = api.patchMain('n1', [
      { op: 'add', path: '/spec/eni', value: { 'first-interface-index': -1 } },
    ]);
    await expect(invalid).rejects.toBeInstanceOf(ApiException);
    await expect(invalid).rejects.toMatchObject({ code: 422 });
    emulator.faults.inject({ match: { verb: 'get' }, kind: 'server-error' });
    await expect(api.get('n1')).rejects.toMatchObject({ code: 500 });
  });

  it('lists every CiliumNode across pages', async () => {
    for (const name of ['a', 'b', 'c', 'd', 'e']) await api.create(ciliumNode(name));
    const names = (await api.list()).map((cn) => cn.metadata.name).sort();
    expect(names).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(emulator.requests.count({ verb: 'list' })).toBe(3);
  });
});
