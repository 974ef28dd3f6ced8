// biome-ignore-all lint/suspicious/noTemplateCurlyInString: these strings are CloudFormation Fn::Sub text, not JavaScript templates
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  type CloudFormationTemplate,
  type LocalValues,
  readStackModel,
  resolveTokens,
  TemplateError,
} from './template.ts';

const LOCAL: LocalValues = {
  ref: (logicalId) => ({ Table: 'stack-Table-ABC', Fn: 'stack-Fn-DEF' })[logicalId],
  getAtt: (logicalId, attribute) =>
    logicalId === 'Table' && attribute === 'StreamArn'
      ? 'arn:stream'
      : logicalId === 'Fn' && attribute === 'Arn'
        ? 'arn:fn'
        : undefined,
  pseudo: { 'AWS::Region': 'us-east-1', 'AWS::AccountId': '123456789012' },
};

describe('resolveTokens', () => {
  it.each([
    { case: 'a plain value', value: 'x', resolved: 'x' },
    { case: 'Ref of a resource', value: { Ref: 'Table' }, resolved: 'stack-Table-ABC' },
    { case: 'Ref of a pseudo parameter', value: { Ref: 'AWS::Region' }, resolved: 'us-east-1' },
    { case: 'Fn::GetAtt', value: { 'Fn::GetAtt': ['Table', 'StreamArn'] }, resolved: 'arn:stream' },
    { case: 'Fn::Join', value: { 'Fn::Join': ['/', ['a', { Ref: 'Fn' }]] }, resolved: 'a/stack-Fn-DEF' },
    {
      case: 'Fn::Sub with resources, attributes and pseudo parameters',
      value: { 'Fn::Sub': 'arn:aws:lambda:${AWS::Region}:${AWS::AccountId}:${Fn}:${Fn.Arn}' },
      resolved: 'arn:aws:lambda:us-east-1:123456789012:stack-Fn-DEF:arn:fn',
    },
    {
      case: 'Fn::Sub with its own variables',
      value: { 'Fn::Sub': ['${X}-${Table}', { X: { Ref: 'Fn' } }] },
      resolved: 'stack-Fn-DEF-stack-Table-ABC',
    },
    {
      case: 'Fn::Select',
      value: { 'Fn::Select': [1, ['a', { Ref: 'Table' }]] },
      resolved: 'stack-Table-ABC',
    },
    { case: 'nested objects', value: { a: [{ Ref: 'Fn' }] }, resolved: { a: ['stack-Fn-DEF'] } },
  ])('$case', ({ value, resolved }) => {
    expect(resolveTokens(value, LOCAL)).toEqual(resolved);
  });

  it.each([
    { case: 'an unknown resource', value: { Ref: 'Queue' } },
    { case: 'an unknown attribute', value: { 'Fn::GetAtt': ['Table', 'Arn'] } },
    { case: 'an unsupported intrinsic', value: { 'Fn::ImportValue': 'shared' } },
    { case: 'an unknown Sub variable', value: { 'Fn::Sub': '${Nope}' } },
  ])('refuses $case, naming it', ({ value }) => {
    expect(() => resolveTokens(value, LOCAL, 'Fn.Environment.X')).toThrow(TemplateError);
    expect(() => resolveTokens(value, LOCAL, 'Fn.Environment.X')).toThrow(/Fn\.Environment\.X/);
  });
});

describe('readStackModel', () => {
  const directories: string[] = [];
  afterAll(() => {
    for (const directory of directories) rmSync(directory, { recursive: true, force: true });
  });
  const assembly = () => {
    const directory = mkdtempSync(join(tmpdir(), 'template-test-'));
    directories.push(directory);
    mkdirSync(join(directory, 'asset.abc'));
    writeFileSync(join(directory, 'asset.abc', 'index.mjs'), 'export const handler = async () => null;\n');
    return directory;
  };
  const lambda = (metadata: Record<string, unknown> = { 'aws:asset:path': 'asset.abc' }) => ({
    Type: 'AWS::Lambda::Function',
    Properties: {
      Handler: 'index.handler',
      Runtime: 'nodejs22.x',
      Environment: { Variables: { TABLE: { Ref: 'Table' } } },
    },
    Metadata: metadata,
  });

  it('reads functions, rules with their targets and Input, the stream mapping and the table', () => {
    const directory = assembly();
    const template: CloudFormationTemplate = {
      Resources: {
        Fn: lambda(),
        Rule: {
          Type: 'AWS::Events::Rule',
          Properties: {
            ScheduleExpression: 'rate(1 minute)',
            Targets: [{ Id: 'Target0', Arn: { 'Fn::GetAtt': ['Fn', 'Arn'] }, Input: '{"all":true}' }],
          },
        },
        Mapping: {
          Type: 'AWS::Lambda::EventSourceMapping',
          Properties: {
            FunctionName: { Ref: 'Fn' },
            EventSourceArn: { 'Fn::GetAtt': ['Table', 'StreamArn'] },
            StartingPosition: 'TRIM_HORIZON',
            BatchSize: 7,
            FunctionResponseTypes: ['ReportBatchItemFailures'],
          },
        },
        Table: {
          Type: 'AWS::DynamoDB::Table',
          Properties: {
            KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
            AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
            BillingMode: 'PAY_PER_REQUEST',
            StreamSpecification: { StreamViewType: 'NEW_IMAGE' },
            TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true },
          },
        },
      },
    };
    const model = readStackModel(template, directory);
    expect(model.functions).toMatchObject([
      {
        logicalId: 'Fn',
        entryFile: join(directory, 'asset.abc', 'index.mjs'),
        handlerExport: 'handler',
        timeoutSeconds: 3,
      },
    ]);
    expect(model.rules).toEqual([
      {
        logicalId: 'Rule',
        enabled: true,
        scheduleExpression: 'rate(1 minute)',
        targets: [{ id: 'Target0', functionLogicalId: 'Fn', input: { all: true } }],
      },
    ]);
    expect(model.streamMappings).toMatchObject([
      {
        functionLogicalId: 'Fn',
        tableLogicalId: 'Table',
        batchSize: 7,
        reportBatchItemFailures: true,
        maximumRetryAttempts: -1,
      },
    ]);
    expect(model.tables).toMatchObject([
      { logicalId: 'Table', streamViewType: 'NEW_IMAGE', timeToLiveAttribute: 'ttl' },
    ]);
  });

  it('refuses a function synthesized without asset metadata', () => {
    expect(() => readStackModel({ Resources: { Fn: lambda({}) } }, assembly())).toThrow(
      /aws:cdk:enable-asset-metadata/,
    );
  });

  it('refuses a rule target that is not a function of the template', () => {
    const template: CloudFormationTemplate = {
      Resources: {
        Rule: {
          Type: 'AWS::Events::Rule',
          Properties: {
            EventPattern: { source: ['aws.ec2'] },
            Targets: [{ Id: 'Q', Arn: { 'Fn::GetAtt': ['Queue', 'Arn'] } }],
          },
        },
      },
    };
    expect(() => readStackModel(template, assembly())).toThrow(TemplateError);
  });
});
