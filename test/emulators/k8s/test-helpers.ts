import {
  ApiException,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  Watch,
} from '@kubernetes/client-node';
import type { K8sEmulator, KubeStatus } from './index.ts';

/** Test support: the real @kubernetes/client-node pointed at an emulator, and a sample CiliumNode. */

export const CILIUM_NODES = { group: 'cilium.io', version: 'v2', plural: 'ciliumnodes' } as const;
export const COLLECTION_PATH = '/apis/cilium.io/v2/ciliumnodes';

/** Second argument of a patch call to send `application/merge-patch+json` (client-node defaults to JSON patch). */
export const mergePatch = () => setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export function clientsFor(emulator: K8sEmulator): {
  kubeConfig: KubeConfig;
  api: CustomObjectsApi;
  watch: Watch;
} {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromString(emulator.kubeconfigYaml());
  return { kubeConfig, api: kubeConfig.makeApiClient(CustomObjectsApi), watch: new Watch(kubeConfig) };
}

/** Awaits a call that must fail and returns the HTTP code and the decoded Status body. */
export async function apiError(call: Promise<unknown>): Promise<{ code: number; status: KubeStatus }> {
  try {
    await call;
  } catch (error) {
    if (error instanceof ApiException) {
      return { code: error.code, status: JSON.parse(error.body as string) as KubeStatus };
    }
    throw error;
  }
  throw new Error('expected the API call to fail');
}

/**
 * A minimal CRD-protocol CiliumNode, consistent with cilium's types (functions/core/ciliumnode.ts):
 * one ENI at device index 0 (so `number` is absent), its pool IPs in status, one used.
 */
export function exampleCiliumNode(name = 'ip-10-0-1-10.ec2.internal') {
  return {
    apiVersion: 'cilium.io/v2',
    kind: 'CiliumNode',
    metadata: { name },
    spec: {
      'instance-id': 'i-0abc',
      eni: {
        'instance-type': 'm5.large',
        'vpc-id': 'vpc-1',
        'availability-zone': 'us-east-1a',
        'node-subnet-id': 'subnet-a',
        'first-interface-index': 0,
        'use-primary-address': false,
        'disable-prefix-delegation': false,
        'delete-on-termination': true,
      },
      ipam: {
        'pre-allocate': 8,
        pool: { '10.0.1.20': { resource: 'eni-0a' }, '10.0.1.21': { resource: 'eni-0a' } },
      },
    },
    status: {
      eni: {
        enis: {
          'eni-0a': {
            id: 'eni-0a',
            ip: '10.0.1.10',
            mac: '02:aa:bb:cc:dd:ee',
            description: '',
            subnet: { id: 'subnet-a', cidr: '10.0.1.0/24' },
            vpc: { id: 'vpc-1', 'primary-cidr': '10.0.0.0/16' },
            addresses: ['10.0.1.20', '10.0.1.21'],
            'security-groups': ['sg-1'],
            tags: {},
          },
        },
      },
      ipam: { used: { '10.0.1.20': { owner: 'router', resource: 'eni-0a' } } },
    },
  };
}
