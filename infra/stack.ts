import { Aspects, CfnOutput, Duration, Stack, type StackProps, Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as eks from 'aws-cdk-lib/aws-eks';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as lambdaDestinations from 'aws-cdk-lib/aws-lambda-destinations';
import * as lambdaEventSources from 'aws-cdk-lib/aws-lambda-event-sources';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { EC2_SPOT_INTERRUPTION_DETAIL_TYPE, EC2_STATE_CHANGE_DETAIL_TYPE } from '../functions/core/events.ts';
import { environmentFor, type VariableName } from '../functions/core/function-configuration.ts';
import { emfAlarm, RouteAlarmsToTopic } from './alarm-routing.ts';
import type { StackConfig } from './config.ts';
import { addDashboard } from './dashboard.ts';
import { placeholderMessage, placeholdersLeft, refuseDeployUnless } from './deployability.ts';
import { grantEniManagement } from './ec2-permissions.ts';
import { placeInVpc } from './function-vpc.ts';
import { addIpLedger } from './ip-ledger.ts';
import { IpamFunction } from './ipam-function.ts';
import { FUNCTION_KUBERNETES_GROUPS, type IpamFunctionId } from './kubernetes-access.ts';
import { outputAwsAuthMappings } from './kubernetes-identities.ts';
import { NodeTable } from './node-table.ts';
import { SERVICE_NAMES } from './service-names.ts';
import { addCiliumNodeWatcher } from './watcher.ts';

export interface EniIpamStackProps extends StackProps {
  readonly config: StackConfig;
}

/** The EC2 instance states the allocating function acts on. */
const ACTED_ON_INSTANCE_STATES = ['running', 'shutting-down', 'terminated'] as const;

/**
 * Everything serverless-eni-ipam installs, in one stack: the node table; the allocate function (EC2
 * events), the sweep function (schedules: reconcile every node, ENI garbage collection) and the sync
 * function (the table's stream, a resync schedule, manual invoke); dead-letter queues, alarms, and
 * least-privilege IAM and Kubernetes access.
 */
export class EniIpamStack extends Stack {
  readonly nodeTable: NodeTable;
  readonly allocateFunction: IpamFunction;
  readonly sweepFunction: IpamFunction;
  /** ENI garbage collection: the sweep's code in a function of its own, so neither throttles the other. */
  readonly garbageCollectionFunction: IpamFunction;
  readonly syncFunction: IpamFunction;
  /** The CiliumNode watcher (infra/watcher.ts). */
  readonly watchFunction: IpamFunction;
  /** The IP ledger's writer, the node table stream's second consumer (infra/ip-ledger.ts). */
  readonly ledgerFunction: IpamFunction;
  /** Where the functions' EMF metrics go: one namespace per cluster, so two stacks' alarms never mix. */
  readonly metricsNamespace: string;

  constructor(scope: Construct, id: string, props: EniIpamStackProps) {
    super(scope, id, props);
    const { config } = props;
    this.nodeTable = new NodeTable(
      this,
      'Nodes',
      config.existingTableName && config.existingTableStreamArn
        ? { tableName: config.existingTableName, streamArn: config.existingTableStreamArn }
        : undefined,
    );
    const table = this.nodeTable.table;
    this.metricsNamespace = `ServerlessEniIpam/${config.clusterName}`;
    const metricsNamespace = this.metricsNamespace;

    // Every value the stack sets, once; each function gets exactly the variables it reads
    // (`environmentFor`, the configuration contract). Both EKS modes authenticate the same way (an
    // IAM token for the function's role); only how the role is mapped to Kubernetes groups differs.
    // `none` (local cloud) reads KUBECONFIG.
    const values: Partial<Record<VariableName, string>> = {
      TABLE_NAME: table.tableName,
      CLUSTER_NAME: config.clusterName,
      CLUSTER_TAG_VALUES: config.clusterTagValues.join(','),
      NODE_NAMING: config.nodeNaming,
      PREFIX_DELEGATION: String(config.prefixDelegation),
      RELEASE_EXCESS_IPS: String(config.releaseExcessIps),
      EXCESS_IP_RELEASE_DELAY_SECONDS: String(config.excessIpReleaseDelaySeconds),
      ENI_TAGS: JSON.stringify(config.eniTags),
      ENI_GC_GRACE_MINUTES: String(config.eniGarbageCollectionGraceMinutes),
      RETIRED_RECORD_RETENTION_DAYS: String(config.retiredRecordRetentionDays),
      // The stack's knobs for nodes whose agent has not registered, and the pause switch: the
      // allocating functions and the watcher (which judges demand with them) read the same values.
      DEFAULT_PRE_ALLOCATE: String(config.preAllocate),
      DEFAULT_MIN_ALLOCATE: String(config.minAllocate),
      DEFAULT_MAX_ALLOCATE: String(config.maxAllocate),
      DEFAULT_MAX_ABOVE_WATERMARK: String(config.maxAboveWatermark),
      DEFAULT_FIRST_INTERFACE_INDEX: String(config.firstInterfaceIndex),
      PAUSED: String(config.paused),
      CILIUM_CONFIG_NAMESPACE: config.ciliumConfig.namespace,
      CILIUM_CONFIG_NAME: config.ciliumConfig.name,
      CILIUM_VERSION: config.ciliumVersion,
      ...(config.kubernetesAccess !== 'none'
        ? {
            EKS_CLUSTER_NAME: config.clusterName,
            EKS_ENDPOINT: config.eksEndpoint,
            EKS_CA_DATA: config.eksCertificateAuthorityData,
          }
        : {}),
    };

    this.allocateFunction = new IpamFunction(this, 'Allocate', {
      handlerFolder: 'allocate',
      serviceName: SERVICE_NAMES.Allocate,
      description: 'Allocates ENIs and IPs when an EC2 instance of the cluster starts running',
      timeout: Duration.minutes(2),
      environment: environmentFor('Allocate', values),
      logLevel: config.logLevel,
      metricsNamespace,
      reservedConcurrentExecutions: config.allocateReservedConcurrency,
    });
    this.sweepFunction = new IpamFunction(this, 'Sweep', {
      handlerFolder: 'sweep',
      serviceName: SERVICE_NAMES.Sweep,
      description: 'Reconciles every node of the cluster with EC2',
      timeout: Duration.minutes(5),
      environment: environmentFor('Sweep', values),
      logLevel: config.logLevel,
      metricsNamespace,
      // Overlapping sweeps only contend for the same node leases (harmless); a cap is a lever on
      // EC2 API pressure, for accounts with the concurrency quota to reserve it.
      reservedConcurrentExecutions: config.sweepReservedConcurrency,
    });
    this.garbageCollectionFunction = new IpamFunction(this, 'GarbageCollection', {
      handlerFolder: 'sweep',
      serviceName: SERVICE_NAMES.GarbageCollection,
      description: 'Deletes detached ENIs of ours that no live node record references',
      timeout: Duration.minutes(5),
      environment: environmentFor('GarbageCollection', values),
      logLevel: config.logLevel,
      metricsNamespace,
    });
    this.syncFunction = new IpamFunction(this, 'Sync', {
      handlerFolder: 'sync',
      serviceName: SERVICE_NAMES.Sync,
      description: 'Writes one consistent node-record version to the CiliumNode: status first, then spec',
      timeout: Duration.minutes(2),
      environment: environmentFor('Sync', values),
      logLevel: config.logLevel,
      metricsNamespace,
    });

    this.watchFunction = addCiliumNodeWatcher(this, {
      config,
      values,
      allocateFunction: this.allocateFunction.function,
      metricsNamespace,
      deadLetterQueue: this.deadLetterQueue('WatchScheduleDeadLetters'),
    }).watchFunction;

    for (const allocator of [this.allocateFunction, this.sweepFunction, this.garbageCollectionFunction]) {
      grantEniManagement(allocator.role, config);
      grantNodeRecordAccess(allocator.role, table.tableArn, [
        'dynamodb:GetItem',
        'dynamodb:PutItem',
        'dynamodb:Scan',
        // The table's generation (its creation time), once per container: allocate and sweep stamp
        // the records they observe EC2 for with it, the sync orders tables by it. GC needs none.
        ...(allocator === this.garbageCollectionFunction ? [] : ['dynamodb:DescribeTable']),
      ]);
    }
    grantNodeRecordAccess(this.syncFunction.role, table.tableArn, [
      'dynamodb:GetItem',
      'dynamodb:Scan',
      'dynamodb:DescribeTable',
    ]);

    const ipLedger = addIpLedger(this, {
      config,
      nodeTable: table,
      metricsNamespace,
      deadLetterQueue: this.deadLetterQueue('LedgerStreamDeadLetters'),
    });
    this.ledgerFunction = ipLedger.ledgerFunction;

    this.routeEc2Events(config);
    this.scheduleSweeps(config);
    this.connectStreamToSync();
    this.parkFailedInvocations();
    // The functions that talk to the API server (garbage collection only talks to EC2 and DynamoDB).
    const kubernetesClients = [
      this.allocateFunction,
      this.sweepFunction,
      this.syncFunction,
      this.watchFunction,
    ];
    if (config.vpcSubnetIds && config.vpcSecurityGroupIds) {
      for (const client of kubernetesClients) {
        placeInVpc(client, { subnetIds: config.vpcSubnetIds, securityGroupIds: config.vpcSecurityGroupIds });
      }
    }
    if (config.kubernetesAccess === 'access-entry') this.grantKubernetesAccess(config);
    if (config.kubernetesAccess === 'aws-auth') {
      outputAwsAuthMappings(
        this,
        config,
        kubernetesClients.map((client) => ({
          name: client.node.id,
          role: client.role,
          groups: [FUNCTION_KUBERNETES_GROUPS[client.node.id as IpamFunctionId].name],
        })),
      );
    }
    refuseDeployUnless(this, deployProblems(config));
    this.addAlarms(config);
    if (config.alarmTopicArn) Aspects.of(this).add(new RouteAlarmsToTopic(config.alarmTopicArn));
    addDashboard(
      this,
      this.metricsNamespace,
      this.node
        .findAll()
        .filter((construct): construct is cloudwatch.Alarm => construct instanceof cloudwatch.Alarm),
    );

    new CfnOutput(this, 'NodeTableName', { value: table.tableName });
    new CfnOutput(this, 'LedgerTableName', {
      value: ipLedger.table.tableName,
      description: 'The IP ledger: npm run inspect -- --ip <address> [--at <time>]',
    });
    new CfnOutput(this, 'SyncFunctionName', {
      value: this.syncFunction.function.functionName,
      description: 'Invoke with {"instanceId":"i-..."} or {"all":true} to resync CiliumNodes',
    });
    Validations.of(this).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        'EC2 Describe* actions (DescribeInstances, DescribeNetworkInterfaces, DescribeSubnets, ...) do not support resource-level permissions; every mutating action is scoped by resource and tag conditions',
    });
  }

  private readonly deadLetterQueues: sqs.Queue[] = [];

  private deadLetterQueue(id: string): sqs.Queue {
    const queue = new sqs.Queue(this, id, {
      retentionPeriod: Duration.days(14),
      enforceSSL: true,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
    });
    Validations.of(queue).acknowledge({
      id: 'AwsSolutions-SQS3',
      reason:
        'This queue IS a dead-letter queue (for EventBridge targets or the stream mapping on-failure destination)',
    });
    Validations.of(queue).acknowledge({
      id: 'Serverless-SQSRedrivePolicy',
      reason:
        'This queue IS the end of the line: nothing consumes it (a person reads it after its NotEmpty alarm), and a redrive policy only moves messages a consumer received too often',
    });
    this.deadLetterQueues.push(queue);
    return queue;
  }

  private routeEc2Events(config: StackConfig): void {
    const deadLetterQueue = this.deadLetterQueue('Ec2EventsDeadLetters');
    const target = new targets.LambdaFunction(this.allocateFunction.function, {
      deadLetterQueue,
      retryAttempts: 8,
      maxEventAge: Duration.hours(2),
    });
    new events.Rule(this, 'InstanceStateChanges', {
      description: `EC2 instance state changes the allocator acts on (cluster ${config.clusterName} is decided by instance tags)`,
      eventPattern: {
        source: ['aws.ec2'],
        detailType: [EC2_STATE_CHANGE_DETAIL_TYPE],
        detail: { state: [...ACTED_ON_INSTANCE_STATES] },
      },
      targets: [target],
    });
    new events.Rule(this, 'SpotInterruptions', {
      description: 'Spot interruption warnings: stop allocating to instances about to go away',
      eventPattern: { source: ['aws.ec2'], detailType: [EC2_SPOT_INTERRUPTION_DETAIL_TYPE] },
      targets: [target],
    });
  }

  private scheduleSweeps(config: StackConfig): void {
    const deadLetterQueue = this.deadLetterQueue('ScheduleDeadLetters');
    const scheduled = (fn: lambda.IFunction, task: Record<string, unknown>) =>
      new targets.LambdaFunction(fn, {
        event: events.RuleTargetInput.fromObject(task),
        deadLetterQueue,
        retryAttempts: 2,
        maxEventAge: Duration.minutes(10),
      });
    new events.Rule(this, 'SweepSchedule', {
      description: 'Reconcile every node: EC2 events are best effort',
      schedule: events.Schedule.rate(Duration.minutes(config.sweepRateMinutes)),
      targets: [scheduled(this.sweepFunction.function, { task: 'sweep' })],
    });
    new events.Rule(this, 'EniGarbageCollectionSchedule', {
      description: 'Delete detached ENIs of ours that no live node record references',
      schedule: events.Schedule.rate(Duration.minutes(config.garbageCollectionRateMinutes)),
      targets: [scheduled(this.garbageCollectionFunction.function, { task: 'eni-garbage-collection' })],
    });
    new events.Rule(this, 'ResyncSchedule', {
      description:
        'Resync every CiliumNode (heals CiliumNodes created or replaced after their last record write)',
      schedule: events.Schedule.rate(Duration.minutes(config.sweepRateMinutes)),
      targets: [scheduled(this.syncFunction.function, { all: true })],
    });
  }

  private connectStreamToSync(): void {
    const onFailure = this.deadLetterQueue('StreamDeadLetters');
    this.syncFunction.function.addEventSource(
      new lambdaEventSources.DynamoEventSource(this.nodeTable.table, {
        // LATEST can miss records written while the mapping is being created or updated.
        startingPosition: lambda.StartingPosition.TRIM_HORIZON,
        batchSize: 100,
        maxBatchingWindow: Duration.seconds(0),
        bisectBatchOnError: true,
        retryAttempts: 10,
        maxRecordAge: Duration.hours(6),
        reportBatchItemFailures: true,
        // Order is kept per item (per node) with parallelization; nodes sync independently.
        parallelizationFactor: 4,
        onFailure: new lambdaEventSources.SqsDlq(onFailure),
      }),
    );
  }

  /**
   * Lambda's own async handling of every asynchronously invoked function (EventBridge targets):
   * after the invocation's retries, the event goes to an SQS queue of its own (alarmed below)
   * instead of being dropped. The rules' dead-letter queues only catch events EventBridge could not
   * deliver; a function error after delivery ends here.
   */
  private parkFailedInvocations(): void {
    for (const ipamFunction of [
      this.allocateFunction,
      this.sweepFunction,
      this.garbageCollectionFunction,
      this.syncFunction,
      this.watchFunction,
    ]) {
      const queue = this.deadLetterQueue(`${ipamFunction.node.id}FailedInvocations`);
      ipamFunction.function.configureAsyncInvoke({
        onFailure: new lambdaDestinations.SqsDestination(queue),
        retryAttempts: 2,
        maxEventAge: Duration.hours(6),
      });
      Validations.of(ipamFunction.function).acknowledge({
        id: 'Serverless-LambdaDLQ',
        reason:
          "Failed asynchronous invocations go to the on-failure destination just configured (an SQS queue of the function's own, alarmed), Lambda's successor to DeadLetterConfig; a dead-letter queue as well would park each failure twice",
      });
    }
  }

  private grantKubernetesAccess(config: StackConfig): void {
    for (const [functionId, fn] of [
      ['Allocate', this.allocateFunction],
      ['Sweep', this.sweepFunction],
      ['Sync', this.syncFunction],
      ['Watch', this.watchFunction],
    ] as const) {
      new eks.CfnAccessEntry(this, `${functionId}Access`, {
        clusterName: config.clusterName,
        principalArn: fn.role.roleArn,
        type: 'STANDARD',
        kubernetesGroups: [FUNCTION_KUBERNETES_GROUPS[functionId].name],
      });
    }
  }

  private addAlarms(config: StackConfig): void {
    for (const queue of this.deadLetterQueues) {
      new cloudwatch.Alarm(this, `${queue.node.id}NotEmpty`, {
        alarmDescription: `Events or stream records were given up on and parked in ${queue.node.id}`,
        metric: queue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(5) }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    }
    for (const ipamFunction of [
      this.allocateFunction,
      this.sweepFunction,
      this.garbageCollectionFunction,
      this.syncFunction,
      this.watchFunction,
      this.ledgerFunction,
    ]) {
      const fn = ipamFunction.function;
      const name = ipamFunction.node.id;
      new cloudwatch.Alarm(this, `${name}Errors`, {
        alarmDescription: `${name} function invocations failed`,
        metric: fn.metricErrors({ period: Duration.minutes(5) }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 3,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
      new cloudwatch.Alarm(this, `${name}Throttles`, {
        alarmDescription: `${name} function invocations were throttled`,
        metric: fn.metricThrottles({ period: Duration.minutes(5) }),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 3,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    }
    // The sweep's own service dimension: the garbage collection (the same code) publishes under its own.
    const sweepService = SERVICE_NAMES.Sweep;
    emfAlarm(this, 'NodesInDeficit', {
      namespace: this.metricsNamespace,
      service: sweepService,
      metricName: 'ipam_nodes_in_deficit',
      description:
        'Nodes have had fewer IPs than they need for 10 sweeps in a row (see lastError: npm run inspect)',
      periodMinutes: config.sweepRateMinutes,
      periods: 10,
    });
    emfAlarm(this, 'SweepNodeFailures', {
      namespace: this.metricsNamespace,
      service: sweepService,
      metricName: 'ipam_sweep_failures',
      description:
        'The sweep failed to reconcile a node in 3 sweeps in a row (the node is named in the logs)',
      periodMinutes: config.sweepRateMinutes,
      periods: 3,
    });
    new cloudwatch.Alarm(this, 'SyncIteratorAge', {
      alarmDescription: 'The sync function is falling behind the node table stream',
      metric: new cloudwatch.Metric({
        namespace: 'AWS/Lambda',
        metricName: 'IteratorAge',
        dimensionsMap: { FunctionName: this.syncFunction.function.functionName },
        statistic: 'Maximum',
        period: Duration.minutes(5),
      }),
      threshold: 60_000,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 3,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
  }
}

function grantNodeRecordAccess(role: iam.IRole, tableArn: string, actions: string[]): void {
  role.addToPrincipalPolicy(new iam.PolicyStatement({ sid: 'NodeTable', actions, resources: [tableArn] }));
}

/** What makes this configuration undeployable; offline synthesis of it still works (the local cloud). */
function deployProblems(config: StackConfig): string[] {
  const problems: string[] = [];
  const placeholders = placeholdersLeft({
    'eni-ipam:vpcId': config.vpcId,
    'eni-ipam:eksEndpoint': config.eksEndpoint,
    'eni-ipam:eksCertificateAuthorityData': config.eksCertificateAuthorityData,
  });
  if (placeholders.length > 0) problems.push(placeholderMessage(config.clusterName, placeholders));
  if (config.ciliumVersion === 'set-me') {
    problems.push(
      "set eni-ipam:ciliumVersion to the cluster's cilium version, major.minor (kubectl -n kube-system get deployment cilium-operator -o jsonpath='{..image}')",
    );
  }
  if (config.kubernetesAccess === 'none') {
    problems.push(
      'eni-ipam:kubernetesAccess none is for the local cloud only (the functions would have no way to reach the cluster): use access-entry or aws-auth (aws eks describe-cluster --name ' +
        `${config.clusterName} --query cluster.accessConfig.authenticationMode)`,
    );
  }
  return problems;
}
