import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildApp, cdkJsonContext } from '../../infra/build-app.ts';
import type { EniIpamStack } from '../../infra/stack.ts';
import { REAL_CLUSTER } from '../fixtures/cluster-context.ts';

/** Synthesizes with cdk.json's defaults plus `overrides`; esbuild bundling skipped. */
function synthesize(overrides: Record<string, unknown> = {}): { stack: EniIpamStack; template: Template } {
  const app = new App({ context: { ...cdkJsonContext(), ...overrides, 'aws:cdk:bundling-stacks': [] } });
  const { stack } = buildApp(app);
  app.synth();
  return { stack, template: Template.fromStack(stack) };
}

const environmentOf = (template: Template) =>
  Object.fromEntries(
    Object.entries(template.findResources('AWS::Lambda::Function')).map(([id, fn]) => [
      id.replace(/Function[0-9A-F]{8}$/, ''),
      fn.Properties.Environment.Variables as Record<string, unknown>,
    ]),
  );

describe('one stack per cluster, in its own environment', () => {
  let real: ReturnType<typeof synthesize>;
  beforeAll(() => {
    real = synthesize(REAL_CLUSTER);
  });

  it('names the stack after the cluster and deploys it to the endpoint’s region', () => {
    expect(real.stack.stackName).toBe('ServerlessEniIpam-prod-eu');
    expect(real.stack.region).toBe('eu-west-1');
    expect(synthesize().stack.stackName).toBe('ServerlessEniIpam-my-cluster');
  });

  it('takes an explicit account, and refuses a region that is not the endpoint’s', () => {
    const { stack } = synthesize({ ...REAL_CLUSTER, 'eni-ipam:account': '210987654321' });
    expect(stack.account).toBe('210987654321');
    expect(() => synthesize({ ...REAL_CLUSTER, 'eni-ipam:region': 'us-east-1' })).toThrow(
      /eni-ipam:region: us-east-1 is not the region of eni-ipam:eksEndpoint \(eu-west-1\)/,
    );
  });

  it('has nothing to refuse with real values', () => {
    expect(Object.keys(real.template.toJSON().Rules ?? {})).toEqual(['CheckBootstrapVersion']);
  });

  it('refuses an unedited deploy before anything is created, naming each value and its query', () => {
    const rules = synthesize().template.toJSON().Rules as Record<
      string,
      { Assertions: { Assert: unknown; AssertDescription: string }[] }
    >;
    const [assertion] = rules.CheckDeployableConfiguration?.Assertions ?? [];
    expect(assertion?.Assert).toEqual({ 'Fn::Equals': [{ Ref: 'UndeployableConfiguration' }, ''] });
    for (const expected of [
      'eni-ipam:vpcId (aws eks describe-cluster --name my-cluster --query cluster.resourcesVpcConfig.vpcId --output text)',
      'eni-ipam:eksEndpoint (aws eks describe-cluster --name my-cluster --query cluster.endpoint --output text)',
      'eni-ipam:eksCertificateAuthorityData (aws eks describe-cluster --name my-cluster --query cluster.certificateAuthority.data --output text)',
      'set eni-ipam:ciliumVersion',
    ]) {
      expect(assertion?.AssertDescription).toContain(expected);
    }
  });

  it('refuses cilium before 1.18 at synth: its operator cannot be told to skip a node', () => {
    expect(() => synthesize({ ...REAL_CLUSTER, 'eni-ipam:ciliumVersion': '1.17' })).toThrow(
      /eni-ipam:ciliumVersion: cilium 1.17 is not supported.*ipam.cilium.io\/ignore only from 1.18/,
    );
    expect(() => synthesize({ ...REAL_CLUSTER, 'eni-ipam:ciliumVersion': '1.9' })).toThrow(
      /1.9 is not supported/,
    );
    expect(() => synthesize({ ...REAL_CLUSTER, 'eni-ipam:ciliumVersion': '1.20' })).not.toThrow();
  });
});

