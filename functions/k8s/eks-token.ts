import { Sha256 } from '@aws-crypto/sha256-js';
import { HttpRequest } from '@smithy/protocol-http';
import { SignatureV4 } from '@smithy/signature-v4';

/**
 * EKS IAM authentication (aws-iam-authenticator's token,
 * https://github.com/kubernetes-sigs/aws-iam-authenticator/blob/master/pkg/token/token.go): the bearer
 * token is `k8s-aws-v1.` + base64url (no padding) of a presigned STS GetCallerIdentity URL whose
 * signature covers the header `x-k8s-aws-id: <cluster name>`. The API server replays the URL to
 * STS to learn who we are. `X-Amz-Expires=60` is required but ignored; the URL is valid 15 minutes
 * after `X-Amz-Date`, and the authenticator treats tokens as expired after 14.
 */

export const EKS_TOKEN_PREFIX = 'k8s-aws-v1.';
const CLUSTER_ID_HEADER = 'x-k8s-aws-id';

/** AWS credentials as the SDK's providers return them. */
export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
  /** When the credentials stop working (temporary credentials only). */
  readonly expiration?: Date;
}

export type AwsCredentialsProvider = () => Promise<AwsCredentials>;

export interface EksTokenRequest {
  readonly clusterName: string;
  readonly region: string;
  readonly credentials: AwsCredentials;
  readonly signingDate: Date;
}

/** The regional STS endpoint host (the server only accepts STS hosts of its own partition). */
function stsHostname(region: string): string {
  return region.startsWith('cn-') ? `sts.${region}.amazonaws.com.cn` : `sts.${region}.amazonaws.com`;
}

/** One token, signed at `signingDate`. Pure apart from hashing; never log its result. */
export async function createEksToken(request: EksTokenRequest): Promise<string> {
  const hostname = stsHostname(request.region);
  const signer = new SignatureV4({
    credentials: request.credentials,
    region: request.region,
    service: 'sts',
    sha256: Sha256,
  });
  const presigned = await signer.presign(
    new HttpRequest({
      method: 'GET',
      protocol: 'https:',
      hostname,
      path: '/',
      query: { Action: 'GetCallerIdentity', Version: '2011-06-15' },
      headers: { host: hostname, [CLUSTER_ID_HEADER]: request.clusterName },
    }),
    { expiresIn: 60, signingDate: request.signingDate },
  );
  const query = Object.entries(presigned.query ?? {})
    .sort(([left], [right]) => (left < right ? -1 : left > right ? 1 : 0))
    .map(([key, value]) => `${encodeRfc3986(key)}=${encodeRfc3986(String(value))}`)
    .join('&');
  const url = `https://${hostname}/?${query}`;
  return EKS_TOKEN_PREFIX + Buffer.from(url, 'utf8').toString('base64url');
}

export interface EksTokenSourceOptions {
  readonly clusterName: string;
  readonly region: string;
  readonly credentials: AwsCredentialsProvider;
  /** Injectable clock; default the system clock. */
  readonly now?: () => Date;
  /** How long a token is reused; must stay below the authenticator's 14 minutes. Default 10 min. */
  readonly reuseForMs?: number;
}

/** Reuse window default: comfortably inside the 14 minutes the authenticator accepts. */
const DEFAULT_TOKEN_REUSE_MS = 10 * 60_000;
const MAX_TOKEN_REUSE_MS = 14 * 60_000;
/** A token is not reused within this margin of its credentials' expiration. */
const CREDENTIAL_EXPIRY_MARGIN_MS = 60_000;

/**
 * A cached token source, one per container: a token is reused until `reuseForMs` after it was
 * signed, or until one minute before the credentials it was signed with expire, whichever is
 * first; concurrent callers during a refresh share one signing.
 */
export function createEksTokenSource(options: EksTokenSourceOptions): () => Promise<string> {
  const now = options.now ?? (() => new Date());
  const reuseForMs = options.reuseForMs ?? DEFAULT_TOKEN_REUSE_MS;
  if (!(reuseForMs > 0 && reuseForMs < MAX_TOKEN_REUSE_MS)) {
    throw new RangeError(`reuseForMs must be between 0 and ${MAX_TOKEN_REUSE_MS} ms, got ${reuseForMs}`);
  }
  let cached: { token: string; reuseUntilEpochMs: number } | undefined;
  let pending: Promise<string> | undefined;

  const refresh = async (): Promise<string> => {
    const credentials = await options.credentials();
    const signingDate = now();
    const token = await createEksToken({
      clusterName: options.clusterName,
      region: options.region,
      credentials,
      signingDate,
    });
    const credentialLimit =
      credentials.expiration === undefined
        ? Number.POSITIVE_INFINITY
        : credentials.expiration.getTime() - CREDENTIAL_EXPIRY_MARGIN_MS;
    cached = { token, reuseUntilEpochMs: Math.min(signingDate.getTime() + reuseForMs, credentialLimit) };
    return token;
  };

  return async () => {
    if (cached !== undefined && now().getTime() < cached.reuseUntilEpochMs) return cached.token;
    pending ??= refresh().finally(() => {
      pending = undefined;
    });
    return await pending;
  };
}

/** RFC 3986 percent-encoding, as SigV4 canonicalises query strings. */
function encodeRfc3986(text: string): string {
  return encodeURIComponent(text).replace(
    /[!'()*]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`,
  );
}
