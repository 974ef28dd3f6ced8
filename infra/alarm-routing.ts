import { Duration, type IAspect, Stack } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cloudwatchActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as sns from 'aws-cdk-lib/aws-sns';
import type { IConstruct } from 'constructs';

/**
 * Sends every alarm of the stack (on entering ALARM and on returning to OK) to one SNS topic, the
 * `eni-ipam:alarmTopicArn` context key. An aspect rather than a call per alarm, so an alarm added
 * anywhere in the stack, now or later, cannot be left without the action.
 */
export class RouteAlarmsToTopic implements IAspect {
  private topic: sns.ITopic | undefined;

  constructor(private readonly topicArn: string) {}

  visit(node: IConstruct): void {
    if (!(node instanceof cloudwatch.Alarm)) return;
    this.topic ??= sns.Topic.fromTopicArn(Stack.of(node), 'AlarmTopic', this.topicArn);
    const action = new cloudwatchActions.SnsAction(this.topic);
    node.addAlarmAction(action);
    node.addOkAction(action);
  }
}

export interface EmfAlarmProps {
  /** The namespace and `service` dimension Powertools publishes the function's metrics under. */
  readonly namespace: string;
  readonly service: string;
  readonly metricName: string;
  readonly description: string;
  /** The period: the interval at which the metric is published (the sweep's rate). */
  readonly periodMinutes: number;
  /** Consecutive periods with a point above 0 before the alarm fires. */
  readonly periods: number;
}

/**
 * An alarm on one of our EMF metrics: fires when the metric's maximum stays above 0 for `periods`
 * periods in a row (a node in deficit across several sweeps, a sweep that failed on a
 * node every time). Missing data (no invocation) is not breaching.
 */
export function emfAlarm(scope: IConstruct, id: string, props: EmfAlarmProps): cloudwatch.Alarm {
  return new cloudwatch.Alarm(scope, id, {
    alarmDescription: props.description,
    metric: new cloudwatch.Metric({
      namespace: props.namespace,
      metricName: props.metricName,
      dimensionsMap: { service: props.service },
      statistic: 'Maximum',
      period: Duration.minutes(props.periodMinutes),
    }),
    threshold: 0,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: props.periods,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
}
