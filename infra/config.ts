import { type ConfigMapLocation, DEFAULT_CILIUM_CONFIG } from './kubernetes-access.ts';

/** EKS's rule for cluster names: a letter or digit, then letters, digits, `-` and `_`, 100 at most. */
export const EKS_CLUSTER_NAME_PATTERN = /^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$/;

/**
 * Stack configuration from CDK context (defaults in cdk.json, overridable with `-c key=value`),
 * validated at synth time so a bad value fails `cdk synth` with a message naming the key.
 */
export interface StackConfig {
  readonly clusterName: string;
  readonly vpcId: string;
  /** The account owning the VPC when it is shared through RAM; undefined = this stack's account. */
  readonly vpcOwnerAccountId: string | undefined;
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
  /**
   * How the function roles become Kubernetes identities: `access-entry` (EKS access entries; the
   * cluster's authentication mode is API or API_AND_CONFIG_MAP), `aws-auth` (CONFIG_MAP mode: no
   * access entries; the stack outputs the role ARNs and the `mapRoles` entries to add), or `none`
   * (the local cloud only: the functions read KUBECONFIG; a deploy is refused).
   */
  readonly kubernetesAccess: 'access-entry' | 'aws-auth' | 'none';
  /** The EKS API endpoint and CA bundle (base64), for IAM-token access; required unless kubernetesAccess is none. */
  readonly eksEndpoint: string;
  readonly eksCertificateAuthorityData: string;
  readonly sweepRateMinutes: number;
  readonly garbageCollectionRateMinutes: number;
  readonly eniGarbageCollectionGraceMinutes: number;
  readonly retiredRecordRetentionDays: number;
  /** How long an IP ledger entry is kept (its TTL), in days. */
  readonly ledgerRetentionDays: number;
  readonly logLevel: 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';
  /** The AWS account and region the stack deploys to; the region defaults to the endpoint's. */
  readonly account?: string;
  readonly region?: string;
  /**
   * Subnets and security groups that put the functions talking to the API server in the cluster
   * VPC (a private or CIDR-restricted endpoint); both or neither. None: the functions run outside
   * any VPC and reach a public endpoint.
   */
  readonly vpcSubnetIds?: readonly string[];
  readonly vpcSecurityGroupIds?: readonly string[];
  /** The cilium version the cluster runs (`major.minor`); the hand-over needs 1.18 or newer. */
  readonly ciliumVersion: string;
  /**
   * cilium-agent's ConfigMap (`eni-ipam:ciliumConfigNamespace`, `ciliumConfigName`; default
   * `kube-system/cilium-config`): before a node's agent registers its knobs, the allocator uses
   * the ones this ConfigMap gives the agent (stack defaults for the rest, or when it is absent).
   */
  readonly ciliumConfig: ConfigMapLocation;
  /**
   * Deployed but allocating nothing (the hand-over from cilium-operator, and the rollback to it):
   * the functions run and observe (the sweep counts what it would reconcile), but no ENI, IP,
   * record or CiliumNode is written.
   */
  readonly paused: boolean;
  /**
   * A table the stack uses instead of creating one (a point-in-time restore, or the table a
   * destroyed stack left behind), with its stream (enable NEW_AND_OLD_IMAGES on it first: the IP ledger diffs the two images); both or neither.
   */
  readonly existingTableName?: string;
  readonly existingTableStreamArn?: string;
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

/**
 * The examples a refusal of a list-valued key shows, in both forms the command line takes: a
 * comma-separated list and a JSON array (cdk.json takes the array as it is).
 */
const LIST_EXAMPLES = {
  clusterTagValues: ['owned', 'shared'],
  vpcSubnetIds: ['subnet-0123456789abcdef0', 'subnet-0fedcba9876543210'],
  vpcSecurityGroupIds: ['sg-0123456789abcdef0'],
} as const;

type ListKey = keyof typeof LIST_EXAMPLES;

/** Reads and validates every key; `lookup` is `node.tryGetContext`. */
export function readStackConfig(lookup: (key: string) => unknown): StackConfig {
  const problems: string[] = [];
  const get = (key: string) => lookup(PREFIX + key);
  const refuse = (key: string, expected: string, example: string) =>
    problems.push(refusal(key, get(key), expected, example));

  const text = (key: string, pattern: RegExp, hint: string, example: string): string => {
    const value = get(key);
    if (typeof value !== 'string' || !pattern.test(value)) {
      refuse(key, hint, commandLineExample(key, example));
      return '';
    }
    return value;
  };
  const count = (key: string, min: number, max: number): number => {
    const raw = get(key);
    const value = typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : raw;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      refuse(key, `an integer from ${min} to ${max}`, commandLineExample(key, String(Math.max(min, 1))));
      return min;
    }
    return value;
  };
  const flag = (key: string): boolean => {
    const raw = get(key);
    if (raw === true || raw === 'true') return true;
    if (raw === false || raw === 'false') return false;
    refuse(key, 'true or false', commandLineExample(key, 'true'));
    return false;
  };
  const oneOf = <T extends string>(key: string, allowed: readonly T[]): T => {
    const value = get(key);
    if (!allowed.includes(value as T)) {
      refuse(key, `one of ${allowed.join(', ')}`, commandLineExample(key, allowed[0] as string));
      return allowed[0] as T;
    }
    return value as T;
  };
  const optional = <T>(key: string, read: (key: string) => T): T | undefined =>
    get(key) === undefined || get(key) === null || get(key) === '' ? undefined : read(key);
  const stringList = (key: ListKey, pattern = /^.+$/, hint = 'non-empty strings'): string[] => {
    const list = parseList(get(key));
    const wrong = list?.filter((item) => !pattern.test(item)) ?? [];
    if (list === undefined || wrong.length > 0) {
      const expected = `a comma-separated list or a JSON array of ${hint}`;
      const raw = get(key);
      const brokenJson =
        typeof raw === 'string' && raw.trim().startsWith('[') && typeof safeJson(raw) === 'string';
      const which =
        wrong.length > 0
          ? ` (not ${wrong.map((item) => JSON.stringify(item)).join(', ')})`
          : brokenJson
            ? ' (it starts with [ but is not valid JSON)'
            : '';
      refuse(key, `${expected}${which}`, listExample(key));
      return [];
    }
    return list;
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
      refuse(key, 'a JSON map of tag names to string values', commandLineExample(key, '{"team":"platform"}'));
      return {};
    }
    return value as Record<string, string>;
  };

  const config: { -readonly [K in keyof StackConfig]: StackConfig[K] } = {
    clusterName: text('clusterName', EKS_CLUSTER_NAME_PATTERN, 'an EKS cluster name', 'prod-eu'),
    vpcId: text('vpcId', /^vpc-[0-9a-f]{8,17}$/, 'a VPC id (vpc-…)', 'vpc-0123456789abcdef0'),
    vpcOwnerAccountId:
      get('vpcOwnerAccountId') === undefined || get('vpcOwnerAccountId') === ''
        ? undefined
        : text(
            'vpcOwnerAccountId',
            /^\d{12}$/,
            'a 12-digit AWS account id (the owner of a shared VPC)',
            '210987654321',
          ),
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
    kubernetesAccess: oneOf('kubernetesAccess', ['access-entry', 'aws-auth', 'none'] as const),
    eksEndpoint: '',
    eksCertificateAuthorityData: '',
    sweepRateMinutes: count('sweepRateMinutes', 1, 60),
    garbageCollectionRateMinutes: count('garbageCollectionRateMinutes', 1, 1_440),
    eniGarbageCollectionGraceMinutes: count('eniGarbageCollectionGraceMinutes', 1, 10_080),
    retiredRecordRetentionDays: count('retiredRecordRetentionDays', 1, 3_650),
    ledgerRetentionDays:
      get('ledgerRetentionDays') === undefined ? 90 : count('ledgerRetentionDays', 1, 3_650),
    logLevel: oneOf('logLevel', ['DEBUG', 'INFO', 'WARN', 'ERROR'] as const),
    alarmTopicArn: optional('alarmTopicArn', (key) =>
      text(
        key,
        /^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$/,
        'an SNS topic ARN',
        'arn:aws:sns:eu-west-1:210987654321:platform-pager',
      ),
    ),
    sweepReservedConcurrency: optional('sweepReservedConcurrency', (key) => count(key, 1, 1_000)),
    allocateReservedConcurrency: optional('allocateReservedConcurrency', (key) => count(key, 1, 10_000)),
    account: optional('account', (key) => text(key, /^\d{12}$/, 'a 12-digit AWS account id', '210987654321')),
    region: optional('region', (key) => text(key, /^[a-z]{2}(-[a-z]+)+-\d$/, 'an AWS region', 'eu-west-1')),
    vpcSubnetIds: optional('vpcSubnetIds', () =>
      stringList('vpcSubnetIds', /^subnet-[0-9a-f]{8,17}$/, 'subnet ids'),
    ),
    vpcSecurityGroupIds: optional('vpcSecurityGroupIds', () =>
      stringList('vpcSecurityGroupIds', /^sg-[0-9a-f]{8,17}$/, 'security group ids'),
    ),
    paused: get('paused') === undefined ? false : flag('paused'),
    existingTableName: optional('existingTableName', (key) =>
      text(key, /^[A-Za-z0-9_.-]{3,255}$/, 'a DynamoDB table name', 'prod-eu-nodes'),
    ),
    existingTableStreamArn: optional('existingTableStreamArn', (key) =>
      text(
        key,
        /^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}:table\/[A-Za-z0-9_.-]{3,255}\/stream\/[0-9T:.-]+$/,
        "the table's LatestStreamArn (aws dynamodb describe-table --query Table.LatestStreamArn)",
        'arn:aws:dynamodb:eu-west-1:210987654321:table/prod-eu-nodes/stream/2026-12-01T20:00:00.000',
      ),
    ),
    ciliumVersion: text('ciliumVersion', /^(\d+\.\d+|set-me)$/, 'the cilium version as major.minor', '1.18'),
    ciliumConfig: {
      namespace:
        optional('ciliumConfigNamespace', (key) =>
          text(key, /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'a Kubernetes namespace name', 'kube-system'),
        ) ?? DEFAULT_CILIUM_CONFIG.namespace,
      name:
        optional('ciliumConfigName', (key) =>
          text(key, /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, 'a ConfigMap name', 'cilium-config'),
        ) ?? DEFAULT_CILIUM_CONFIG.name,
    },
  };
  problems.push(...keyCombinationProblems(config));
  if (config.kubernetesAccess !== 'none') {
    const endpoint = text(
      'eksEndpoint',
      /^https:\/\/[^\s]+$/,
      'the https:// endpoint of the EKS API server',
      'https://9F2E4C1B7A6D3E8F0A1B2C3D4E5F6A7B.yl4.eu-west-1.eks.amazonaws.com',
    );
    const authority = text(
      'eksCertificateAuthorityData',
      /^[A-Za-z0-9+/=]{16,}$/,
      'the base64 CA bundle of the cluster',
      'LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUM=',
    );
    Object.assign(config, { eksEndpoint: endpoint, eksCertificateAuthorityData: authority });
    const endpointRegion = regionOfEksEndpoint(endpoint);
    if (config.region && endpointRegion !== undefined && config.region !== endpointRegion) {
      problems.push(
        `${PREFIX}region: ${config.region} is not the region of ${PREFIX}eksEndpoint (${endpointRegion}): the stack must be in the cluster's region`,
      );
    }
    config.region ??= endpointRegion;
  }
  if (get('kubernetesGroup') !== undefined) {
    problems.push(
      `${PREFIX}kubernetesGroup: no longer read; the functions map to the groups of infra/kubernetes-access.ts (apply infra/kubernetes/rbac.yaml)`,
    );
  }
  if (problems.length > 0) {
    throw new StackConfigError(`invalid stack configuration:\n  ${problems.join('\n  ')}`);
  }
  return config;
}

