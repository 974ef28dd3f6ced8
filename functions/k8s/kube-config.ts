import { KubeConfig } from '@kubernetes/client-node';
import { type AwsCredentialsProvider, createEksTokenSource } from './eks-token.ts';
import type { KubernetesConnection } from './kube-connection.ts';

export { type KubernetesConnection, kubernetesConnectionFromEnv } from './kube-connection.ts';

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
