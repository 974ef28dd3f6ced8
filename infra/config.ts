/**
 * Stack configuration from CDK context (defaults in cdk.json, overridable with `-c key=value`),
 * validated at synth time so a bad value fails `cdk synth` with a message naming the key.
 */
export interface StackConfig {
  readonly clusterName: string;
  readonly vpcId: string;
  /** Values of the `kubernetes.io/cluster/<clusterName>` instance tag that make an instance ours. */
  readonly clusterTagValues: readonly string[];
  readonly preAllocate: number;
  readonly minAllocate: number;
  readonly maxAllocate: number;
  readonly maxAboveWatermark: number;
  readonly firstInterfaceIndex: number;
  readonly prefixDelegation: boolean;
  readonly releaseExcessIps: boolean;
  readonly excessIpReleaseDelaySeconds: number;
  readonly eniTags: Readonly<Record<string, string>>;
  readonly nodeNaming: 'private-dns-name' | 'instance-id';
  readonly kubernetesAccess: 'eks-access-entry' | 'none';
  readonly kubernetesGroup: string;
  /** The EKS API endpoint and CA bundle (base64), for IAM-token access; required with eks-access-entry. */
  readonly eksEndpoint: string;
  readonly eksCertificateAuthorityData: string;
  readonly sweepRateMinutes: number;
  readonly garbageCollectionRateMinutes: number;
  readonly eniGarbageCollectionGraceMinutes: number;
  readonly retiredRecordRetentionDays: number;
  readonly logLevel: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
  /** An SNS topic every alarm of the stack notifies (alarm and OK); none when absent. */
  readonly alarmTopicArn?: string;
  /**
   * Reserved concurrency of the sweep and allocate functions; none when absent. Reserving needs
   * the account's unreserved concurrency to stay at 100 or more, which new and low-quota accounts
   * do not have, so it is only set when asked for.
   */
  readonly sweepReservedConcurrency?: number;
  readonly allocateReservedConcurrency?: number;
}

export class StackConfigError extends Error {
  override readonly name = 'StackConfigError';
}

const PREFIX = 'eni-ipam:';

/** Reads and validates every key; `lookup` is `node.tryGetContext`. */
export function readStackConfig(lookup: (key: string) => unknown): StackConfig {
  const problems: string[] = [];
  const get = (key: string) => lookup(PREFIX + key);

  const text = (key: string, pattern: RegExp, hint: string): string => {
    const value = get(key);
    if (typeof value !== 'string' || !pattern.test(value)) {
      problems.push(`${PREFIX}${key}: expected ${hint}, got ${JSON.stringify(value)}`);
      return '';
    }
    return value;
  };
  const count = (key: string, min: number, max: number): number => {
    const raw = get(key);
    const value = typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : raw;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      problems.push(`${PREFIX}${key}: expected an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
      return min;
    }
    return value;
  };
  const flag = (key: string): boolean => {
    const raw = get(key);
    if (raw === true || raw === 'true') return true;
    if (raw === false || raw === 'false') return false;
    problems.push(`${PREFIX}${key}: expected true or false, got ${JSON.stringify(raw)}`);
    return false;
  };
  const oneOf = <T extends string>(key: string, allowed: readonly T[]): T => {
    const value = get(key);
    if (!allowed.includes(value as T)) {
      problems.push(`${PREFIX}${key}: expected one of ${allowed.join(', ')}, got ${JSON.stringify(value)}`);
      return allowed[0] as T;
    }
    return value as T;
  };
  const optional = <T>(key: string, read: (key: string) => T): T | undefined =>
    get(key) === undefined || get(key) === null || get(key) === '' ? undefined : read(key);
  const stringList = (key: string): string[] => {
    const raw = get(key);
    const value = typeof raw === 'string' ? raw.split(',').map((part) => part.trim()) : raw;
    if (
      !Array.isArray(value) ||
      value.length === 0 ||
      !value.every((v) => typeof v === 'string' && v !== '')
    ) {
      problems.push(`${PREFIX}${key}: expected a non-empty list of strings, got ${JSON.stringify(raw)}`);
      return [];
    }
    return value as string[];
  };
  const tagMap = (key: string): Record<string, string> => {
    const raw = get(key) ?? {};
    const value = typeof raw === 'string' ? safeJson(raw) : raw;
    if (
      typeof value !== 'object' ||
      value === null ||
      Array.isArray(value) ||
      !Object.values(value).every((v) => typeof v === 'string')
    ) {
      problems.push(
        `${PREFIX}${key}: expected a map of tag names to string values, got ${JSON.stringify(raw)}`,
      );
      return {};
    }
    return value as Record<string, string>;
  };

  const config: { -readonly [K in keyof StackConfig]: StackConfig[K] } = {
    clusterName: text('clusterName', /^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$/, 'an EKS cluster name'),
    vpcId: text('vpcId', /^vpc-[0-9a-f]{8,17}$/, 'a VPC id (vpc-…)'),
    clusterTagValues: stringList('clusterTagValues'),
    preAllocate: count('preAllocate', 0, 10_000),
    minAllocate: count('minAllocate', 0, 10_000),
    maxAllocate: count('maxAllocate', 0, 100_000),
    maxAboveWatermark: count('maxAboveWatermark', 0, 10_000),
    firstInterfaceIndex: count('firstInterfaceIndex', 0, 64),
    prefixDelegation: flag('prefixDelegation'),
    releaseExcessIps: flag('releaseExcessIps'),
    excessIpReleaseDelaySeconds: count('excessIpReleaseDelaySeconds', 0, 86_400),
    eniTags: tagMap('eniTags'),
    nodeNaming: oneOf('nodeNaming', ['private-dns-name', 'instance-id'] as const),
    kubernetesAccess: oneOf('kubernetesAccess', ['eks-access-entry', 'none'] as const),
    kubernetesGroup: text(
      'kubernetesGroup',
      /^(?!system:)[a-z0-9][a-z0-9:._-]{0,62}$/,
      'a group name not starting with system:',
    ),
    eksEndpoint: '',
    eksCertificateAuthorityData: '',
    sweepRateMinutes: count('sweepRateMinutes', 1, 60),
    garbageCollectionRateMinutes: count('garbageCollectionRateMinutes', 1, 1_440),
    eniGarbageCollectionGraceMinutes: count('eniGarbageCollectionGraceMinutes', 1, 10_080),
    retiredRecordRetentionDays: count('retiredRecordRetentionDays', 1, 3_650),
    logLevel: oneOf('logLevel', ['DEBUG', 'INFO', 'WARN', 'ERROR'] as const),
    alarmTopicArn: optional('alarmTopicArn', (key) =>
      text(key, /^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$/, 'an SNS topic ARN'),
    ),
    sweepReservedConcurrency: optional('sweepReservedConcurrency', (key) => count(key, 1, 1_000)),
    allocateReservedConcurrency: optional('allocateReservedConcurrency', (key) => count(key, 1, 10_000)),
  };
  if (config.kubernetesAccess === 'eks-access-entry') {
    const endpoint = text('eksEndpoint', /^https:\/\/[^\s]+$/, 'the https:// endpoint of the EKS API server');
    const authority = text(
      'eksCertificateAuthorityData',
      /^[A-Za-z0-9+/=]{16,}$/,
      'the base64 CA bundle of the cluster',
    );
    Object.assign(config, { eksEndpoint: endpoint, eksCertificateAuthorityData: authority });
  }
  if (problems.length > 0) {
    throw new StackConfigError(`invalid stack configuration:\n  ${problems.join('\n  ')}`);
  }
  return config;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
