import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateTableCommand,
  DeleteTableCommand,
  DynamoDBClient,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import { DynamoNodeRecordStore } from '../../functions/aws/node-table.ts';
import { EC2_STATE_CHANGE_DETAIL_TYPE } from '../../functions/core/events.ts';
import type { NodeRecord } from '../../functions/core/model.ts';
import { Ec2Authorizer } from '../emulators/ec2/authorization.ts';
import {
  type ClusterSeed,
  type Ec2Emulator,
  type InstanceRecord,
  startEc2Emulator,
} from '../emulators/ec2/index.ts';
import {
  DEFAULT_TOKEN,
  type K8sEmulator,
  startK8sEmulator,
  writeKubeconfig,
} from '../emulators/k8s/index.ts';
import { MultiPoolAgentModel } from '../support/cilium-multipool-agent-model.ts';
import { type DynamoDbLocal, startDynamoDbLocal } from '../support/dynamodb-local.ts';
import { LocalMultiPoolAgent, registerCiliumNode } from './cilium-agent.ts';
import { type AsyncInvocationFailure, AsyncInvoker, type BusEvent, EventBus } from './event-bus.ts';
import { functionRoleLogicalId, rolePolicies } from './iam-policies.ts';
import {
  type FunctionIdentity,
  functionIdentities,
  identityOfFunction,
  kubernetesAuthorization,
} from './identities.ts';
import { startLocalLambdaApi } from './lambda-api.ts';
import {
  type FunctionStats,
  type InvocationResult,
  LambdaFunctionRunner,
  type LogSink,
} from './lambda-runner.ts';
import { Scheduler, scheduledEvent } from './scheduler.ts';
import {
  type DiscardedBatch,
  type LambdaStreamRecord,
  StreamPoller,
  type StreamPollerStats,
} from './stream-poller.ts';
import { type CloudSummary, type Denials, denialsOf, summarize } from './summary.ts';
import { readSynthesizedStack, type SynthesizedStack, synthesizeStack } from './synthesize.ts';
import {
  type FunctionDefinition,
  type LocalValues,
  readStackModel,
  resolveEnvironment,
  type StackModel,
  type TableDefinition,
  TemplateError,
} from './template.ts';

/**
 * The local cloud: runs what `cdk synth` produced (the bundled function assets with the
 * template's environment, its EventBridge rules and schedules, its stream event-source mapping)
 * against the local stand-ins: DynamoDB Local (the node table created from the template), the EC2
 * emulator (a seeded cluster) and the Kubernetes emulator (through a kubeconfig). Nothing leaves
 * 127.0.0.0/8: every AWS endpoint points at a stand-in, and the catch-all AWS_ENDPOINT_URL at a
 * closed loopback port.
 */

export const LOCAL_REGION = 'us-east-1';
export const LOCAL_ACCOUNT = '123456789012';
/** Nothing listens on the discard port: any AWS service without a stand-in fails fast, locally. */
const NOWHERE = 'http://127.0.0.1:9';
const LOCAL_CREDENTIALS = {
  accessKeyId: 'AKIDLOCALCLOUD',
  secretAccessKey: 'local-cloud-secret',
  sessionToken: 'local-cloud-session',
};

