import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import type { Construct } from 'constructs';
import { WATCH_STATE_KEY } from '../functions/aws/watch-lease.ts';
import type { StackConfig } from './config.ts';
import { grantEniManagement } from './ec2-permissions.ts';
import { IpamFunction } from './ipam-function.ts';
import { SERVICE_NAMES } from './service-names.ts';

export interface CiliumNodeWatcherProps {
  readonly config: StackConfig;
  /** The allocating functions' environment (the watcher allocates and releases through the same paths). */
  readonly environment: Readonly<Record<string, string>>;
  readonly nodeTableArn: string;
  readonly metricsNamespace: string;
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
 * write, where the sweep would take up to a minute; the sweep stays the safety net.
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
    environment: { ...props.environment, WATCH_TABLE_NAME: stateTable.tableName },
    logLevel: props.config.logLevel,
    metricsNamespace: props.metricsNamespace,
  });
  const role = watchFunction.role;
  grantEniManagement(role, props.config);
  role.addToPrincipalPolicy(
    new iam.PolicyStatement({
      sid: 'NodeTable',
      actions: ['dynamodb:GetItem', 'dynamodb:PutItem'],
      resources: [props.nodeTableArn],
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
    // No retries: the next tick comes within the minute.
    targets: [
      new targets.LambdaFunction(watchFunction.function, {
        event: events.RuleTargetInput.fromObject({ task: 'watch' }),
        retryAttempts: 0,
        maxEventAge: Duration.minutes(1),
      }),
    ],
  });
  return { watchFunction, stateTable };
}
