import { ConfigurationError } from '../core/errors.ts';

/**
 * How the sync reaches Kubernetes, decided once per container from the environment:
 * - `KUBECONFIG` set: that kubeconfig, as kubectl would read it (any server, plain http included;
 *   how tests, the local cloud runner and non-EKS clusters connect);
 * - otherwise EKS IAM authentication against the configured cluster: `EKS_CLUSTER_NAME`,
 *   `EKS_ENDPOINT` (https) and `EKS_CA_DATA` (base64 PEM, as DescribeCluster returns it), with
 *   the region from `AWS_REGION`.
 */
export type KubernetesConnection =
  | { readonly kind: 'kubeconfig'; readonly path: string }
  | {
      readonly kind: 'eks';
      readonly clusterName: string;
      readonly endpoint: string;
      readonly certificateAuthorityData: string;
      readonly region: string;
    };

/** Reads the connection settings; throws `ConfigurationError` naming the first missing variable. */
export function kubernetesConnectionFromEnv(
  env: Readonly<Record<string, string | undefined>>,
): KubernetesConnection {
  const kubeconfig = env.KUBECONFIG?.trim();
  if (kubeconfig) return { kind: 'kubeconfig', path: kubeconfig };
  const required = (name: string): string => {
    const value = env[name]?.trim();
    if (!value) {
      throw new ConfigurationError(
        `${name} is not set (set KUBECONFIG, or EKS_CLUSTER_NAME, EKS_ENDPOINT, EKS_CA_DATA)`,
      );
    }
    return value;
  };
  const clusterName = required('EKS_CLUSTER_NAME');
  const endpoint = required('EKS_ENDPOINT');
  const certificateAuthorityData = required('EKS_CA_DATA');
  const region = required('AWS_REGION');
  if (!endpoint.startsWith('https://')) {
    throw new ConfigurationError(`EKS_ENDPOINT must be an https:// URL, got ${JSON.stringify(endpoint)}`);
  }
  return { kind: 'eks', clusterName, endpoint, certificateAuthorityData, region };
}
