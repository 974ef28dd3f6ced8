import { createHash } from 'node:crypto';
import { functionRoleLogicalId, rolePolicies } from './iam-policies.ts';
import { type LocalLambdaApi, startLocalLambdaApi } from './lambda-api.ts';
import {
  type FunctionStats,
  type InvocationResult,
  LambdaFunctionRunner,
  type LambdaFunctionSpec,
  type LogSink,
} from './lambda-runner.ts';
import { assertLoopback, LOCAL_ACCOUNT, LOCAL_REGION, physicalName } from './local-account.ts';
import type { ShiftableClock } from './shiftable-clock.ts';
import type { StackResources, StandIns } from './stand-ins.ts';
import type { SynthesizedStack } from './synthesize.ts';
import { startOrUndo } from './teardown.ts';
import {
  type FunctionDefinition,
  type LocalValues,
  resolveEnvironment,
  type StackModel,
  TemplateError,
} from './template.ts';

/**
 * The synthesized template's functions, run as Lambda runs them: each bundled asset in its own
 * containers (`LambdaFunctionRunner`), with its CloudFormation name, the environment the template
 * gives it (intrinsics resolved against the stand-ins' resources), the variables the Lambda runtime
 * sets, and its own role's session credentials: the stand-ins authorize each function by the
 * policies the stack grants its role. The fleet also serves Lambda's Invoke API, for one function
 * invoking another (the watcher the allocate function): the functions' environment points at it,
 * so it starts first.
 */

export interface FunctionFleetOptions {
  /** Containers per function when the template sets no reserved concurrency (default 4). */
  readonly maxConcurrencyPerFunction?: number;
  /** Variables added to (or overriding) every function's environment, after the local endpoints. */
  readonly environment?: Readonly<Record<string, string>>;
  /** Where function log lines go; default: kept in `logs` (the last 5,000). */
  readonly onLog?: LogSink;
}

export type LogLine = Parameters<LogSink>[0];

export interface FunctionFleet {
  /** Function name by logical id, as CloudFormation would have named them. */
  readonly functionNames: Readonly<Record<string, string>>;
  /** Log lines of every function when no `onLog` was given (most recent last). */
  readonly logs: readonly LogLine[];
  /** The logical id of the one function whose logical id starts with `prefix`; throws TemplateError otherwise. */
  logicalIdOf(prefix: string): string;
  /** A RequestResponse invocation; throws TemplateError (synchronously) for a function the template lacks. */
  invoke(logicalId: string, event: unknown): Promise<InvocationResult>;
  /** The function's ARN, as Lambda would give it. */
  functionArn(logicalId: string): string;
  /** The Lambda Invoke API in front of the fleet (what AWS_ENDPOINT_URL_LAMBDA points at). */
  readonly lambdaEndpoint: string;
  /**
   * Where the Invoke API's `Event` invocations go (Lambda's asynchronous invocation, with its
   * retries: the event routing's); until set, an `Event` invocation runs at once without retries.
   */
  routeEventInvocations(queue: (logicalId: string, event: unknown) => void): void;
  /** Invocation counters per function logical id. */
  stats(): Record<string, FunctionStats>;
  /** Whether any invocation is running or waiting for a container. */
  busy(): boolean;
  /** Kills the function's containers whose running invocation's event satisfies `predicate`; resolves with how many died. */
  crashInvocations(logicalId: string, predicate: (event: unknown) => boolean): Promise<number>;
  /** Every function gets `variables` on top of its environment, in fresh containers; the old ones are stopped. */
  updateEnvironment(variables: Readonly<Record<string, string>>): Promise<void>;
  stop(): Promise<void>;
}

/** What the fleet runs and against what. */
export interface FleetSite {
  readonly stack: SynthesizedStack;
  readonly model: StackModel;
  readonly standIns: StandIns;
  readonly resources: StackResources;
  /** The shared clock the functions read, when the cloud's clock can be moved. */
  readonly clock: ShiftableClock | undefined;
}

/** Nothing listens on the discard port: any AWS service without a stand-in fails fast, locally. */
const NOWHERE = 'http://127.0.0.1:9';
const KEPT_LOG_LINES = 5_000;

