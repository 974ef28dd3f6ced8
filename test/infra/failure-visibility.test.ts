import { App } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildApp, cdkJsonContext } from '../../infra/build-app.ts';

/** Synthesizes with cdk.json's defaults plus `overrides`; esbuild bundling skipped. */
function synthesize(overrides: Record<string, unknown> = {}): Template {
  const app = new App({ context: { ...cdkJsonContext(), ...overrides, 'aws:cdk:bundling-stacks': [] } });
  const { stack } = buildApp(app);
  app.synth();
  return Template.fromStack(stack);
}

const TOPIC_ARN = 'arn:aws:sns:us-east-1:123456789012:platform-pager';
const functionLogicalIds = (template: Template) =>
  Object.keys(template.findResources('AWS::Lambda::Function'));

describe('failures are seen', () => {
  let defaults: Template;
  let asked: Template;
  beforeAll(() => {
    defaults = synthesize();
    asked = synthesize({
      'eni-ipam:alarmTopicArn': TOPIC_ARN,
      'eni-ipam:sweepReservedConcurrency': 2,
      'eni-ipam:allocateReservedConcurrency': '50',
    });
  });

  it('parks every async invocation that failed after its retries in an SQS queue of its own, alarmed', () => {
    const scheduledOrEventTargets = new Set(
      Object.values(defaults.findResources('AWS::Events::Rule')).flatMap((rule) =>
        (rule.Properties.Targets as { Arn: { 'Fn::GetAtt': [string, string] } }[]).map(
          (target) => target.Arn['Fn::GetAtt'][0],
        ),
      ),
    );
    const configs = Object.values(defaults.findResources('AWS::Lambda::EventInvokeConfig'));
    const configured = configs.map((config) => (config.Properties.FunctionName as { Ref: string }).Ref);
    expect(new Set(configured)).toEqual(scheduledOrEventTargets);
    expect(scheduledOrEventTargets.size).toBe(5);
    const queueIds = configs.map((config) => {
      expect(config.Properties).toMatchObject({ MaximumRetryAttempts: 2, MaximumEventAgeInSeconds: 21_600 });
      return (
        config.Properties.DestinationConfig as { OnFailure: { Destination: { 'Fn::GetAtt': string[] } } }
      ).OnFailure.Destination['Fn::GetAtt'][0];
    });
    const queues = defaults.findResources('AWS::SQS::Queue');
    const alarms = Object.values(defaults.findResources('AWS::CloudWatch::Alarm'));
    for (const queueId of queueIds) {
      expect(queues[queueId as string], queueId).toBeDefined();
      expect(
        alarms.some((alarm) =>
          JSON.stringify(alarm.Properties.Dimensions).includes(`"${queueId}","QueueName"`),
        ),
        `${queueId} alarmed`,
      ).toBe(true);
    }
  });

  it('runs ENI garbage collection in its own function, so a capped sweep never throttles it', () => {
    defaults.hasResourceProperties('AWS::Events::Rule', {
      Targets: [
        Match.objectLike({
          Input: JSON.stringify({ task: 'eni-garbage-collection' }),
          Arn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^GarbageCollection'), 'Arn'] },
        }),
      ],
    });
    defaults.hasResourceProperties('AWS::Events::Rule', {
      Targets: [
        Match.objectLike({
          Input: JSON.stringify({ task: 'sweep' }),
          Arn: { 'Fn::GetAtt': [Match.stringLikeRegexp('^Sweep'), 'Arn'] },
        }),
      ],
    });
  });

  it('reserves no concurrency unless asked, and exactly what was asked', () => {
    for (const fn of Object.values(defaults.findResources('AWS::Lambda::Function'))) {
      expect(fn.Properties.ReservedConcurrentExecutions).toBeUndefined();
    }
    const reserved = Object.fromEntries(
      Object.entries(asked.findResources('AWS::Lambda::Function')).map(([id, fn]) => [
        id.replace(/Function[0-9A-F]{8}$/, ''),
        fn.Properties.ReservedConcurrentExecutions,
      ]),
    );
    expect(reserved).toEqual({
      Allocate: 50,
      Sweep: 2,
      GarbageCollection: undefined,
      Sync: undefined,
      Watch: undefined,
      Ledger: undefined,
    });
    expect(functionLogicalIds(asked)).toHaveLength(6);
  });

  it('alarms on nodes in deficit and on sweep failures, from the EMF metrics of this cluster', () => {
    for (const metricName of ['ipam_nodes_in_deficit', 'ipam_sweep_failures']) {
      defaults.hasResourceProperties('AWS::CloudWatch::Alarm', {
        Namespace: 'ServerlessEniIpam/my-cluster',
        MetricName: metricName,
        Dimensions: [{ Name: 'service', Value: 'serverless-eni-ipam-sweep' }],
        Threshold: 0,
      });
    }
    for (const fn of Object.values(defaults.findResources('AWS::Lambda::Function'))) {
      expect(fn.Properties.Environment.Variables.POWERTOOLS_METRICS_NAMESPACE).toBe(
        'ServerlessEniIpam/my-cluster',
      );
    }
  });

  it('alarms on the sweep failures of the sweep alone: its dimensions name only the sweep function’s service', () => {
    const alarms = Object.values(defaults.findResources('AWS::CloudWatch::Alarm')).filter(
      (alarm) => alarm.Properties.MetricName === 'ipam_sweep_failures',
    );
    expect(alarms).toHaveLength(1);
    // The complete dimension set: a point published under any other dimensions is another metric.
    expect(alarms[0]?.Properties.Dimensions).toEqual([
      { Name: 'service', Value: 'serverless-eni-ipam-sweep' },
    ]);
    const services = Object.fromEntries(
      Object.entries(defaults.findResources('AWS::Lambda::Function')).map(([id, fn]) => [
        id.replace(/Function[0-9A-F]{8}$/, ''),
        fn.Properties.Environment.Variables.POWERTOOLS_SERVICE_NAME,
      ]),
    );
    // The garbage collection runs the sweep's code, but publishes under a service of its own.
    expect(services).toEqual({
      Allocate: 'serverless-eni-ipam-allocate',
      Sweep: 'serverless-eni-ipam-sweep',
      GarbageCollection: 'serverless-eni-ipam-garbage-collection',
      Sync: 'serverless-eni-ipam-sync',
      Watch: 'serverless-eni-ipam-watch',
      Ledger: 'serverless-eni-ipam-ledger',
    });
  });

  it('sends every alarm to the alarm topic when one is given, and has no actions otherwise', () => {
    const withTopic = Object.values(asked.findResources('AWS::CloudWatch::Alarm'));
    expect(withTopic.length).toBeGreaterThan(10);
    for (const alarm of withTopic) {
      expect(alarm.Properties.AlarmActions).toEqual([TOPIC_ARN]);
      expect(alarm.Properties.OKActions).toEqual([TOPIC_ARN]);
    }
    for (const alarm of Object.values(defaults.findResources('AWS::CloudWatch::Alarm'))) {
      expect(alarm.Properties.AlarmActions).toBeUndefined();
    }
  });

  it('has a dashboard of the cluster’s metrics and every alarm', () => {
    const dashboards = Object.values(defaults.findResources('AWS::CloudWatch::Dashboard'));
    expect(dashboards).toHaveLength(1);
    const body = JSON.stringify(dashboards[0]?.Properties.DashboardBody);
    for (const name of [
      'ipam_nodes_in_deficit',
      'ipam_ip_allocation_ops',
      'ipam_k8s_sync_writes',
      'ipam_eni_gc_deleted',
      'ServerlessEniIpam/my-cluster',
    ]) {
      expect(body).toContain(name);
    }
    // Each graphed metric under the service of the function that publishes it.
    const unescaped = body.replaceAll('\\', '');
    expect(unescaped).toContain('"ipam_sweep_failures","service","serverless-eni-ipam-sweep"');
    expect(unescaped).toContain('"ipam_eni_gc_deleted","service","serverless-eni-ipam-garbage-collection"');
    for (const alarmId of Object.keys(defaults.findResources('AWS::CloudWatch::Alarm'))) {
      expect(body).toContain(alarmId);
    }
  });

  it.each([
    { case: 'a topic that is not an SNS ARN', key: 'eni-ipam:alarmTopicArn', value: 'platform-pager' },
    { case: 'a zero sweep reservation', key: 'eni-ipam:sweepReservedConcurrency', value: 0 },
    { case: 'a fractional allocate reservation', key: 'eni-ipam:allocateReservedConcurrency', value: 1.5 },
  ])('refuses $case, naming the key', ({ key, value }) => {
    expect(() => synthesize({ [key]: value })).toThrow(key);
  });
});
