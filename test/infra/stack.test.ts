import { App, Duration, Stack, Validations } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { AwsSolutionsChecks, ServerlessChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { ipLedgerTableSchema } from '../../functions/aws/ip-ledger-table.ts';
import { nodeTableSchema } from '../../functions/aws/node-table-schema.ts';
import { buildApp, cdkJsonContext } from '../../infra/build-app.ts';
import { readStackConfig, StackConfigError } from '../../infra/config.ts';
import {
  CILIUMNODE_ALLOCATOR,
  CILIUMNODE_WATCHER,
  CILIUMNODE_WRITER,
  type IpamFunctionId,
} from '../../infra/kubernetes-access.ts';

/** Synthesizes with cdk.json's defaults; esbuild bundling skipped (a separate test bundles). */
function synthesize(overrides: Record<string, unknown> = {}): Template {
  const app = new App({ context: { ...cdkJsonContext(), ...overrides, 'aws:cdk:bundling-stacks': [] } });
  const { stack } = buildApp(app);
  app.synth();
  return Template.fromStack(stack);
}

type Statement = {
  Action: string | string[];
  Resource: unknown;
  Condition?: Record<string, unknown>;
  Sid?: string;
};

function statementsOf(template: Template, roleLogicalIdPrefix: string): Statement[] {
  const policies = template.findResources('AWS::IAM::Policy');
  return Object.entries(policies)
    .filter(([logicalId]) => logicalId.startsWith(roleLogicalIdPrefix))
    .flatMap(
      ([, policy]) =>
        (policy as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties.PolicyDocument
          .Statement,
    );
}

const actionsOf = (statement: Statement) => [statement.Action].flat();

describe('the stack', () => {
  let template: Template;
  beforeAll(() => {
    template = synthesize();
  });

  it('keeps the IP ledger in a retained table of its own, with TTL after the retention, written only by the ledger function from the node stream', () => {
    const ledgerTables = Object.entries(template.findResources('AWS::DynamoDB::Table')).filter(([id]) =>
      id.startsWith('IpLedger'),
    );
    expect(ledgerTables).toHaveLength(1);
    expect(ledgerTables[0]?.[1]).toMatchObject({
      DeletionPolicy: 'Retain',
      Properties: {
        KeySchema: [
          { AttributeName: ipLedgerTableSchema.partitionKey.name, KeyType: 'HASH' },
          { AttributeName: ipLedgerTableSchema.sortKey.name, KeyType: 'RANGE' },
        ],
        BillingMode: 'PAY_PER_REQUEST',
        TimeToLiveSpecification: { AttributeName: ipLedgerTableSchema.timeToLiveAttribute, Enabled: true },
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      },
    });
    const ledgerTableId = ledgerTables[0]?.[0];
    const ledgerStatements = statementsOf(template, 'LedgerRole');
    const writes = ledgerStatements.filter((statement) => statement.Sid === 'IpLedger');
    expect(writes).toEqual([
      expect.objectContaining({
        Action: 'dynamodb:PutItem',
        Resource: { 'Fn::GetAtt': [ledgerTableId, 'Arn'] },
      }),
    ]);
    // Besides its put and its logs, only the stream reads the event-source mapping needs.
    const other = ledgerStatements.filter((statement) => statement.Sid !== 'IpLedger').flatMap(actionsOf);
    expect(
      other.filter(
        (action) =>
          !/^(dynamodb:(DescribeStream|GetRecords|GetShardIterator|ListStreams)|sqs:|logs:)/.test(action),
      ),
    ).toEqual([]);
    // No other role may write the ledger.
    for (const [id, policy] of Object.entries(template.findResources('AWS::IAM::Policy'))) {
      if (id.startsWith('LedgerRole')) continue;
      expect(JSON.stringify(policy), id).not.toContain(ledgerTableId);
    }
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: { Ref: Match.stringLikeRegexp('^LedgerFunction') },
      EventSourceArn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^NodesTable'), 'StreamArn'] },
      StartingPosition: 'TRIM_HORIZON',
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BisectBatchOnFunctionError: true,
      DestinationConfig: { OnFailure: { Destination: Match.anyValue() } },
    });
    const ledgerEnvironment = Object.entries(template.findResources('AWS::Lambda::Function')).find(([id]) =>
      id.startsWith('LedgerFunction'),
    )?.[1].Properties.Environment.Variables;
    expect(ledgerEnvironment).toMatchObject({
      LEDGER_RETENTION_DAYS: '90',
      LEDGER_TABLE_NAME: { Ref: ledgerTableId },
    });
    const shorter = synthesize({ 'eni-ipam:ledgerRetentionDays': 7 });
    const shorterEnvironment = Object.entries(shorter.findResources('AWS::Lambda::Function')).find(([id]) =>
      id.startsWith('LedgerFunction'),
    )?.[1].Properties.Environment.Variables;
    expect(shorterEnvironment?.LEDGER_RETENTION_DAYS).toBe('7');
    expect(() => synthesize({ 'eni-ipam:ledgerRetentionDays': 0 })).toThrow(/ledgerRetentionDays/);
  });

  it('keeps the node table as the shared schema says: key, stream of both images, TTL, PITR, retained', () => {
    template.hasResource('AWS::DynamoDB::Table', {
      DeletionPolicy: 'Retain',
      Properties: {
        KeySchema: [{ AttributeName: nodeTableSchema.partitionKey.name, KeyType: 'HASH' }],
        BillingMode: 'PAY_PER_REQUEST',
        StreamSpecification: { StreamViewType: nodeTableSchema.streamViewType },
        TimeToLiveSpecification: { AttributeName: nodeTableSchema.timeToLiveAttribute, Enabled: true },
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
        DeletionProtectionEnabled: true,
      },
    });
  });

  it('runs every function on arm64 with the newest Node.js runtime', () => {
    const functions = Object.values(template.findResources('AWS::Lambda::Function'));
    expect(functions.length).toBeGreaterThanOrEqual(3);
    for (const fn of functions) {
      expect(fn.Properties.Runtime).toBe('nodejs24.x');
      expect(fn.Properties.Architectures).toEqual(['arm64']);
    }
  });

  it('routes EC2 state changes we act on, and spot interruption warnings, to the allocate function', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        source: ['aws.ec2'],
        'detail-type': ['EC2 Instance State-change Notification'],
        detail: { state: ['running', 'shutting-down', 'terminated'] },
      },
      Targets: [
        Match.objectLike({
          Arn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^Allocate'), 'Arn'] },
          DeadLetterConfig: Match.objectLike({ Arn: Match.anyValue() }),
          RetryPolicy: Match.objectLike({ MaximumRetryAttempts: 8 }),
        }),
      ],
    });
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: { source: ['aws.ec2'], 'detail-type': ['EC2 Spot Instance Interruption Warning'] },
    });
  });

  it('schedules the sweep, ENI garbage collection and a full resync, each with a dead-letter queue', () => {
    for (const input of [{ task: 'sweep' }, { task: 'eni-garbage-collection' }, { all: true }]) {
      template.hasResourceProperties('AWS::Events::Rule', {
        ScheduleExpression: Match.stringLikeRegexp('^rate\\('),
        Targets: [Match.objectLike({ Input: JSON.stringify(input), DeadLetterConfig: Match.anyValue() })],
      });
    }
  });

  it('feeds the table stream to the sync function with bounded retries, bisect, partial failures and an on-failure queue', () => {
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: { Ref: Match.stringLikeRegexp('^Sync') },
      StartingPosition: 'TRIM_HORIZON',
      BisectBatchOnFunctionError: true,
      MaximumRetryAttempts: 10,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      DestinationConfig: { OnFailure: { Destination: Match.anyValue() } },
    });
  });

  it('grants EC2 mutations only with ownership- and cluster-tag conditions, and no wildcard actions anywhere', () => {
    const statements = statementsOf(template, 'Allocate');
    for (const statement of Object.values(template.findResources('AWS::IAM::Policy')).flatMap(
      (policy) =>
        (policy as { Properties: { PolicyDocument: { Statement: Statement[] } } }).Properties.PolicyDocument
          .Statement,
    )) {
      for (const action of actionsOf(statement)) expect(action).not.toContain('*');
    }
    const byAction = (action: string) =>
      statements.filter((statement) => actionsOf(statement).includes(action));

    const create = byAction('ec2:CreateNetworkInterface');
    expect(create.map((statement) => statement.Condition)).toEqual(
      expect.arrayContaining([
        {
          StringEquals: {
            'aws:RequestTag/cluster.k8s.amazonaws.com/name': 'my-cluster',
            'aws:RequestTag/serverless-eni-ipam/owner': 'serverless-eni-ipam',
          },
        },
        { ArnEquals: { 'ec2:Vpc': expect.anything() } },
      ]),
    );
    expect(byAction('ec2:CreateTags')).toEqual([
      expect.objectContaining({
        Condition: { StringEquals: { 'ec2:CreateAction': 'CreateNetworkInterface' } },
      }),
    ]);
    const sweepStatements = statementsOf(template, 'Sweep');
    for (const action of [
      'ec2:AttachNetworkInterface',
      'ec2:ModifyNetworkInterfaceAttribute',
      'ec2:AssignPrivateIpAddresses',
      'ec2:AssignIpv6Addresses',
      'ec2:UnassignPrivateIpAddresses',
      'ec2:DetachNetworkInterface',
      'ec2:DeleteNetworkInterface',
    ]) {
      const grants = byAction(action);
      expect(grants.length, action).toBeGreaterThan(0);
      // The sweep allocates for nodes whose events were missed: the same grants, the same conditions.
      expect(
        sweepStatements.filter((statement) => actionsOf(statement).includes(action)),
        `sweep ${action}`,
      ).toEqual(grants);
      for (const grant of grants) {
        expect(grant.Resource, action).not.toBe('*');
        expect(JSON.stringify(grant.Condition), action).toMatch(/aws:ResourceTag\//);
        if (JSON.stringify(grant.Resource).includes('network-interface')) {
          // Keyed on our own ownership tag: VPC CNI's ENIs carry the cluster tag too.
          expect(grant.Condition?.StringEquals, action).toMatchObject({
            'aws:ResourceTag/serverless-eni-ipam/owner': 'serverless-eni-ipam',
            'aws:ResourceTag/cluster.k8s.amazonaws.com/name': 'my-cluster',
          });
        }
      }
    }
    for (const describeStatement of statements.filter((statement) => statement.Resource === '*')) {
      for (const action of actionsOf(describeStatement)) expect(action).toMatch(/^ec2:Describe/);
    }
  });

  it('lets the watcher invoke the allocate function and use its own state table, nothing else; a schedule every minute', () => {
    const statements = statementsOf(template, 'Watch');
    const actions = statements.flatMap(actionsOf);
    // No EC2 action and no node-table access: the allocate function does that work, with its rights.
    expect(actions.filter((action) => action.startsWith('ec2:'))).toEqual([]);
    // Besides its logs and its failed-invocation queue: its own table and the one invoke.
    expect(actions.filter((action) => /^(dynamodb|lambda):/.test(action)).sort()).toEqual([
      'dynamodb:GetItem',
      'dynamodb:UpdateItem',
      'lambda:InvokeFunction',
    ]);
    const invoke = statements.find((statement) => actionsOf(statement).includes('lambda:InvokeFunction'));
    expect(JSON.stringify(invoke?.Resource)).toMatch(/"Allocate[A-Za-z0-9]*Function[0-9A-F]{8}","Arn"/);
    const state = statements.find((statement) => actionsOf(statement).includes('dynamodb:GetItem'));
    expect(JSON.stringify(state?.Resource)).toContain('WatchState');
    const watchEnvironment = Object.entries(template.findResources('AWS::Lambda::Function')).find(([id]) =>
      id.startsWith('Watch'),
    )?.[1].Properties.Environment.Variables;
    expect(watchEnvironment).toMatchObject({ PAUSED: 'false', DEFAULT_PRE_ALLOCATE: '8' });
    expect(watchEnvironment).not.toHaveProperty('TABLE_NAME');
    const schedules = Object.values(template.findResources('AWS::Events::Rule')).filter(
      (rule) => rule.Properties.ScheduleExpression === 'rate(1 minute)',
    );
    const inputs = schedules.flatMap((rule) =>
      (rule.Properties.Targets as { Input?: string }[]).map((target) => target.Input),
    );
    expect(inputs).toContain('{"task":"watch"}');
    expect(Object.keys(template.findResources('AWS::DynamoDB::Table'))).toHaveLength(3);
  });

  it('gives the sync function read-only access to the node table and no EC2 access', () => {
    const actions = statementsOf(template, 'Sync').flatMap(actionsOf);
    expect(actions).toEqual(expect.arrayContaining(['dynamodb:GetItem', 'dynamodb:Scan']));
    expect(actions.filter((action) => action.startsWith('ec2:'))).toEqual([]);
    expect(actions).not.toContain('dynamodb:PutItem');
  });

  it('maps the allocate and sweep roles to the allocator group, the sync role to the writer group, the watch role to the watcher group', () => {
    const entries = template.findResources('AWS::EKS::AccessEntry');
    expect(Object.keys(entries)).toHaveLength(4);
    const groupOf = (functionId: IpamFunctionId) => {
      const [entry] = Object.entries(entries).filter(([logicalId]) => logicalId.startsWith(functionId));
      expect(entry?.[1].Properties).toMatchObject({ ClusterName: 'my-cluster', Type: 'STANDARD' });
      expect(JSON.stringify(entry?.[1].Properties.PrincipalArn)).toContain(`${functionId}Role`);
      return entry?.[1].Properties.KubernetesGroups;
    };
    expect(groupOf('Allocate')).toEqual([CILIUMNODE_ALLOCATOR.name]);
    expect(groupOf('Sweep')).toEqual([CILIUMNODE_ALLOCATOR.name]);
    expect(groupOf('Sync')).toEqual([CILIUMNODE_WRITER.name]);
    expect(groupOf('Watch')).toEqual([CILIUMNODE_WATCHER.name]);
  });

  it('alarms on dead letters, errors, throttles and stream iterator age', () => {
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')).map(
      (alarm) => alarm.Properties.MetricName,
    );
    expect(alarms).toEqual(
      expect.arrayContaining(['ApproximateNumberOfMessagesVisible', 'Errors', 'Throttles', 'IteratorAge']),
    );
  });
});