export function startFunctionFleet(options: FunctionFleetOptions, site: FleetSite): Promise<FunctionFleet> {
  return startOrUndo(async (teardown) => {
    const { stack, model, standIns } = site;
    const functionNames = Object.fromEntries(
      model.functions.map((definition) => [
        definition.logicalId,
        physicalName(stack.stackName, definition.logicalId),
      ]),
    );
    const functionArn = (logicalId: string) =>
      `arn:aws:lambda:${LOCAL_REGION}:${LOCAL_ACCOUNT}:function:${functionNames[logicalId]}`;
    const logs: LogLine[] = [];
    const onLog = options.onLog ?? keepingLastLines(logs);
    const runners = new Map<string, LambdaFunctionRunner>();
    const invoke = (logicalId: string, event: unknown): Promise<InvocationResult> => {
      const runner = runners.get(logicalId);
      if (runner === undefined) throw new TemplateError(`no function ${logicalId} in ${stack.stackName}`);
      return runner.invoke(event);
    };

    let queueEvent = (logicalId: string, event: unknown): void => {
      void invoke(logicalId, event).catch(() => undefined);
    };
    const lambdaApi = await startInvokeApi(site, functionNames, functionArn, {
      invoke,
      queue: (logicalId, event) => queueEvent(logicalId, event),
    });
    teardown.add(() => lambdaApi.close());

    const endpoints = {
      AWS_ENDPOINT_URL: NOWHERE,
      AWS_ENDPOINT_URL_LAMBDA: lambdaApi.url,
      AWS_ENDPOINT_URL_EC2: standIns.ec2.url,
      AWS_ENDPOINT_URL_DYNAMODB: standIns.dynamoDb.endpoint,
      AWS_ENDPOINT_URL_DYNAMODB_STREAMS: standIns.dynamoDb.endpoint,
    };
    for (const url of Object.values(endpoints)) assertLoopback(url);
    const localValues = localValuesOf(stack, site.resources, functionNames, functionArn);
    const naming = { functionNames, functionArn, localValues, endpoints };
    for (const [logicalId, spec] of functionSpecs(options, site, naming)) {
      runners.set(logicalId, new LambdaFunctionRunner(spec, onLog));
    }
    teardown.add(() => Promise.all([...runners.values()].map((runner) => runner.stop())).then(() => {}));

    const stats = () =>
      Object.fromEntries([...runners].map(([logicalId, runner]) => [logicalId, runner.stats()]));
    return {
      functionNames,
      logs,
      logicalIdOf: (prefix) => uniqueLogicalIdOf(model, prefix),
      invoke,
      functionArn,
      lambdaEndpoint: lambdaApi.url,
      routeEventInvocations: (queue) => {
        queueEvent = queue;
      },
      stats,
      busy: () => Object.values(stats()).some((counters) => counters.running + counters.waiting > 0),
      crashInvocations: (logicalId, predicate) =>
        (runners.get(logicalId) as LambdaFunctionRunner).crashContainers(predicate),
      updateEnvironment: async (variables) => {
        const replaced = [...runners.entries()].map(([logicalId, runner]) => {
          const spec = { ...runner.spec, environment: { ...runner.spec.environment, ...variables } };
          runners.set(logicalId, new LambdaFunctionRunner(spec, onLog));
          return runner;
        });
        await Promise.all(replaced.map((runner) => runner.stop()));
      },
      stop: () => teardown.run(),
    };
  });
}

/** A log sink that keeps the last `KEPT_LOG_LINES` lines in `logs`. */
function keepingLastLines(logs: LogLine[]): LogSink {
  return (line) => {
    logs.push(line);
    if (logs.length > KEPT_LOG_LINES) logs.splice(0, logs.length - KEPT_LOG_LINES);
  };
}

/**
 * Lambda's Invoke API in front of the fleet, by function name, authorized by the caller's role as
 * IAM would: `lambda:InvokeFunction` on the function's ARN (an unknown name is authorized against
 * the name itself, then answered 404).
 */
function startInvokeApi(
  { model, standIns }: FleetSite,
  functionNames: Readonly<Record<string, string>>,
  functionArn: (logicalId: string) => string,
  run: {
    invoke: (logicalId: string, event: unknown) => Promise<InvocationResult>;
    queue: (logicalId: string, event: unknown) => void;
  },
): Promise<LocalLambdaApi> {
  const logicalIdOfName = (functionName: string) =>
    model.functions.find((definition) => functionNames[definition.logicalId] === functionName)?.logicalId;
  return startLocalLambdaApi(
    {
      invoke: async (functionName, event) => {
        const logicalId = logicalIdOfName(functionName);
        return logicalId === undefined ? undefined : run.invoke(logicalId, event);
      },
      queue: (functionName, event) => {
        const logicalId = logicalIdOfName(functionName);
        if (logicalId !== undefined) run.queue(logicalId, event);
        return logicalId !== undefined;
      },
      has: (functionName) => logicalIdOfName(functionName) !== undefined,
    },
    (accessKeyId, functionName) => {
      const logicalId = logicalIdOfName(functionName);
      const resourceArn = logicalId === undefined ? functionName : functionArn(logicalId);
      return standIns.iam.invokeDenial(accessKeyId, functionName, resourceArn);
    },
  );
}

