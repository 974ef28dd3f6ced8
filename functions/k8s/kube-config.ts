import { KubeConfig } from '@kubernetes/client-node';
import { ConfigurationError } from '../core/errors.ts';
import { type AwsCredentialsProvider, createEksTokenSource } from './eks-token.ts';

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

export interface KubeConfigDependencies {
  /** AWS credentials for the EKS token (e.g. any SDK client's `config.credentials`). */
  readonly credentials: AwsCredentialsProvider;
  /** Clock for token reuse; default the system clock. */
  readonly now?: () => Date;
}

/** The user name under which the EKS token authenticator is registered. */
const EKS_IAM_USER = 'serverless-eni-ipam-eks-iam';

/**
 * A client-node KubeConfig for the connection. For EKS, no token is stored in the config: an
 * authenticator adds a fresh-enough IAM token (cached under 14 minutes) to every request, so a
 * container that lives for hours keeps working with the one KubeConfig built at cold start.
 */
export function buildKubeConfig(
  connection: KubernetesConnection,
  dependencies: KubeConfigDependencies,
): KubeConfig {
  const kubeConfig = new KubeConfig();
  if (connection.kind === 'kubeconfig') {
    kubeConfig.loadFromFile(connection.path);
    return kubeConfig;
  }
  kubeConfig.loadFromClusterAndUser(
    {
      name: connection.clusterName,
      server: connection.endpoint,
      caData: connection.certificateAuthorityData,
      skipTLSVerify: false,
    },
    { name: EKS_IAM_USER },
  );
  const token = createEksTokenSource({
    clusterName: connection.clusterName,
    region: connection.region,
    credentials: dependencies.credentials,
    ...(dependencies.now ? { now: dependencies.now } : {}),
  });
  kubeConfig.addAuthenticator({
    isAuthProvider: (user) => user.name === EKS_IAM_USER,
    applyAuthentication: async (_user, options) => {
      options.headers = { ...options.headers, Authorization: `Bearer ${await token()}` };
    },
  });
  return kubeConfig;
}
