import type https from 'node:https';
import { describe, expect, it } from 'vitest';
import { ConfigurationError } from '../../../functions/core/errors.ts';
import { EKS_TOKEN_PREFIX } from '../../../functions/k8s/eks-token.ts';
import { buildKubeConfig, kubernetesConnectionFromEnv } from '../../../functions/k8s/kube-config.ts';

const eksVariables = {
  EKS_CLUSTER_NAME: 'prod',
  EKS_ENDPOINT: 'https://ABCDEF.gr7.us-west-2.eks.amazonaws.com',
  EKS_CA_DATA: Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString(
    'base64',
  ),
  AWS_REGION: 'us-west-2',
};

describe('kubernetesConnectionFromEnv', () => {
  it('prefers KUBECONFIG over the EKS variables', () => {
    expect(kubernetesConnectionFromEnv({ ...eksVariables, KUBECONFIG: '/etc/kube/config' })).toEqual({
      kind: 'kubeconfig',
      path: '/etc/kube/config',
    });
  });

  it('reads the EKS connection', () => {
    expect(kubernetesConnectionFromEnv(eksVariables)).toEqual({
      kind: 'eks',
      clusterName: 'prod',
      endpoint: eksVariables.EKS_ENDPOINT,
      certificateAuthorityData: eksVariables.EKS_CA_DATA,
      region: 'us-west-2',
    });
  });

  it.each([
    { case: 'cluster name', drop: 'EKS_CLUSTER_NAME' },
    { case: 'endpoint', drop: 'EKS_ENDPOINT' },
    { case: 'CA bundle', drop: 'EKS_CA_DATA' },
    { case: 'region', drop: 'AWS_REGION' },
  ])('names the missing $case', ({ drop }) => {
    const variables: Record<string, string | undefined> = { ...eksVariables, [drop]: '  ' };
    expect(() => kubernetesConnectionFromEnv(variables)).toThrow(ConfigurationError);
    expect(() => kubernetesConnectionFromEnv(variables)).toThrow(new RegExp(`^${drop} is not set`));
  });

  it('refuses a plain-http EKS endpoint', () => {
    expect(() => kubernetesConnectionFromEnv({ ...eksVariables, EKS_ENDPOINT: 'http://x' })).toThrow(/https/);
  });
});

describe('buildKubeConfig for EKS', () => {
  it('authenticates every request with a cached IAM token and trusts only the given CA', async () => {
    let credentialCalls = 0;
    let nowMs = Date.parse('2024-03-05T06:07:08Z');
    const kubeConfig = buildKubeConfig(kubernetesConnectionFromEnv(eksVariables), {
      credentials: async () => {
        credentialCalls += 1;
        return { accessKeyId: 'AKIDEXAMPLE', secretAccessKey: 'secret' };
      },
      now: () => new Date(nowMs),
    });
    expect(kubeConfig.getCurrentCluster()).toMatchObject({
      server: eksVariables.EKS_ENDPOINT,
      skipTLSVerify: false,
    });

    const authorizationOf = async (): Promise<string> => {
      const options: https.RequestOptions = {};
      await kubeConfig.applyToHTTPSOptions(options);
      expect(String(options.ca)).toContain('BEGIN CERTIFICATE');
      return String((options.headers as Record<string, unknown> | undefined)?.Authorization);
    };
    const authorization = await authorizationOf();
    expect(authorization.startsWith(`Bearer ${EKS_TOKEN_PREFIX}`)).toBe(true);
    const url = new URL(
      Buffer.from(authorization.slice(`Bearer ${EKS_TOKEN_PREFIX}`.length), 'base64url').toString('utf8'),
    );
    expect(url.host).toBe('sts.us-west-2.amazonaws.com');
    expect(url.searchParams.get('X-Amz-SignedHeaders')).toBe('host;x-k8s-aws-id');

    expect(await authorizationOf()).toBe(authorization);
    expect(credentialCalls).toBe(1);

    nowMs += 11 * 60_000;
    expect(await authorizationOf()).not.toBe(authorization);
    expect(credentialCalls).toBe(2);
  });
});
