import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stringify } from 'yaml';

/** The bearer token written into kubeconfigs when the caller does not choose one. */
export const DEFAULT_TOKEN = 'k8s-emulator-token';

/**
 * A kubeconfig for the emulator. @kubernetes/client-node refuses an `http://` server unless the
 * cluster has `insecure-skip-tls-verify: true` (every call otherwise throws "HTTP protocol is not
 * allowed when skipTLSVerify is not set or false").
 */
export function kubeconfigYaml(url: string, token: string = DEFAULT_TOKEN): string {
  if (!/^http:\/\/127\.\d+\.\d+\.\d+(:\d+)?\/?$/.test(url)) {
    throw new Error(`the emulator kubeconfig must point at plain HTTP on 127.0.0.0/8, got ${url}`);
  }
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'k8s-emulator', cluster: { server: url, 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'k8s-emulator', user: { token } }],
    contexts: [{ name: 'k8s-emulator', context: { cluster: 'k8s-emulator', user: 'k8s-emulator' } }],
    'current-context': 'k8s-emulator',
  });
}

/** Writes `kubeconfigYaml(url, token)` to `<dir>/kubeconfig` (a fresh temp dir by default); returns the path. */
export function writeKubeconfig(url: string, dir?: string, token: string = DEFAULT_TOKEN): string {
  const directory = dir ?? mkdtempSync(join(tmpdir(), 'k8s-emulator-'));
  const path = join(directory, 'kubeconfig');
  writeFileSync(path, kubeconfigYaml(url, token), { mode: 0o600 });
  return path;
}