describe('reachability: the cluster VPC when asked', () => {
  it('puts no function in a VPC by default', () => {
    const { template } = synthesize(REAL_CLUSTER);
    for (const fn of Object.values(template.findResources('AWS::Lambda::Function'))) {
      expect(fn.Properties.VpcConfig).toBeUndefined();
    }
  });

  it('puts every function that talks to the API server in the given subnets, with Lambda’s ENI rights on their own', () => {
    const { template } = synthesize({
      ...REAL_CLUSTER,
      'eni-ipam:vpcSubnetIds': 'subnet-0aaaaaaaaaaaaaaa1,subnet-0bbbbbbbbbbbbbbb2',
      'eni-ipam:vpcSecurityGroupIds': ['sg-0ccccccccccccccc3'],
    });
    const placed = Object.entries(template.findResources('AWS::Lambda::Function')).map(([id, fn]) => [
      id.replace(/Function[0-9A-F]{8}$/, ''),
      fn.Properties.VpcConfig,
    ]);
    const vpcConfig = {
      SubnetIds: ['subnet-0aaaaaaaaaaaaaaa1', 'subnet-0bbbbbbbbbbbbbbb2'],
      SecurityGroupIds: ['sg-0ccccccccccccccc3'],
    };
    expect(Object.fromEntries(placed)).toEqual({
      Allocate: vpcConfig,
      Sweep: vpcConfig,
      Sync: vpcConfig,
      Watch: vpcConfig,
      GarbageCollection: undefined,
    });
    // Lambda's own rights to place a function in a VPC (not the function's: the watcher still
    // makes no EC2 call).
    for (const role of ['Allocate', 'Sweep', 'Sync', 'Watch']) {
      template.hasResourceProperties('AWS::IAM::Policy', {
        Roles: [{ Ref: Match.stringLikeRegexp(`^${role}Role`) }],
        PolicyDocument: {
          Statement: Match.arrayWith([
            {
              Sid: 'LambdaVpcNetworkInterfaces',
              Effect: 'Allow',
              Action: [
                'ec2:CreateNetworkInterface',
                'ec2:DescribeNetworkInterfaces',
                'ec2:DescribeSubnets',
                'ec2:DeleteNetworkInterface',
                'ec2:AssignPrivateIpAddresses',
                'ec2:UnassignPrivateIpAddresses',
              ],
              Resource: '*',
            },
          ]),
        },
      });
    }
  });

  it.each([
    {
      case: 'subnets without security groups',
      context: { 'eni-ipam:vpcSubnetIds': 'subnet-0aaaaaaaaaaaaaaa1' },
    },
    {
      case: 'a malformed subnet id',
      context: {
        'eni-ipam:vpcSubnetIds': 'subnet-x',
        'eni-ipam:vpcSecurityGroupIds': 'sg-0ccccccccccccccc3',
      },
    },
  ])('refuses $case', ({ context }) => {
    expect(() => synthesize({ ...REAL_CLUSTER, ...context })).toThrow(/eni-ipam:vpcSubnetIds/);
  });
});

describe('every EKS authentication mode', () => {
  it('access-entry (API, API_AND_CONFIG_MAP): an access entry per API client role, IAM-token variables', () => {
    const { template } = synthesize(REAL_CLUSTER);
    const entries = Object.keys(template.findResources('AWS::EKS::AccessEntry'));
    expect(entries.sort()).toEqual(['AllocateAccess', 'SweepAccess', 'SyncAccess', 'WatchAccess']);
    const groupsOf = (entry: string) =>
      template.findResources('AWS::EKS::AccessEntry')[entry]?.Properties.KubernetesGroups;
    expect(groupsOf('AllocateAccess')).toEqual(['serverless-eni-ipam-allocator']);
    expect(groupsOf('SweepAccess')).toEqual(['serverless-eni-ipam-allocator']);
    expect(groupsOf('SyncAccess')).toEqual(['serverless-eni-ipam-writer']);
    expect(groupsOf('WatchAccess')).toEqual(['serverless-eni-ipam-watcher']);
    expect(environmentOf(template).Watch).toMatchObject({ EKS_CLUSTER_NAME: 'prod_eu' });
    expect(environmentOf(template).Sync).toMatchObject({ EKS_CLUSTER_NAME: 'prod_eu' });
  });

  it('aws-auth (CONFIG_MAP): no access entry; the role ARNs and the mapRoles entries are outputs', () => {
    const { template } = synthesize({ ...REAL_CLUSTER, 'eni-ipam:kubernetesAccess': 'aws-auth' });
    expect(template.findResources('AWS::EKS::AccessEntry')).toEqual({});
    const outputs = template.toJSON().Outputs as Record<string, { Value: unknown }>;
    for (const role of ['Allocate', 'Sweep', 'Sync', 'Watch']) {
      expect(outputs[`${role}RoleArn`]?.Value).toEqual({
        'Fn::GetAtt': [expect.stringMatching(`^${role}Role`), 'Arn'],
      });
    }
    const mapRoles = JSON.stringify(outputs.AwsAuthMapRoles?.Value);
    for (const [role, group] of [
      ['allocate', 'allocator'],
      ['sweep', 'allocator'],
      ['sync', 'writer'],
      ['watch', 'watcher'],
    ]) {
      expect(mapRoles).toContain(
        `username: serverless-eni-ipam-${role}\\n  groups:\\n    - serverless-eni-ipam-${group}\\n`,
      );
    }
    for (const [name, variables] of Object.entries(environmentOf(template))) {
      // The ledger talks to DynamoDB alone.
      if (name === 'Ledger') {
        expect(Object.keys(variables).filter((key) => key.startsWith('EKS_'))).toEqual([]);
        continue;
      }
      expect(variables, name).toMatchObject({
        EKS_CLUSTER_NAME: 'prod_eu',
        EKS_ENDPOINT: REAL_CLUSTER['eni-ipam:eksEndpoint'],
        EKS_CA_DATA: REAL_CLUSTER['eni-ipam:eksCertificateAuthorityData'],
      });
    }
  });

  it('none is the local cloud’s: it synthesizes, and a deploy of it is refused', () => {
    const { template } = synthesize({ ...REAL_CLUSTER, 'eni-ipam:kubernetesAccess': 'none' });
    expect(template.findResources('AWS::EKS::AccessEntry')).toEqual({});
    const rules = template.toJSON().Rules as Record<string, { Assertions: { AssertDescription: string }[] }>;
    expect(rules.CheckDeployableConfiguration?.Assertions[0]?.AssertDescription).toMatch(
      /kubernetesAccess none is for the local cloud only/,
    );
  });
});