export interface LocalCloudOptions {
  /** An already synthesized stack (e.g. shared by a bench); default: synthesize now, in-process. */
  readonly stack?: SynthesizedStack | { readonly assemblyDirectory: string; readonly stackName: string };
  /** Extra CDK context when synthesizing here. */
  readonly context?: Readonly<Record<string, unknown>>;
  /** Use a running DynamoDB Local (e.g. the test run's); default: start one for this cloud. */
  readonly dynamoDbEndpoint?: string;
  /** Schedules divided by this: 60 runs `rate(1 minute)` every second. Default 1. Also scales Lambda's async retry waits. */
  readonly timeScale?: number;
  /**
   * Include the CiliumNode watcher's schedule (default false): its invocations hold a watch for
   * minutes, so `settle()` would wait for them. Tests and the bench invoke `Watch` themselves.
   */
  readonly watchSchedule?: boolean;
  /** Start schedule timers (default true); `fireSchedules()` works either way. */
  readonly runSchedules?: boolean;
  /** Publish EC2 state-change events to the bus as instances change state (default true). */
  readonly ec2Events?: boolean;
  /** Register a CiliumNode, as cilium-agent would, when an instance starts running (default true). */
  readonly simulateAgents?: boolean;
  /** Delay between `running` and the simulated agent's registration (default 0). */
  readonly agentDelayMs?: number;
  /**
   * Which cilium-agent the simulated nodes run (default `1.19`): `1.20` runs a multi-pool agent
   * model on every node (it writes `spec.ipam.pools`, clears `status.ipam.used`), `mixed` on every
   * other node, in launch order.
   */
  readonly agentVersions?: '1.19' | '1.20' | 'mixed';
  /** Containers per function when the template sets no reserved concurrency (default 4). */
  readonly maxConcurrencyPerFunction?: number;
  /** Where the functions' kubeconfigs point (e.g. a proxy in front of the emulator); default the emulator. */
  readonly kubernetesUrl?: string;
  /** Variables added to (or overriding) every function's environment, after the local endpoints. */
  readonly environment?: Readonly<Record<string, string>>;
  /** Stream polling period (default 250 ms, Lambda's 4 polls a second). */
  readonly streamPollIntervalMs?: number;
  /** Where function log lines go; default: kept in `logs` (the last 5,000). */
  readonly onLog?: LogSink;
  /** Options for the EC2 emulator (throttling, eventual consistency...). */
  readonly ec2?: Parameters<typeof startEc2Emulator>[0];
  /**
   * Give the functions and the EC2 emulator one clock that `advanceClock` moves forward (leases
   * expire, grace periods pass, without waiting). Default false: everything uses the real clock.
   */
  readonly shiftableClock?: boolean;
  /** Fault injection: asked after each successful stream batch; `true` redelivers it once. Default never. */
  readonly streamRedelivery?: (records: readonly LambdaStreamRecord[]) => boolean;
}

export interface LocalCloud {
  readonly stack: SynthesizedStack;
  readonly model: StackModel;
  readonly ec2: Ec2Emulator;
  readonly cluster: ClusterSeed;
  readonly k8s: K8sEmulator;
  /** A cluster admin's kubeconfig (each function has its own, with its role's group). */
  readonly kubeconfigPath: string;
  readonly table: {
    readonly name: string;
    readonly streamArn: string;
    readonly endpoint: string;
    readonly client: DynamoDBClient;
    readonly store: DynamoNodeRecordStore;
  };
  /** Function name by logical id, as CloudFormation would have named them. */
  readonly functionNames: Readonly<Record<string, string>>;
  /** Log lines of every function when no `onLog` was given (most recent last). */
  readonly logs: readonly { functionName: string; stream: 'stdout' | 'stderr'; text: string }[];
  /** Invokes the function whose logical id starts with `functionLogicalIdPrefix` (RequestResponse). */
  invoke(functionLogicalIdPrefix: string, event: unknown): Promise<InvocationResult>;
  /** Puts an event on the bus; resolves when the invocations it caused are done. */
  putEvent(event: BusEvent): Promise<string[]>;
  /** Publishes an `EC2 Instance State-change Notification` for the instance and state. */
  emitEc2Event(instanceId: string, state: string): Promise<string[]>;
  /** Launches an instance of the cluster (tagged for it) in a node subnet; events follow. */
  launchInstance(
    instanceType: string,
    options?: {
      subnet?: 'nodesA' | 'nodesB';
      /** eth0's tags (a launch template's); default none, as EC2 creates it, so eth0 is not ours. */
      primaryNetworkInterfaceTags?: Record<string, string>;
    },
  ): InstanceRecord;
  /** Fires every schedule rule now; resolves when the invocations are done. */
  fireSchedules(): Promise<void>;
  /** Processes the table's stream until everything written so far reached the sync function. */
  drainStream(): Promise<void>;
  /** Waits until no event, schedule or stream invocation is pending (drains the stream too). */
  settle(): Promise<void>;
  /** Polls `condition` until it is true; rejects after `timeoutMs` (default 20 s) with `description`. */
  waitUntil(
    condition: () => boolean | Promise<boolean>,
    options?: { timeoutMs?: number; intervalMs?: number; description?: string },
  ): Promise<void>;
  /** Node records of every instance, by instance id. */
  records(): Promise<Map<string, NodeRecord>>;
  /** The summary of the instances launched (or of `instanceIds`). */
  summary(instanceIds?: readonly string[]): Promise<CloudSummary>;
  /** EC2 calls IAM denied and Kubernetes requests refused (401/403), since the start. */
  denials(): Denials;
  /** Invocation counters per function logical id. */
  functionStats(): Record<string, FunctionStats>;
  /** The running 1.20 agent of a node (`agentVersions` 1.20 or mixed), if that node runs one. */
  multiPoolAgent(nodeName: string): LocalMultiPoolAgent | undefined;
  /**
   * What a deploy that changes only the functions' environment does (e.g. `eni-ipam:paused`:
   * Lambda's UpdateFunctionConfiguration): every function gets `variables` on top of its
   * environment, and later invocations run in fresh containers with it. Call it when settled: the
   * old containers are stopped.
   */
  updateFunctionEnvironment(variables: Readonly<Record<string, string>>): Promise<void>;
  streamStats(): StreamPollerStats;
  /** Stream records given up on (the mapping's on-failure destination). */
  readonly streamFailures: readonly DiscardedBatch[];
  /** Asynchronous invocations given up on after Lambda's retries. */
  readonly asyncFailures: readonly AsyncInvocationFailure[];
  /** Instance ids launched through `launchInstance`, in order. */
  readonly launched: readonly string[];
  /**
   * Fault injection: kills every container of the function (logical id prefix) whose running
   * invocation's event satisfies `predicate` (a real worker termination: no `finally` runs);
   * resolves with how many died.
   */
  crashInvocations(functionLogicalIdPrefix: string, predicate: (event: unknown) => boolean): Promise<number>;
  /** Moves the functions' and the EC2 emulator's clock forward (needs `shiftableClock`). */
  advanceClock(milliseconds: number): void;
  /** How far `advanceClock` has moved the clock so far (0 without `shiftableClock`). */
  clockOffsetMs(): number;
  stop(): Promise<void>;
}