/** The template's `Ref`, `Fn::GetAtt` and pseudo parameters, answered with the local resources. */
function localValuesOf(
  stack: SynthesizedStack,
  resources: StackResources,
  functionNames: Readonly<Record<string, string>>,
  functionArn: (logicalId: string) => string,
): LocalValues {
  return {
    ref: (logicalId) => resources.tableRef(logicalId) ?? functionNames[logicalId],
    getAtt: (logicalId, attribute) =>
      resources.tableAttribute(logicalId, attribute) ??
      (functionNames[logicalId] !== undefined && attribute === 'Arn' ? functionArn(logicalId) : undefined),
    pseudo: {
      'AWS::Region': LOCAL_REGION,
      'AWS::AccountId': LOCAL_ACCOUNT,
      'AWS::Partition': 'aws',
      'AWS::URLSuffix': 'amazonaws.com',
      'AWS::StackName': stack.stackName,
    },
  };
}

/**
 * Each function's runner spec, by logical id. Each function runs as its own role: its session
 * credentials are made that role's (the role's policies as synthesized, intrinsics resolved) in
 * the stand-ins, and its kubeconfig carries the role's EKS token.
 */
function functionSpecs(
  options: FunctionFleetOptions,
  { stack, model, standIns, clock }: FleetSite,
  local: {
    functionNames: Readonly<Record<string, string>>;
    functionArn: (logicalId: string) => string;
    localValues: LocalValues;
    endpoints: Readonly<Record<string, string>>;
  },
): Map<string, LambdaFunctionSpec> {
  const policies = rolePolicies(stack.template, local.localValues);
  const specs = new Map<string, LambdaFunctionSpec>();
  for (const definition of model.functions) {
    const functionName = local.functionNames[definition.logicalId] as string;
    const credentials = functionCredentials(definition.logicalId);
    const roleLogicalId = functionRoleLogicalId(stack.template, definition.logicalId);
    standIns.iam.assumeRole(credentials.accessKeyId, {
      principalArn: `arn:aws:sts::${LOCAL_ACCOUNT}:assumed-role/${physicalName(stack.stackName, roleLogicalId)}/${functionName}`,
      policies: policies.get(roleLogicalId) ?? [],
    });
    const environment = {
      ...resolveEnvironment(definition, local.localValues),
      ...lambdaRuntimeVariables(definition, functionName),
      AWS_REGION: LOCAL_REGION,
      AWS_DEFAULT_REGION: LOCAL_REGION,
      AWS_ACCESS_KEY_ID: credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      AWS_SESSION_TOKEN: credentials.sessionToken,
      ...local.endpoints,
      KUBECONFIG: standIns.kubeconfigOf(definition.logicalId),
      // The bundle targets the Lambda runtime's Node.js; the local one may be older.
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      ...options.environment,
    };
    specs.set(definition.logicalId, {
      functionName,
      functionArn: local.functionArn(definition.logicalId),
      entryFile: definition.entryFile,
      handlerExport: definition.handlerExport,
      environment,
      timeoutMs: definition.timeoutSeconds * 1000,
      memorySizeMb: definition.memorySizeMb,
      maxConcurrency: definition.reservedConcurrency ?? options.maxConcurrencyPerFunction ?? 4,
      ...(clock === undefined ? {} : { clockOffsetMs: clock.sharedOffsetMs }),
    });
  }
  return specs;
}

function uniqueLogicalIdOf(model: StackModel, prefix: string): string {
  const matches = model.functions.filter((definition) => definition.logicalId.startsWith(prefix));
  if (matches.length !== 1) {
    throw new TemplateError(
      `${matches.length === 0 ? 'no' : 'more than one'} function whose logical id starts with ${JSON.stringify(prefix)} (have ${model.functions.map((f) => f.logicalId).join(', ')})`,
    );
  }
  return (matches[0] as FunctionDefinition).logicalId;
}

/** The variables the Lambda runtime itself sets in every execution environment. */
function lambdaRuntimeVariables(
  definition: FunctionDefinition,
  functionName: string,
): Record<string, string> {
  return {
    AWS_LAMBDA_FUNCTION_NAME: functionName,
    AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
    AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(definition.memorySizeMb),
    AWS_LAMBDA_LOG_GROUP_NAME: `/aws/lambda/${functionName}`,
    AWS_EXECUTION_ENV: `AWS_Lambda_${definition.runtime}`,
    LAMBDA_TASK_ROOT: definition.assetDirectory,
    TZ: ':UTC',
  };
}

/** The session credentials Lambda hands a function: its role's, distinct per function. */
function functionCredentials(logicalId: string) {
  return {
    accessKeyId: `ASIALOCAL${createHash('sha256').update(logicalId).digest('hex').slice(0, 11).toUpperCase()}`,
    secretAccessKey: `local-cloud-secret-${logicalId}`,
    sessionToken: `local-cloud-session-${logicalId}`,
  };
}