/**
 * What no single key can be checked for: keys that must be set together (the existing table and
 * its stream, the functions' subnets and security groups), a stream of another table, and a
 * cilium release older than the hand-over supports. One message per problem, naming the keys.
 */
function keyCombinationProblems(config: StackConfig): string[] {
  const problems: string[] = [];
  if ((config.existingTableName === undefined) !== (config.existingTableStreamArn === undefined)) {
    problems.push(
      `${PREFIX}existingTableName and ${PREFIX}existingTableStreamArn: set both or neither, got ` +
        `${given(config.existingTableName)} and ${given(config.existingTableStreamArn)}; for example ` +
        `-c ${PREFIX}existingTableName=prod-eu-nodes -c ${PREFIX}existingTableStreamArn=arn:aws:dynamodb:eu-west-1:210987654321:table/prod-eu-nodes/stream/2026-12-01T20:00:00.000`,
    );
  } else if (
    config.existingTableStreamArn !== undefined &&
    !config.existingTableStreamArn.includes(`:table/${config.existingTableName}/stream/`)
  ) {
    problems.push(
      `${PREFIX}existingTableStreamArn: ${config.existingTableStreamArn} is not a stream of table ${config.existingTableName}; ` +
        `for example arn:aws:dynamodb:<region>:<account>:table/${config.existingTableName}/stream/<time> (aws dynamodb describe-table --table-name ${config.existingTableName} --query Table.LatestStreamArn)`,
    );
  }
  if ((config.vpcSubnetIds === undefined) !== (config.vpcSecurityGroupIds === undefined)) {
    problems.push(
      `${PREFIX}vpcSubnetIds and ${PREFIX}vpcSecurityGroupIds: set both or neither, got ` +
        `${given(config.vpcSubnetIds)} and ${given(config.vpcSecurityGroupIds)}; for example ` +
        `${commandLineExample('vpcSubnetIds', LIST_EXAMPLES.vpcSubnetIds.join(','))} ` +
        commandLineExample('vpcSecurityGroupIds', LIST_EXAMPLES.vpcSecurityGroupIds.join(',')),
    );
  }
  if (isOlderThan(config.ciliumVersion, MINIMUM_CILIUM_VERSION)) {
    problems.push(
      `${PREFIX}ciliumVersion: cilium ${config.ciliumVersion} is not supported: cilium-operator skips a CiliumNode ` +
        `annotated ${'ipam.cilium.io/ignore'} only from ${MINIMUM_CILIUM_VERSION}, so before it both allocators would act on every node; upgrade cilium first`,
    );
  }
  return problems;
}