describe('configuration', () => {
  it.each([
    { case: 'a malformed VPC id', key: 'eni-ipam:vpcId', value: 'vpc-nope', message: /eni-ipam:vpcId/ },
    {
      case: 'a negative pre-allocate',
      key: 'eni-ipam:preAllocate',
      value: -1,
      message: /eni-ipam:preAllocate/,
    },
    {
      case: 'the removed single group',
      key: 'eni-ipam:kubernetesGroup',
      value: 'serverless-eni-ipam',
      message: /kubernetesGroup: no longer read/,
    },
    { case: 'an unknown node naming', key: 'eni-ipam:nodeNaming', value: 'hostname', message: /nodeNaming/ },
  ])('refuses $case with a message naming the key', ({ key, value, message }) => {
    const context = { ...cdkJsonContext(), [key]: value };
    expect(() => readStackConfig((name) => context[name])).toThrow(StackConfigError);
    expect(() => readStackConfig((name) => context[name])).toThrow(message);
  });
});

describe('cdk-nag', () => {
  it('fails synthesis on an unacknowledged finding (so the clean stack above proves something)', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(app, 'Careless');
    const role = new iam.Role(stack, 'Role', { assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com') });
    role.addToPolicy(new iam.PolicyStatement({ actions: ['ec2:*'], resources: ['*'] }));
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    expect(() => app.synth()).toThrow();
  });

  it('fails synthesis on an unacknowledged Serverless finding: a schedule target without a dead-letter queue', () => {
    const careless = (withDeadLetters: boolean) => {
      const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
      const stack = new Stack(app, 'Careless');
      const queue = new sqs.Queue(stack, 'Parked', { enforceSSL: true });
      Validations.of(queue).acknowledge({
        id: 'Serverless-SQSRedrivePolicy',
        reason: 'the test’s own queue',
      });
      new events.Rule(stack, 'Tick', {
        schedule: events.Schedule.rate(Duration.minutes(1)),
        targets: [new targets.SqsQueue(queue, withDeadLetters ? { deadLetterQueue: queue } : {})],
      });
      Validations.of(app).addPlugins(new ServerlessChecks(app));
      return () => app.synth();
    };
    expect(careless(false)).toThrow();
    expect(careless(true)).not.toThrow();
  });
});