export async function startLocalCloud(options: LocalCloudOptions = {}): Promise<LocalCloud> {
  const cleanups: (() => Promise<void> | void)[] = [];
  const stopAll = async () => {
    for (const cleanup of cleanups.splice(0).reverse()) {
      try {
        await cleanup();
      } catch (error) {
        console.error(`local cloud: cleanup failed: ${(error as Error).message}`);
      }
    }
  };
  try {
    return await start(options, cleanups, stopAll);
  } catch (error) {
    await stopAll();
    throw error;
  }
}

async function start(
  options: LocalCloudOptions,
  cleanups: (() => Promise<void> | void)[],
  stopAll: () => Promise<void>,
): Promise<LocalCloud> {
  const timeScale = options.timeScale ?? 1;
  const identities = functionIdentities(LOCAL_ACCOUNT);
  // The stand-ins start while the stack synthesizes (bundling is the slow part).
  const [stackOutcome, dynamoDbOutcome, ec2Outcome, k8sOutcome] = await Promise.allSettled([
    loadStack(options),
    options.dynamoDbEndpoint === undefined ? startDynamoDbLocal() : Promise.resolve(undefined),
    // Only the functions' own access keys authenticate; each is given its role's policies below.
    startEc2Emulator({ ...options.ec2, identities: {} }),
    startK8sEmulator(kubernetesAuthorization(identities, DEFAULT_TOKEN)),
  ]);
  if (dynamoDbOutcome.status === 'fulfilled' && dynamoDbOutcome.value) {
    const dynamoDbLocal = dynamoDbOutcome.value;
    cleanups.push(() => dynamoDbLocal.stop());
  }
  if (ec2Outcome.status === 'fulfilled') cleanups.push(() => ec2Outcome.value.close());
  if (k8sOutcome.status === 'fulfilled') cleanups.push(() => k8sOutcome.value.close());
  if (stackOutcome.status === 'fulfilled' && stackOutcome.value.synthesizedHere) {
    const { assemblyDirectory } = stackOutcome.value.stack;
    cleanups.push(() => rmSync(assemblyDirectory, { recursive: true, force: true }));
  }
  for (const outcome of [stackOutcome, dynamoDbOutcome, ec2Outcome, k8sOutcome]) {
    if (outcome.status === 'rejected') throw outcome.reason;
  }
  const { stack } = (stackOutcome as PromiseFulfilledResult<{ stack: SynthesizedStack }>).value;
  const dynamoDb = (dynamoDbOutcome as PromiseFulfilledResult<DynamoDbLocal | undefined>).value;
  const ec2 = (ec2Outcome as PromiseFulfilledResult<Ec2Emulator>).value;
  const k8s = (k8sOutcome as PromiseFulfilledResult<K8sEmulator>).value;

  const model = readStackModel(stack.template, stack.assemblyDirectory);
  // The node table is the one whose stream feeds a function; any other table (the watcher's
  // state) is created as the template declares it, without a stream.
  const streamedTables = model.tables.filter((table) =>
    model.streamMappings.some((mapping) => mapping.tableLogicalId === table.logicalId),
  );
  const [tableDefinition, ...otherStreamedTables] = streamedTables;
  if (tableDefinition === undefined || otherStreamedTables.length > 0) {
    throw new TemplateError(
      `expected exactly one DynamoDB table with a stream mapping in ${stack.stackName}, found ${streamedTables.length}`,
    );
  }
  const otherTableDefinitions = model.tables.filter((table) => table !== tableDefinition);
  const clusterName = clusterNameOf(stack);

  const dynamoDbEndpoint = (options.dynamoDbEndpoint ?? (dynamoDb as DynamoDbLocal).endpoint).replace(
    /\/$/,
    '',
  );
  assertLoopback(dynamoDbEndpoint);
  const cluster = ec2.state.seedCluster({ clusterName });
  const workDirectory = mkdtempSync(join(tmpdir(), 'local-cloud-'));
  cleanups.push(() => rmSync(workDirectory, { recursive: true, force: true }));
  const kubeconfigPath = k8s.writeKubeconfig(workDirectory);
  const kubernetesUrl = options.kubernetesUrl ?? k8s.url;
  assertLoopback(kubernetesUrl);
  const kubeconfigOf = (identity: FunctionIdentity): string => {
    const directory = join(workDirectory, identity.functionId);
    mkdirSync(directory);
    return writeKubeconfig(kubernetesUrl, directory, identity.kubernetesToken);
  };

  const awsClientConfig = {
    region: LOCAL_REGION,
    credentials: LOCAL_CREDENTIALS,
    endpoint: dynamoDbEndpoint,
  };
  const dynamoDbClient = new DynamoDBClient(awsClientConfig);
  const streamsClient = new DynamoDBStreamsClient(awsClientConfig);
  cleanups.push(
    () => dynamoDbClient.destroy(),
    () => streamsClient.destroy(),
  );
  const table = await createTableFromTemplate(dynamoDbClient, stack.stackName, tableDefinition);
  const otherTables = new Map<string, string>();
  for (const definition of otherTableDefinitions) {
    otherTables.set(
      definition.logicalId,
      (await createTableFromTemplate(dynamoDbClient, stack.stackName, definition, { stream: false })).name,
    );
  }
  cleanups.push(async () => {
    if (options.dynamoDbEndpoint !== undefined) {
      for (const name of [table.name, ...otherTables.values()]) {
        await dynamoDbClient.send(new DeleteTableCommand({ TableName: name }));
      }
    }
  });

  // ---- functions
  const functionNames = Object.fromEntries(
    model.functions.map((definition) => [
      definition.logicalId,
      physicalName(stack.stackName, definition.logicalId),
    ]),
  );
  const functionArn = (logicalId: string) =>
    `arn:aws:lambda:${LOCAL_REGION}:${LOCAL_ACCOUNT}:function:${functionNames[logicalId]}`;
  const localValues: LocalValues = {
    ref: (logicalId) =>
      logicalId === tableDefinition.logicalId
        ? table.name
        : (otherTables.get(logicalId) ?? functionNames[logicalId]),
    getAtt: (logicalId, attribute) => {
      if (logicalId === tableDefinition.logicalId) {
        if (attribute === 'Arn')
          return `arn:aws:dynamodb:${LOCAL_REGION}:${LOCAL_ACCOUNT}:table/${table.name}`;
        if (attribute === 'StreamArn') return table.streamArn;
      }
      const otherTable = otherTables.get(logicalId);
      if (otherTable !== undefined && attribute === 'Arn')
        return `arn:aws:dynamodb:${LOCAL_REGION}:${LOCAL_ACCOUNT}:table/${otherTable}`;
      if (functionNames[logicalId] !== undefined && attribute === 'Arn') return functionArn(logicalId);
      return undefined;
    },
    pseudo: {
      'AWS::Region': LOCAL_REGION,
      'AWS::AccountId': LOCAL_ACCOUNT,
      'AWS::Partition': 'aws',
      'AWS::URLSuffix': 'amazonaws.com',
      'AWS::StackName': stack.stackName,
    },
  };
  const logs: { functionName: string; stream: 'stdout' | 'stderr'; text: string }[] = [];
  const onLog: LogSink =
    options.onLog ??
    ((line) => {
      logs.push(line);
      if (logs.length > 5_000) logs.splice(0, logs.length - 5_000);
    });
  // Lambda's Invoke API, for one function invoking another (the watcher the allocate function),
  // authorized by the caller's role as IAM would: `lambda:InvokeFunction` on the function's ARN.
  const logicalIdOfName = (functionName: string) =>
    model.functions.find((definition) => functionNames[definition.logicalId] === functionName)?.logicalId;
  const invokeAuthorizers = new Map<string, Ec2Authorizer>();
  const deniedInvokes: string[] = [];
  const lambdaApi = await startLocalLambdaApi(
    async (functionName, event) => {
      const logicalId = logicalIdOfName(functionName);
      return logicalId === undefined ? undefined : invokeByLogicalId(logicalId, event);
    },
    async (accessKeyId, functionName) => {
      const logicalId = logicalIdOfName(functionName);
      const resourceArn = logicalId === undefined ? functionName : functionArn(logicalId);
      const authorizer = invokeAuthorizers.get(accessKeyId);
      const denial =
        authorizer === undefined
          ? { message: `The security token included in the request is invalid (${accessKeyId})` }
          : await authorizer.firstDenial([
              { action: 'lambda:InvokeFunction', resourceArn, resourceAccount: LOCAL_ACCOUNT, context: {} },
            ]);
      if (denial === undefined) return undefined;
      deniedInvokes.push(functionName);
      return denial.message;
    },
  );
  cleanups.push(() => lambdaApi.close());
  const endpoints = {
    AWS_ENDPOINT_URL: NOWHERE,
    AWS_ENDPOINT_URL_LAMBDA: lambdaApi.url,
    AWS_ENDPOINT_URL_EC2: ec2.url,
    AWS_ENDPOINT_URL_DYNAMODB: dynamoDbEndpoint,
    AWS_ENDPOINT_URL_DYNAMODB_STREAMS: dynamoDbEndpoint,
  };
  for (const url of Object.values(endpoints)) assertLoopback(url);
  const clockOffsetMs =
    options.shiftableClock === true ? new BigInt64Array(new SharedArrayBuffer(8)) : undefined;
  if (clockOffsetMs !== undefined) ec2.setClock(() => Date.now() + Number(Atomics.load(clockOffsetMs, 0)));
  // Each function runs as its own role: the role's policies as synthesized, intrinsics resolved.
  const policies = rolePolicies(stack.template, localValues);
  const runners = new Map<string, LambdaFunctionRunner>();
  for (const definition of model.functions) {
    const functionName = functionNames[definition.logicalId] as string;
    const identity = identityOfFunction(definition.logicalId, identities);
    const credentials = functionCredentials(definition.logicalId);
    const roleLogicalId = functionRoleLogicalId(stack.template, definition.logicalId);
    const iamIdentity = {
      principalArn: `arn:aws:sts::${LOCAL_ACCOUNT}:assumed-role/${physicalName(stack.stackName, roleLogicalId)}/${functionName}`,
      policies: policies.get(roleLogicalId) ?? [],
    };
    ec2.setIdentity(credentials.accessKeyId, iamIdentity);
    invokeAuthorizers.set(credentials.accessKeyId, new Ec2Authorizer(iamIdentity, LOCAL_ACCOUNT));
    const environment = {
      ...resolveEnvironment(definition, localValues),
      ...lambdaRuntimeVariables(definition, functionName),
      AWS_REGION: LOCAL_REGION,
      AWS_DEFAULT_REGION: LOCAL_REGION,
      AWS_ACCESS_KEY_ID: credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
      AWS_SESSION_TOKEN: credentials.sessionToken,
      ...endpoints,
      KUBECONFIG: kubeconfigOf(identity),
      // The bundle targets the Lambda runtime's Node.js; the local one may be older.
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      ...options.environment,
    };
    runners.set(
      definition.logicalId,
      new LambdaFunctionRunner(
        {
          functionName,
          functionArn: functionArn(definition.logicalId),
          entryFile: definition.entryFile,
          handlerExport: definition.handlerExport,
          environment,
          timeoutMs: definition.timeoutSeconds * 1000,
          memorySizeMb: definition.memorySizeMb,
          maxConcurrency: definition.reservedConcurrency ?? options.maxConcurrencyPerFunction ?? 4,
          ...(clockOffsetMs === undefined ? {} : { clockOffsetMs }),
        },
        onLog,
      ),
    );
  }
  cleanups.push(() => Promise.all([...runners.values()].map((runner) => runner.stop())).then(() => {}));
  const invokeByLogicalId = (logicalId: string, event: unknown): Promise<InvocationResult> => {
    const runner = runners.get(logicalId);
    if (runner === undefined) throw new TemplateError(`no function ${logicalId} in ${stack.stackName}`);
    return runner.invoke(event);
  };
  const findFunction = (prefix: string): string => {
    const matches = model.functions.filter((definition) => definition.logicalId.startsWith(prefix));
    if (matches.length !== 1) {
      throw new TemplateError(
        `${matches.length === 0 ? 'no' : 'more than one'} function whose logical id starts with ${JSON.stringify(prefix)} (have ${model.functions.map((f) => f.logicalId).join(', ')})`,
      );
    }
    return (matches[0] as FunctionDefinition).logicalId;
  };

  // ---- event routing
  // Lambda's async retry waits (about 1 and 2 minutes), on the cloud's time scale.
  const asyncInvoker = new AsyncInvoker(invokeByLogicalId, {
    retryDelaysMs: [60_000 / timeScale, 120_000 / timeScale],
  });
  cleanups.push(() => asyncInvoker.stop());
  const envelope = { account: LOCAL_ACCOUNT, region: LOCAL_REGION };
  const bus = new EventBus(model.rules, asyncInvoker, envelope);
  // The watcher's schedule starts invocations that live for minutes: only when asked for.
  const scheduledRules = model.rules.filter(
    (rule) =>
      options.watchSchedule === true ||
      !rule.targets.some((target) => target.functionLogicalId.startsWith('Watch')),
  );
  const scheduler = new Scheduler(
    scheduledRules,
    async (rule) => {
      const ruleArn = `arn:aws:events:${LOCAL_REGION}:${LOCAL_ACCOUNT}:rule/${physicalName(stack.stackName, rule.logicalId)}`;
      await Promise.all(
        rule.targets.map((target) =>
          asyncInvoker.send(
            target.functionLogicalId,
            target.input === undefined ? scheduledEvent(ruleArn, envelope) : structuredClone(target.input),
            `rule:${rule.logicalId}`,
          ),
        ),
      );
    },
    timeScale,
  );
  cleanups.push(() => scheduler.stop());
  const pollers = model.streamMappings
    .filter((mapping) => mapping.tableLogicalId === tableDefinition.logicalId)
    .map(
      (mapping) =>
        new StreamPoller({
          client: streamsClient,
          streamArn: table.streamArn,
          region: LOCAL_REGION,
          mapping,
          invoke: (event) => invokeByLogicalId(mapping.functionLogicalId, event),
          ...(options.streamPollIntervalMs === undefined
            ? {}
            : { pollIntervalMs: options.streamPollIntervalMs }),
          ...(options.streamRedelivery === undefined
            ? {}
            : { redeliverAfterSuccess: options.streamRedelivery }),
        }),
    );
  cleanups.push(() => Promise.all(pollers.map((poller) => poller.stop())).then(() => {}));

  const emitEc2Event = (instanceId: string, state: string) =>
    bus.put({
      source: 'aws.ec2',
      'detail-type': EC2_STATE_CHANGE_DETAIL_TYPE,
      resources: [`arn:aws:ec2:${LOCAL_REGION}:${LOCAL_ACCOUNT}:instance/${instanceId}`],
      detail: { 'instance-id': instanceId, state },
    });
  const agentTimers = new Set<NodeJS.Timeout>();
  cleanups.push(() => {
    for (const timer of agentTimers) clearTimeout(timer);
  });
  const agentFailures: Error[] = [];
  const multiPoolAgents = new Map<string, LocalMultiPoolAgent>();
  cleanups.push(() => {
    for (const agent of multiPoolAgents.values()) agent.stop();
  });
  let registeredAgents = 0;
  const unsubscribe = ec2.state.onInstanceStateChange(({ instanceId, state }) => {
    if (options.ec2Events !== false) void emitEc2Event(instanceId, state);
    if (state === 'running' && options.simulateAgents !== false) {
      const nodeName = ec2.state.instance(instanceId)?.privateDnsName ?? instanceId;
      const timer = setTimeout(() => {
        agentTimers.delete(timer);
        try {
          registerCiliumNode(k8s, nodeName, instanceId);
          const version = options.agentVersions ?? '1.19';
          if (version === '1.20' || (version === 'mixed' && registeredAgents % 2 === 1)) {
            multiPoolAgents.set(nodeName, new LocalMultiPoolAgent(k8s, nodeName, new MultiPoolAgentModel()));
          }
          registeredAgents++;
        } catch (error) {
          agentFailures.push(error as Error);
        }
      }, options.agentDelayMs ?? 0);
      agentTimers.add(timer);
    }
  });
  cleanups.push(unsubscribe);

  if (options.runSchedules !== false) scheduler.start();
  for (const poller of pollers) poller.start();

  const store = new DynamoNodeRecordStore(dynamoDbClient, table.name);
  const launched: string[] = [];
  const drainStream = async () => {
    for (const poller of pollers) await poller.drain();
  };
  const settle = async () => {
    for (let round = 0; round < 100; round++) {
      await asyncInvoker.idle();
      await drainStream();
      const busy = Object.values(functionStatsOf(runners)).some((stats) => stats.running + stats.waiting > 0);
      if (asyncInvoker.pending() === 0 && agentTimers.size === 0 && !busy) return;
      await sleep(20);
    }
  };
  const records = async () => {
    const all = new Map<string, NodeRecord>();
    let pageToken: string | undefined;
    do {
      const page = await store.listPage(pageToken);
      for (const record of page.records) all.set(record.instanceId, record);
      pageToken = page.nextPageToken;
    } while (pageToken !== undefined);
    return all;
  };

  return {
    stack,
    model,
    ec2,
    cluster,
    k8s,
    kubeconfigPath,
    table: { ...table, endpoint: dynamoDbEndpoint, client: dynamoDbClient, store },
    functionNames,
    logs,
    invoke: (prefix, event) => invokeByLogicalId(findFunction(prefix), event),
    putEvent: (event) => bus.put(event),
    emitEc2Event,
    launchInstance: (instanceType, launchOptions = {}) => {
      const subnet =
        cluster.subnets[launchOptions.subnet ?? (launched.length % 2 === 0 ? 'nodesA' : 'nodesB')];
      const instance = ec2.state.launchInstance({
        instanceType,
        subnetId: subnet.subnetId,
        securityGroupIds: [cluster.securityGroups.nodes.groupId],
        tags: { [`kubernetes.io/cluster/${clusterName}`]: 'owned', Name: `${clusterName}-node` },
        ...(launchOptions.primaryNetworkInterfaceTags === undefined
          ? {}
          : { primaryNetworkInterfaceTags: launchOptions.primaryNetworkInterfaceTags }),
      });
      launched.push(instance.instanceId);
      return instance;
    },
    fireSchedules: () => scheduler.fireAll(),
    drainStream,
    settle,
    waitUntil: async (condition, waitOptions = {}) => {
      const deadline = Date.now() + (waitOptions.timeoutMs ?? 20_000);
      while (!(await condition())) {
        if (agentFailures.length > 0) throw agentFailures[0];
        if (Date.now() > deadline) {
          throw new Error(`timed out waiting for ${waitOptions.description ?? 'the condition'}`);
        }
        await sleep(waitOptions.intervalMs ?? 50);
      }
    },
    records,
    summary: async (instanceIds = launched) => summarize(ec2.state, k8s, await records(), instanceIds),
    denials: () => denialsOf(ec2.calls.log, k8s.requests.all(), deniedInvokes),
    functionStats: () => functionStatsOf(runners),
    multiPoolAgent: (nodeName) => multiPoolAgents.get(nodeName),
    updateFunctionEnvironment: async (variables) => {
      const replaced = [...runners.entries()].map(([logicalId, runner]) => {
        const spec = { ...runner.spec, environment: { ...runner.spec.environment, ...variables } };
        runners.set(logicalId, new LambdaFunctionRunner(spec, onLog));
        return runner;
      });
      await Promise.all(replaced.map((runner) => runner.stop()));
    },
    streamStats: () => {
      const all = pollers.map((poller) => poller.stats());
      return {
        recordsRead: sum(all.map((stats) => stats.recordsRead)),
        batchesInvoked: sum(all.map((stats) => stats.batchesInvoked)),
        batchFailures: sum(all.map((stats) => stats.batchFailures)),
        recordsDiscarded: sum(all.map((stats) => stats.recordsDiscarded)),
      };
    },
    get streamFailures() {
      return pollers.flatMap((poller) => poller.discarded);
    },
    asyncFailures: asyncInvoker.failures,
    launched,
    crashInvocations: (prefix, predicate) => {
      const runner = runners.get(findFunction(prefix)) as LambdaFunctionRunner;
      return runner.crashContainers(predicate);
    },
    advanceClock: (milliseconds) => {
      if (clockOffsetMs === undefined)
        throw new Error('advanceClock needs startLocalCloud({ shiftableClock: true })');
      Atomics.add(clockOffsetMs, 0, BigInt(Math.round(milliseconds)));
    },
    clockOffsetMs: () => (clockOffsetMs === undefined ? 0 : Number(Atomics.load(clockOffsetMs, 0))),
    stop: stopAll,
  };
}

