import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FUNCTION_KUBERNETES_GROUPS, type IpamFunctionId } from '../../infra/kubernetes-access.ts';
import type { IamIdentity } from '../emulators/ec2/authorization.ts';
import { functionRoleLogicalId, rolePolicies } from '../local-cloud/iam-policies.ts';
import type { CloudFormationTemplate } from '../local-cloud/template.ts';

/**
 * The identities of the stack's functions for tests that run the allocator in-process against the
 * EC2 emulator: the stack synthesized (bundling skipped) for the test's cluster and VPC, each
 * function's role with its policies as synthesized, intrinsics resolved for the emulator's account
 * and Region. Cached per configuration (a synthesis takes about a second).
 */

export interface StackIdentityOptions {
  readonly clusterName: string;
  readonly vpcId: string;
  readonly account?: string;
  readonly region?: string;
  /** More CDK context (e.g. `eni-ipam:vpcOwnerAccountId`). */
  readonly context?: Readonly<Record<string, unknown>>;
}

const cache = new Map<string, Record<IpamFunctionId, IamIdentity>>();

/**
 * Synthesis is slow on a busy machine, so the result is also kept on disk, keyed by the options
 * and by the content of everything the policies come from (infra/, the ENI tags, cdk.json, the
 * lockfile): a changed stack is synthesized afresh.
 */
export async function stackFunctionIdentities(
  options: StackIdentityOptions,
): Promise<Record<IpamFunctionId, IamIdentity>> {
  const key = cacheKey(options);
  const cached = cache.get(key) ?? readCached(key);
  if (cached !== undefined) {
    cache.set(key, cached);
    return cached;
  }
  const identities = await synthesizeIdentities(options);
  cache.set(key, identities);
  writeCached(key, identities);
  return identities;
}

/** aws-cdk-lib and the app load only when synthesizing: seconds of imports a cache hit skips. */
async function synthesizeIdentities(
  options: StackIdentityOptions,
): Promise<Record<IpamFunctionId, IamIdentity>> {
  const [{ App }, { buildApp, cdkJsonContext }] = await Promise.all([
    import('aws-cdk-lib'),
    import('../../infra/build-app.ts'),
  ]);
  const account = options.account ?? '123456789012';
  const region = options.region ?? 'us-east-1';
  const app = new App({
    context: {
      ...cdkJsonContext(),
      'eni-ipam:clusterName': options.clusterName,
      'eni-ipam:vpcId': options.vpcId,
      ...options.context,
      'aws:cdk:bundling-stacks': [],
    },
  });
  const { stack } = buildApp(app);
  const template = app.synth().getStackByName(stack.stackName).template as CloudFormationTemplate;
  const policies = rolePolicies(template, {
    ref: (logicalId) => logicalId,
    getAtt: () => undefined,
    pseudo: {
      'AWS::Region': region,
      'AWS::AccountId': account,
      'AWS::Partition': 'aws',
      'AWS::URLSuffix': 'amazonaws.com',
      'AWS::StackName': stack.stackName,
    },
  });
  const identities = Object.fromEntries(
    (Object.keys(FUNCTION_KUBERNETES_GROUPS) as IpamFunctionId[]).map((functionId) => {
      const functionLogicalId = Object.keys(template.Resources).find(
        (logicalId) =>
          logicalId.startsWith(functionId) && template.Resources[logicalId]?.Type === 'AWS::Lambda::Function',
      );
      if (functionLogicalId === undefined) throw new Error(`the stack has no ${functionId} function`);
      const roleLogicalId = functionRoleLogicalId(template, functionLogicalId);
      const identity: IamIdentity = {
        principalArn: `arn:aws:sts::${account}:assumed-role/${roleLogicalId}/${functionId}`,
        policies: policies.get(roleLogicalId) ?? [],
      };
      return [functionId, identity];
    }),
  ) as Record<IpamFunctionId, IamIdentity>;
  return identities;
}

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CACHE_DIRECTORY = join(tmpdir(), 'serverless-eni-ipam-stack-policies');

function cacheKey(options: StackIdentityOptions): string {
  const normalized = {
    clusterName: options.clusterName,
    vpcId: options.vpcId,
    account: options.account ?? '123456789012',
    region: options.region ?? 'us-east-1',
    context: Object.fromEntries(Object.entries(options.context ?? {}).sort(([a], [b]) => (a < b ? -1 : 1))),
  };
  const hash = createHash('sha256').update(JSON.stringify(normalized));
  const sources = [
    ...readdirSync(join(ROOT, 'infra'), { recursive: true, encoding: 'utf8' })
      .filter((name) => name.endsWith('.ts'))
      .sort()
      .map((name) => join('infra', name)),
    'functions/core/eni-ownership.ts',
    'cdk.json',
    'package-lock.json',
  ];
  for (const source of sources) hash.update(source).update(readFileSync(join(ROOT, source)));
  return hash.digest('hex');
}

function readCached(key: string): Record<IpamFunctionId, IamIdentity> | undefined {
  try {
    return JSON.parse(readFileSync(join(CACHE_DIRECTORY, `${key}.json`), 'utf8'));
  } catch {
    return undefined;
  }
}

function writeCached(key: string, identities: Record<IpamFunctionId, IamIdentity>): void {
  mkdirSync(CACHE_DIRECTORY, { recursive: true });
  const temporary = join(CACHE_DIRECTORY, `${key}.${process.pid}.tmp`);
  writeFileSync(temporary, JSON.stringify(identities));
  renameSync(temporary, join(CACHE_DIRECTORY, `${key}.json`));
}

/** The owner account of the shared-VPC tests. */
export const SHARED_VPC_OWNER_ACCOUNT = '210987654321';

/** The stacks the test fixtures run as (seeded clusters have VPC id `vpc-00000000000000001`). */
const FIXTURE_STACKS: readonly StackIdentityOptions[] = [
  { clusterName: 'scenario-cluster', vpcId: 'vpc-00000000000000001' },
  { clusterName: 'unit-cluster', vpcId: 'vpc-00000000000000001' },
  { clusterName: 'test-cluster', vpcId: 'vpc-00000000000000001' },
  ...['scenario-cluster', 'test-cluster'].map((clusterName) => ({
    clusterName,
    vpcId: 'vpc-00000000000000001',
    context: { 'eni-ipam:vpcOwnerAccountId': SHARED_VPC_OWNER_ACCOUNT },
  })),
];

/** Synthesizes the fixtures' stacks once before the test workers start (they then read the cache). */
export async function warmStackPolicyCache(): Promise<void> {
  for (const options of FIXTURE_STACKS) await stackFunctionIdentities(options);
}
