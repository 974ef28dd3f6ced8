import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { WATCH_STATE_KEY } from '../functions/aws/watch-lease.ts';
import { environmentFor, type VariableName } from '../functions/core/function-configuration.ts';
import type { StackConfig } from './config.ts';
import { IpamFunction } from './ipam-function.ts';
import { SERVICE_NAMES } from './service-names.ts';

export interface CiliumNodeWatcherProps {
  readonly config: StackConfig;
  /**
   * The stack's configuration values; the watcher takes its own (`environmentFor('Watch')`: the
   * Kubernetes connection, the default knobs, which are the watermark of nodes whose CiliumNode does
   * not set them, and `PAUSED`) and adds its table and the allocate function's name.
   */
  readonly values: Readonly<Partial<Record<VariableName, string>>>;
  /** Serves the nodes the watcher names (`{"task":"serve-nodes",...}`): the only function it invokes. */
  readonly allocateFunction: lambda.IFunction;
  readonly metricsNamespace: string;
  /** Where EventBridge parks a tick it could not deliver (alarmed by the stack). */
  readonly deadLetterQueue: sqs.IQueue;
}

export interface CiliumNodeWatcher {
  readonly watchFunction: IpamFunction;
  readonly stateTable: dynamodb.Table;
}

/**
 * The CiliumNode watcher, with nothing in the cluster: a function invoked every minute that holds
 * a watch on CiliumNodes for up to 13 of its 15 minutes (single flight through a lease item in its
 * own small table, which also keeps the resourceVersion to resume from; the tick that arrives in a
 * holder's last minute stands by and takes over). It serves nodes whose demand crossed the
 * watermark or whose release handshake the agent answered, within about a second of the agent's
 * write, where the sweep would take up to a minute; the sweep stays the safety net. Its role can
 * invoke the allocate function (which does the work, with its own rights) and use its own table,
 * nothing else: no EC2 action and no node-table access; in Kubernetes only `list` and `watch` on
 * CiliumNodes (`CILIUMNODE_WATCHER`).
 */
export function addCiliumNodeWatcher(scope: Construct, props: CiliumNodeWatcherProps): CiliumNodeWatcher {
  const stateTable = new dynamodb.Table(scope, 'WatchState', {
    partitionKey: { name: WATCH_STATE_KEY, type: dynamodb.AttributeType.STRING },
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    // Only a lease and a resume point: without them the next watcher lists every CiliumNode again.
    removalPolicy: RemovalPolicy.DESTROY,
  });
  const watchFunction = new IpamFunction(scope, 'Watch', {
    handlerFolder: 'watch',
    serviceName: SERVICE_NAMES.Watch,
    description: 'Watches CiliumNodes and serves demand that crossed the watermark within a second',
    timeout: Duration.minutes(15),
    memorySizeMb: 256,
    environment: environmentFor('Watch', {
      ...props.values,
      WATCH_TABLE_NAME: stateTable.tableName,
      ALLOCATE_FUNCTION_NAME: props.allocateFunction.functionName,
    }),
    logLevel: props.config.logLevel,
    metricsNamespace: props.metricsNamespace,
  });
  const role = watchFunction.role;
  role.addToPrincipalPolicy(
    new iam.PolicyStatement({
      sid: 'ServeNodes',
      actions: ['lambda:InvokeFunction'],
      resources: [props.allocateFunction.functionArn],
    }),
  );
  role.addToPrincipalPolicy(
    new iam.PolicyStatement({
      sid: 'WatchState',
      actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
      resources: [stateTable.tableArn],
    }),
  );
  new events.Rule(scope, 'WatchSchedule', {
    description:
      'Re-arms the CiliumNode watcher: a tick finds the lease held, stands by for its end, or takes it',
    schedule: events.Schedule.rate(Duration.minutes(1)),
    // No retries: the next tick comes within the minute. A tick that could not be delivered is
    // parked (and alarmed): the watcher is not being re-armed.
    targets: [
      new targets.LambdaFunction(watchFunction.function, {
        event: events.RuleTargetInput.fromObject({ task: 'watch' }),
        deadLetterQueue: props.deadLetterQueue,
        retryAttempts: 0,
        maxEventAge: Duration.minutes(1),
      }),
    ],
  });
  return { watchFunction, stateTable };
}