async function loadStack(
  options: LocalCloudOptions,
): Promise<{ stack: SynthesizedStack; synthesizedHere: boolean }> {
  if (options.stack === undefined) {
    const stack = await synthesizeStack({ ...(options.context ? { context: options.context } : {}) });
    return { stack, synthesizedHere: true };
  }
  const stack =
    'template' in options.stack
      ? options.stack
      : readSynthesizedStack(options.stack.assemblyDirectory, options.stack.stackName);
  return { stack, synthesizedHere: false };
}

/**
 * Creates the node table from the template's `AWS::DynamoDB::Table` properties (keys, stream view
 * type, TTL attribute), as CloudFormation would: so the functions run against the table the stack
 * declares, not one the tests believe in.
 */
async function createTableFromTemplate(
  client: DynamoDBClient,
  stackName: string,
  definition: TableDefinition,
  options: { stream: boolean } = { stream: true },
): Promise<{ name: string; streamArn: string }> {
  if (!options.stream) {
    const name = physicalName(stackName, definition.logicalId);
    await client.send(
      new CreateTableCommand({
        TableName: name,
        KeySchema: [...definition.keySchema],
        AttributeDefinitions: [...definition.attributeDefinitions],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
    return { name, streamArn: '' };
  }
  if (definition.streamViewType === undefined) {
    throw new TemplateError(
      `${definition.logicalId} has no stream, but the stack maps its stream to a function`,
    );
  }
  const name = physicalName(stackName, definition.logicalId);
  const created = await client.send(
    new CreateTableCommand({
      TableName: name,
      KeySchema: [...definition.keySchema],
      AttributeDefinitions: [...definition.attributeDefinitions],
      BillingMode: definition.billingMode === 'PAY_PER_REQUEST' ? 'PAY_PER_REQUEST' : 'PROVISIONED',
      ...(definition.billingMode === 'PAY_PER_REQUEST'
        ? {}
        : { ProvisionedThroughput: { ReadCapacityUnits: 1000, WriteCapacityUnits: 1000 } }),
      StreamSpecification: { StreamEnabled: true, StreamViewType: definition.streamViewType },
    }),
  );
  if (definition.timeToLiveAttribute !== undefined) {
    await client.send(
      new UpdateTimeToLiveCommand({
        TableName: name,
        TimeToLiveSpecification: { AttributeName: definition.timeToLiveAttribute, Enabled: true },
      }),
    );
  }
  const streamArn = created.TableDescription?.LatestStreamArn;
  if (!streamArn) throw new Error(`DynamoDB Local created ${name} without a stream`);
  return { name, streamArn };
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

/** CloudFormation-style physical name: `<stack>-<logicalId>-<random suffix>`. */
function physicalName(stackName: string, logicalId: string): string {
  const suffix = randomBytes(6).toString('hex').toUpperCase();
  return `${stackName}-${logicalId}-${suffix}`.slice(0, 64);
}

/**
 * The cluster the stack was synthesized for (context `eni-ipam:clusterName`), as the template
 * carries it: the allocating functions' CLUSTER_NAME.
 */
function clusterNameOf(stack: SynthesizedStack): string {
  for (const resource of Object.values(stack.template.Resources)) {
    const variables = (
      resource.Properties?.Environment as { Variables?: Record<string, unknown> } | undefined
    )?.Variables;
    if (typeof variables?.CLUSTER_NAME === 'string') return variables.CLUSTER_NAME;
  }
  throw new TemplateError(`no function of ${stack.stackName} names its cluster (CLUSTER_NAME)`);
}

function functionStatsOf(runners: Map<string, LambdaFunctionRunner>): Record<string, FunctionStats> {
  return Object.fromEntries([...runners].map(([logicalId, runner]) => [logicalId, runner.stats()]));
}

function assertLoopback(url: string): void {
  const { hostname } = new URL(url);
  if (!/^127\.\d+\.\d+\.\d+$/.test(hostname)) {
    throw new Error(`the local cloud only talks to 127.0.0.0/8, not ${url}`);
  }
}

function sleep(milliseconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, milliseconds));
}

function sum(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}