describe('the hand-over switch', () => {
  it('paused differs from a running stack only in the functions’ PAUSED variable', () => {
    const running = synthesize(REAL_CLUSTER).template.toJSON();
    const paused = synthesize({ ...REAL_CLUSTER, 'eni-ipam:paused': true }).template.toJSON();
    for (const [name, variables] of Object.entries(environmentOf(Template.fromJSON(paused)))) {
      // The ledger writes only what record writes show, and paused there are none.
      expect(variables.PAUSED, name).toBe(name === 'Ledger' ? undefined : 'true');
    }
    const withoutPaused = (template: Record<string, unknown>) =>
      JSON.stringify(template).replaceAll(/"PAUSED":"(true|false)"/g, '');
    expect(withoutPaused(paused)).toBe(withoutPaused(running));
  });
});

describe('a restored table', () => {
  const STREAM =
    'arn:aws:dynamodb:eu-west-1:210987654321:table/prod-nodes-restored/stream/2026-12-01T20:00:00.000';

  it('uses eni-ipam:existingTableName and its stream instead of creating a node table', () => {
    const { template } = synthesize({
      ...REAL_CLUSTER,
      'eni-ipam:existingTableName': 'prod-nodes-restored',
      'eni-ipam:existingTableStreamArn': STREAM,
    });
    // The tables created are the watcher's state (a lease and a resume point, no node data,
    // no stream: a new one is as good as the old, so it is never restored) and the IP ledger.
    const tables = template.findResources('AWS::DynamoDB::Table');
    expect(Object.keys(tables).sort()).toEqual([
      expect.stringMatching(/^IpLedger/),
      expect.stringMatching(/^WatchState/),
    ]);
    for (const table of Object.values(tables)) expect(table.Properties.StreamSpecification).toBeUndefined();
    const environments = environmentOf(template);
    for (const [name, variables] of Object.entries(environments)) {
      if (name === 'Watch' || name === 'Ledger') continue;
      expect(variables.TABLE_NAME, name).toBe('prod-nodes-restored');
    }
    // The watcher reads no node record: it hands each node to the allocate function.
    expect(environments.Watch).not.toHaveProperty('TABLE_NAME');
    expect(environments.Watch?.WATCH_TABLE_NAME).toEqual({ Ref: expect.stringMatching(/^WatchState/) });
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', { EventSourceArn: STREAM });
    template.hasResourceProperties('AWS::IAM::Policy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({
            Sid: 'NodeTable',
            Resource: {
              'Fn::Join': ['', Match.arrayWith([Match.stringLikeRegexp(':table/prod-nodes-restored$')])],
            },
          }),
        ]),
      },
    });
  });

  it.each([
    { case: 'a name without its stream', context: { 'eni-ipam:existingTableName': 'prod-nodes-restored' } },
    {
      case: 'the stream of another table',
      context: { 'eni-ipam:existingTableName': 'prod-nodes', 'eni-ipam:existingTableStreamArn': STREAM },
    },
  ])('refuses $case', ({ context }) => {
    expect(() => synthesize({ ...REAL_CLUSTER, ...context })).toThrow(/eni-ipam:existingTable/);
  });
});
