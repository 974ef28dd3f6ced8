import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  FUNCTION_KUBERNETES_GROUPS,
  KUBERNETES_GROUPS,
  rbacObjects,
} from '../../../infra/kubernetes-access.ts';
import { kubectlBinary } from '../../peers/kubernetes/control-plane.ts';
import { type K8sEmulator, startK8sEmulator } from './index.ts';
import { exampleCiliumNode } from './test-helpers.ts';

/**
 * kubectl (built from k8s.io/kubectl by `npm run peers:build`) against the emulator with the
 * functions' RBAC (rbac.yaml's objects). kubectl sends no bearer token to a plain-HTTP server, so
 * every request is the admin's: `auth whoami` and `auth can-i` answer for it, `--as`/`--as-group`
 * is honoured and the impersonated function identity is answered by its group's RBAC, and
 * `delete --dry-run=server` deletes nothing. The same requests are held to kube-apiserver by the
 * differential suite.
 */

const run = promisify(execFile);
let kubernetes: K8sEmulator;
let directory: string;
let kubeconfig: string;

beforeAll(async () => {
  kubernetes = await startK8sEmulator({ rbac: rbacObjects(KUBERNETES_GROUPS) });
  directory = mkdtempSync(join(tmpdir(), 'kubectl-emulator-'));
  kubeconfig = kubernetes.writeKubeconfig(directory);
  kubernetes.store.create(exampleCiliumNode('kubectl-node'));
});

afterAll(async () => {
  await kubernetes?.close();
  rmSync(directory, { recursive: true, force: true });
});

async function kubectl(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(kubectlBinary(), args, {
      env: { PATH: process.env.PATH, HOME: directory, KUBECONFIG: kubeconfig },
      timeout: 30_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

describe('kubectl against the Kubernetes emulator', () => {
  it('auth whoami answers for the admin, and for whom it impersonates, whose RBAC then applies', async () => {
    const whoami = await kubectl('auth', 'whoami', '-o', 'jsonpath={.status.userInfo.username}');
    expect(whoami, whoami.stderr).toMatchObject({ code: 0, stdout: 'kubernetes-admin' });
    const sync = {
      user: 'arn:aws:sts::123456789012:assumed-role/SyncRole/Sync',
      group: FUNCTION_KUBERNETES_GROUPS.Sync.name,
    };
    const asSync = ['--as', sync.user, '--as-group', sync.group];
    const whoIsSync = await kubectl(...asSync, 'auth', 'whoami', '-o', 'jsonpath={.status.userInfo.groups}');
    expect(JSON.parse(whoIsSync.stdout)).toEqual([sync.group, 'system:authenticated']);
    const refused = await kubectl(...asSync, 'delete', 'ciliumnode', 'kubectl-node');
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('Forbidden');
    // Its group may patch CiliumNodes: the same identity's annotate goes through.
    const patched = await kubectl(...asSync, 'annotate', 'ciliumnode', 'kubectl-node', 'checked=yes');
    expect(patched, patched.stderr).toMatchObject({ code: 0 });
  });

  it('auth can-i is refused cleanly: kubectl sends the review as protobuf, which the emulator does not decode', async () => {
    const canI = await kubectl('auth', 'can-i', 'delete', 'ciliumnodes');
    expect(canI.code).not.toBe(0);
    expect(canI.stderr).toContain('Error from server (UnsupportedMediaType)');
  });

  it('delete --dry-run=server answers as deleted and keeps the object', async () => {
    const dryRun = await kubectl('delete', 'ciliumnode', 'kubectl-node', '--dry-run=server');
    expect(dryRun, dryRun.stderr).toMatchObject({ code: 0 });
    expect(dryRun.stdout).toContain('(server dry run)');
    expect((await kubectl('get', 'ciliumnode', 'kubectl-node', '-o', 'name')).stdout.trim()).toBe(
      'ciliumnode.cilium.io/kubectl-node',
    );
  });
});
