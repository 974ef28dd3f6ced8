import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  type AwsCredentials,
  createEksToken,
  createEksTokenSource,
  EKS_TOKEN_PREFIX,
} from '../../../functions/k8s/eks-token.ts';

const credentials: AwsCredentials = {
  accessKeyId: 'AKIDEXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY',
  sessionToken: 'session/token+with=specials',
};
const signingDate = new Date('2024-03-05T06:07:08Z');

/** Decodes a token back into its presigned URL. */
function urlOf(token: string): URL {
  expect(token.startsWith(EKS_TOKEN_PREFIX)).toBe(true);
  const encoded = token.slice(EKS_TOKEN_PREFIX.length);
  expect(encoded).toMatch(/^[A-Za-z0-9_-]+$/); // base64url, no padding
  return new URL(Buffer.from(encoded, 'base64url').toString('utf8'));
}

const rfc3986 = (text: string) =>
  encodeURIComponent(text).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
const sha256Hex = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');
const hmac = (key: Buffer | string, text: string) => createHmac('sha256', key).update(text, 'utf8').digest();

/**
 * An independent SigV4 query-string signature (AWS "Create a signed request", presigned URL form)
 * for GET / on STS with headers host and x-k8s-aws-id, written from the specification with
 * node:crypto only.
 */
function expectedSignature(url: URL, clusterName: string): string {
  const params = [...url.searchParams.entries()].filter(([key]) => key !== 'X-Amz-Signature');
  const canonicalQuery = params
    .map(([key, value]) => [rfc3986(key), rfc3986(value)] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([key, value]) => `${key}=${value}`)
    .join('&');
  const canonicalRequest = [
    'GET',
    '/',
    canonicalQuery,
    `host:${url.host}\nx-k8s-aws-id:${clusterName}\n`,
    'host;x-k8s-aws-id',
    sha256Hex(''),
  ].join('\n');
  const amzDate = '20240305T060708Z';
  const scope = '20240305/us-west-2/sts/aws4_request';
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256Hex(canonicalRequest)].join('\n');
  const dateKey = hmac(`AWS4${credentials.secretAccessKey}`, '20240305');
  const signingKey = hmac(hmac(hmac(dateKey, 'us-west-2'), 'sts'), 'aws4_request');
  return createHmac('sha256', signingKey).update(stringToSign, 'utf8').digest('hex');
}

describe('createEksToken', () => {
  it('presigns STS GetCallerIdentity with the cluster header signed (fixed credentials and time)', async () => {
    const token = await createEksToken({
      clusterName: 'prod-cluster',
      region: 'us-west-2',
      credentials,
      signingDate,
    });
    const url = urlOf(token);
    expect(url.origin).toBe('https://sts.us-west-2.amazonaws.com');
    expect(url.pathname).toBe('/');
    expect(Object.fromEntries(url.searchParams)).toMatchObject({
      Action: 'GetCallerIdentity',
      Version: '2011-06-15',
      'X-Amz-Algorithm': 'AWS4-HMAC-SHA256',
      'X-Amz-Credential': 'AKIDEXAMPLE/20240305/us-west-2/sts/aws4_request',
      'X-Amz-Date': '20240305T060708Z',
      'X-Amz-Expires': '60',
      'X-Amz-SignedHeaders': 'host;x-k8s-aws-id',
      'X-Amz-Security-Token': 'session/token+with=specials',
    });
    expect(url.searchParams.get('X-Amz-Signature')).toBe(expectedSignature(url, 'prod-cluster'));
    expect(token.length).toBeLessThanOrEqual(4096);
  });

  it('is deterministic for fixed inputs and changes with the cluster name', async () => {
    const request = { clusterName: 'a', region: 'us-west-2', credentials, signingDate };
    expect(await createEksToken(request)).toBe(await createEksToken(request));
    expect(await createEksToken({ ...request, clusterName: 'b' })).not.toBe(await createEksToken(request));
  });

  it('uses the China partition host for cn- regions', async () => {
    const token = await createEksToken({ clusterName: 'c', region: 'cn-north-1', credentials, signingDate });
    expect(urlOf(token).host).toBe('sts.cn-north-1.amazonaws.com.cn');
  });
});

describe('createEksTokenSource', () => {
  function source(options: { expiration?: Date } = {}) {
    let nowMs = signingDate.getTime();
    let credentialCalls = 0;
    const tokens = createEksTokenSource({
      clusterName: 'prod-cluster',
      region: 'us-west-2',
      credentials: async () => {
        credentialCalls += 1;
        return { ...credentials, ...(options.expiration ? { expiration: options.expiration } : {}) };
      },
      now: () => new Date(nowMs),
    });
    return {
      tokens,
      advance: (ms: number) => {
        nowMs += ms;
      },
      credentialCalls: () => credentialCalls,
    };
  }

  it('reuses a token for under 14 minutes (10 by default), then signs a new one', async () => {
    const { tokens, advance, credentialCalls } = source();
    const first = await tokens();
    advance(9 * 60_000 + 59_000);
    expect(await tokens()).toBe(first);
    expect(credentialCalls()).toBe(1);
    advance(1_000);
    const second = await tokens();
    expect(second).not.toBe(first);
    expect(urlOf(second).searchParams.get('X-Amz-Date')).toBe('20240305T061708Z');
  });

  it('does not reuse a token within a minute of its credentials expiring', async () => {
    const { tokens, advance, credentialCalls } = source({
      expiration: new Date(signingDate.getTime() + 3 * 60_000),
    });
    await tokens();
    advance(2 * 60_000);
    await tokens();
    expect(credentialCalls()).toBe(2);
  });

  it('shares one signing between concurrent callers', async () => {
    const { tokens, credentialCalls } = source();
    const [a, b, c] = await Promise.all([tokens(), tokens(), tokens()]);
    expect(new Set([a, b, c]).size).toBe(1);
    expect(credentialCalls()).toBe(1);
  });

  it('refuses a reuse window the authenticator would not honour', () => {
    expect(() =>
      createEksTokenSource({
        clusterName: 'c',
        region: 'us-west-2',
        credentials: async () => credentials,
        reuseForMs: 14 * 60_000,
      }),
    ).toThrow(RangeError);
  });
});