/** The first cilium version whose operator honours `ipam.cilium.io/ignore` (commit fd768ac40d, 1.18.0). */
const MINIMUM_CILIUM_VERSION = '1.18';

function isOlderThan(version: string, minimum: string): boolean {
  const parse = (text: string) => text.split('.').map(Number) as [number, number];
  if (!/^\d+\.\d+$/.test(version)) return false;
  const [major, minor] = parse(version);
  const [minMajor, minMinor] = parse(minimum);
  return major < minMajor || (major === minMajor && minor < minMinor);
}

/** `https://<id>.<x>.<region>.eks.amazonaws.com` names its region; anything else names none. */
function regionOfEksEndpoint(endpoint: string): string | undefined {
  return /^https:\/\/[^/]+\.([a-z]{2}(?:-[a-z]+)+-\d)\.eks\.amazonaws\.com(?:\.cn)?\/?$/.exec(endpoint)?.[1];
}

/** A refusal: the key, the value given, what the key takes, and an example of it. */
function refusal(key: string, raw: unknown, expected: string, example: string): string {
  return `${PREFIX}${key}: expected ${expected}, got ${given(raw)}; for example ${example}`;
}

const given = (value: unknown) => (value === undefined ? 'nothing' : JSON.stringify(value));

/** `-c key=value` as a person types it into a shell (quoted when the value needs it). */
function commandLineExample(key: string, value: string): string {
  const option = `${PREFIX}${key}=${value}`;
  return /^[A-Za-z0-9:=,./_+-]+$/.test(option) ? `-c ${option}` : `-c '${option}'`;
}

function listExample(key: ListKey): string {
  const items = LIST_EXAMPLES[key];
  return `${commandLineExample(key, items.join(','))} or ${commandLineExample(key, JSON.stringify(items))}`;
}

/**
 * A list-valued key: an array in cdk.json; on the command line, where every value is a string, a
 * JSON array (`["a","b"]`) or a comma-separated list (`a,b`, spaces around items ignored).
 * Undefined when it is neither, or has no item, or an empty one.
 */
function parseList(raw: unknown): string[] | undefined {
  let value = raw;
  if (typeof raw === 'string') {
    const text = raw.trim();
    value = text.startsWith('[') ? safeJson(text) : text.split(',').map((part) => part.trim());
  }
  if (!Array.isArray(value) || value.length === 0) return undefined;
  if (!value.every((item) => typeof item === 'string' && item.trim() !== '')) return undefined;
  return value as string[];
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
