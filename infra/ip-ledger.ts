import { Duration, RemovalPolicy, Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as lambdaEventSources from 'aws-cdk-lib/aws-lambda-event-sources';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { ipLedgerTableSchema } from '../functions/aws/ip-ledger-table.ts';
import { environmentFor } from '../functions/core/function-configuration.ts';
import type { StackConfig } from './config.ts';
import { IpamFunction } from './ipam-function.ts';
import { SERVICE_NAMES } from './service-names.ts';

export interface IpLedgerProps {
  readonly config: StackConfig;
  /** The node table, whose stream (both images) the ledger reads. */
  readonly nodeTable: dynamodb.ITable;
  readonly metricsNamespace: string;
  /** Where stream records the ledger gave up on are parked (alarmed by the stack). */
  readonly deadLetterQueue: sqs.IQueue;
}

/**
 * The IP ledger (`functions/core/ip-ledger.ts`): its table (address and entry key, on-demand, TTL
 * after `ledgerRetentionDays`, point-in-time recovery, retained like the node table) and the
 * ledger function, the node table stream's second consumer beside the sync (DynamoDB streams
 * serve two consumers per shard without throttling). The function may only put items into the
 * ledger table (besides reading the stream); people read it with `npm run inspect -- --ip`.
 */
export function addIpLedger(scope: Construct, props: IpLedgerProps) {
  const { partitionKey, sortKey, timeToLiveAttribute } = ipLedgerTableSchema;
  const table = new dynamodb.Table(scope, 'IpLedger', {
    partitionKey: { name: partitionKey.name, type: dynamodb.AttributeType.STRING },
    sortKey: { name: sortKey.name, type: dynamodb.AttributeType.STRING },
    billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
    timeToLiveAttribute,
    pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
    // An audit trail outlives the stack that wrote it, as the node table does.
    removalPolicy: RemovalPolicy.RETAIN,
  });
  const ledgerFunction = new IpamFunction(scope, 'Ledger', {
    handlerFolder: 'ledger',
    serviceName: SERVICE_NAMES.Ledger,
    description: 'Appends every IP, /28 and /80 assignment and release to the IP ledger',
    timeout: Duration.minutes(1),
    memorySizeMb: 256,
    environment: environmentFor('Ledger', {
      LEDGER_TABLE_NAME: table.tableName,
      LEDGER_RETENTION_DAYS: String(props.config.ledgerRetentionDays),
    }),
    logLevel: props.config.logLevel,
    metricsNamespace: props.metricsNamespace,
  });
  ledgerFunction.role.addToPrincipalPolicy(
    new iam.PolicyStatement({ sid: 'IpLedger', actions: ['dynamodb:PutItem'], resources: [table.tableArn] }),
  );
  ledgerFunction.function.addEventSource(
    new lambdaEventSources.DynamoEventSource(props.nodeTable, {
      startingPosition: lambda.StartingPosition.TRIM_HORIZON,
      batchSize: 100,
      bisectBatchOnError: true,
      retryAttempts: 10,
      maxRecordAge: Duration.hours(24),
      reportBatchItemFailures: true,
      // Order is kept per item (per node) with parallelization: each node's versions in order.
      parallelizationFactor: 2,
      onFailure: new lambdaEventSources.SqsDlq(props.deadLetterQueue),
    }),
  );
  Validations.of(ledgerFunction.function).acknowledge({
    id: 'Serverless-LambdaDLQ',
    reason:
      'Invoked only by its stream event-source mapping, whose on-failure destination (an alarmed SQS queue) parks the records it gives up on; nothing invokes it asynchronously',
  });
  new cloudwatch.Alarm(scope, 'LedgerIteratorAge', {
    alarmDescription: 'The IP ledger is falling behind the node table stream',
    metric: new cloudwatch.Metric({
      namespace: 'AWS/Lambda',
      metricName: 'IteratorAge',
      dimensionsMap: { FunctionName: ledgerFunction.function.functionName },
      statistic: 'Maximum',
      period: Duration.minutes(5),
    }),
    threshold: 600_000,
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: 3,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
  });
  return { table, ledgerFunction };
}
