import { type Duration, Stack, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { bundledFunctionCode } from './function-bundle.ts';

export interface IpamFunctionProps {
  /** The folder under `functions/` holding the handler's `index.ts`. */
  readonly handlerFolder: 'allocate' | 'sweep' | 'sync' | 'watch' | 'ledger';
  readonly description: string;
  /** Powertools' service name (`POWERTOOLS_SERVICE_NAME`): the `service` dimension of its EMF metrics. */
  readonly serviceName: string;
  readonly timeout: Duration;
  readonly memorySizeMb?: number;
  readonly environment: Readonly<Record<string, string>>;
  readonly logLevel: string;
  /** The CloudWatch namespace of the function's EMF metrics (one per cluster, so alarms do not mix clusters). */
  readonly metricsNamespace: string;
  /** Caps concurrent executions: a lever on EC2 API pressure (events queue while capped). */
  readonly reservedConcurrentExecutions?: number;
}

/**
 * One of our Lambda functions: bundled by the locally installed esbuild (`bundledFunctionCode`:
 * ESM, code-split, minified, source maps, the AWS SDK bundled and tree-shaken), arm64, the newest
 * Node.js runtime aws-cdk-lib offers, a role of its own that starts with no permissions but its
 * own log group, and a log group with bounded retention.
 */
export class IpamFunction extends Construct {
  readonly function: lambda.Function;
  readonly role: iam.Role;

  constructor(scope: Construct, id: string, props: IpamFunctionProps) {
    super(scope, id);
    const logGroup = new logs.LogGroup(this, 'Logs', { retention: logs.RetentionDays.ONE_MONTH });
    // A role of our own rather than the default one, which attaches the AWS-managed
    // AWSLambdaBasicExecutionRole (log rights on every log group in the account).
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `serverless-eni-ipam ${props.handlerFolder} function`,
    });
    this.role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        resources: [logGroup.logGroupArn, `${logGroup.logGroupArn}:log-stream:*`],
      }),
    );
    const logGroupLogicalId = Stack.of(this).getLogicalId(logGroup.node.defaultChild as logs.CfnLogGroup);
    Validations.of(this.role).acknowledge({
      id: `AwsSolutions-IAM5[Resource::<${logGroupLogicalId}.Arn>:log-stream:*]`,
      reason: "Lambda creates its log streams with generated names inside this function's own log group",
    });
    this.function = new lambda.Function(this, 'Function', {
      code: bundledFunctionCode(props.handlerFolder),
      handler: 'index.handler',
      description: props.description,
      runtime: lambda.Runtime.NODEJS_LATEST,
      architecture: lambda.Architecture.ARM_64,
      memorySize: props.memorySizeMb ?? 512,
      timeout: props.timeout,
      role: this.role,
      logGroup,
      reservedConcurrentExecutions: props.reservedConcurrentExecutions,
      environment: {
        ...props.environment,
        NODE_OPTIONS: '--enable-source-maps',
        POWERTOOLS_SERVICE_NAME: props.serviceName,
        POWERTOOLS_LOG_LEVEL: props.logLevel,
        POWERTOOLS_METRICS_NAMESPACE: props.metricsNamespace,
      },
    });
    Validations.of(this.function).acknowledge({
      id: 'Serverless-LambdaTracing',
      reason:
        'No X-Ray: the code is not instrumented (a trace would hold only the Lambda service segment); what an operator follows is the EMF metrics, alarms and dashboard and the structured logs, and tracing would add X-Ray write rights on Resource * to every role, the watcher included',
    });
  }
}
