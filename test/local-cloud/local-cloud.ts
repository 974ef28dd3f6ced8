import { rmSync } from 'node:fs';
import type { NodeRecord } from '../../functions/core/model.ts';
import type { ClusterSeed, Ec2Emulator, InstanceRecord } from '../emulators/ec2/index.ts';
import type { K8sEmulator } from '../emulators/k8s/index.ts';
import type { KubernetesUnderTest } from '../support/kubernetes.ts';
import type { LocalMultiPoolAgent } from './cilium-agent.ts';
import type { AsyncInvocationFailure, BusEvent } from './event-bus.ts';
import { type EventRouting, type EventRoutingOptions, startEventRouting } from './event-routing.ts';
import {
  type FunctionFleet,
  type FunctionFleetOptions,
  type LogLine,
  startFunctionFleet,
} from './function-fleet.ts';
import type { FunctionStats, InvocationResult } from './lambda-runner.ts';
import { LOCAL_OPERATOR_CREDENTIALS, localOperatorIdentity } from './local-operator.ts';
import { ShiftableClock } from './shiftable-clock.ts';
import {
  type NodeTable,
  type StackResources,
  type StandIns,
  type StandInsOptions,
  startStandIns,
} from './stand-ins.ts';
import type { DiscardedBatch, StreamPollerStats } from './stream-poller.ts';
import { type CloudSummary, type Denials, summarize } from './summary.ts';
import { readSynthesizedStack, type SynthesizedStack, synthesizeStack } from './synthesize.ts';
import { startOrUndo, type Teardown } from './teardown.ts';
import { readStackModel, type StackModel } from './template.ts';

/**
 * The local cloud: runs what `cdk synth` produced on this machine, composed of three parts, each
 * started and stopped on its own:
 *
 * 1. the stand-ins (`stand-ins.ts`): DynamoDB Local with the template's tables, the EC2 emulator
 *    with a seeded cluster, the Kubernetes API server (kube-apiserver by default, or the emulator:
 *    `kubernetesBackend`), the roles' identities and IAM, and the
 *    simulated cilium-agents;
 * 2. the function fleet (`function-fleet.ts`): the bundled function assets in Lambda containers,
 *    with the template's environment, each as its own role, and Lambda's Invoke API;
 * 3. the event routing (`event-routing.ts`): the event bus and its rules, the schedules, Lambda's
 *    asynchronous invocation, the stream event-source mapping.
 *
 * They start in that order (the stand-ins while the stack synthesizes) and stop in reverse, also
 * when a later one fails to start. Nothing leaves 127.0.0.0/8: every AWS endpoint points at a
 * stand-in, and the catch-all AWS_ENDPOINT_URL at a closed loopback port.
 */

export { LOCAL_ACCOUNT, LOCAL_REGION } from './local-account.ts';

export interface LocalCloudOptions extends StandInsOptions, FunctionFleetOptions, EventRoutingOptions {
  /** An already synthesized stack (e.g. shared by a bench); default: synthesize now, in-process. */
  readonly stack?: SynthesizedStack | { readonly assemblyDirectory: string; readonly stackName: string };
  /** Extra CDK context when synthesizing here. */
  readonly context?: Readonly<Record<string, unknown>>;
  /**
   * Give the functions and the EC2 emulator one clock that `advanceClock` moves forward (leases
   * expire, grace periods pass, without waiting). Default false: everything uses the real clock.
   */
  readonly shiftableClock?: boolean;
}

export interface LocalCloud {
  readonly stack: SynthesizedStack;
  readonly model: StackModel;
  readonly ec2: Ec2Emulator;
  readonly cluster: ClusterSeed;
  /** The Kubernetes API server (`k8sEmulatorOf` for the emulator's own handles, when it is the backend). */
  readonly k8s: KubernetesUnderTest;
  /** A person's kubeconfig: the admin's context (current) and one per function's group. */
  readonly kubeconfigPath: string;
  /** The Lambda Invoke API of the functions (RequestResponse, Event, DryRun), authorized by IAM. */
  readonly lambdaEndpoint: string;
  /** The node table, created from the template on DynamoDB Local. */
  readonly table: NodeTable;
  /** Function name by logical id, as CloudFormation would have named them. */
  readonly functionNames: Readonly<Record<string, string>>;
  /** Log lines of every function when no `onLog` was given (most recent last). */
  readonly logs: readonly LogLine[];
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
  denials(): Promise<Denials>;
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

export function startLocalCloud(options: LocalCloudOptions = {}): Promise<LocalCloud> {
  return startOrUndo((teardown) => start(options, teardown));
}

/** Starts the parts in order, each registering its stop; `startOrUndo` stops them in reverse on failure. */
async function start(options: LocalCloudOptions, teardown: Teardown): Promise<LocalCloud> {
  const clock = options.shiftableClock === true ? new ShiftableClock() : undefined;
  // The stand-ins start while the stack synthesizes (bundling is the slow part).
  const { stack, standIns } = await loadStackBesideStandIns(options, clock, teardown);
  const model = readStackModel(stack.template, stack.assemblyDirectory);
  const resources = await standIns.createStackResources(stack, model);
  const fleet = await startFunctionFleet(options, { stack, model, standIns, resources, clock });
  teardown.add(() => fleet.stop());
  const routing = await startEventRouting(options, {
    stack,
    model,
    nodeTable: resources.nodeTable,
    streamsClient: standIns.dynamoDb.streamsClient,
    ec2: standIns.ec2,
    invoke: (logicalId, event) => fleet.invoke(logicalId, event),
  });
  teardown.add(() => routing.stop());
  fleet.routeEventInvocations(
    (logicalId, event) => void routing.invokeAsync(logicalId, event, 'the Lambda Invoke API'),
  );
  standIns.iam.assumeRole(
    LOCAL_OPERATOR_CREDENTIALS.accessKeyId,
    localOperatorIdentity({
      nodeTableArn: resources.tableAttribute(resources.nodeTable.logicalId, 'Arn') ?? '',
      syncFunctionArn: fleet.functionArn(fleet.logicalIdOf('Sync')),
    }),
  );
  return localCloudOf({
    stack,
    model,
    standIns,
    resources,
    fleet,
    routing,
    clock,
    stop: () => teardown.run(),
  });
}

/** Loads (or synthesizes) the stack and starts the stand-ins at the same time; registers whatever of them started. */
async function loadStackBesideStandIns(
  options: LocalCloudOptions,
  clock: ShiftableClock | undefined,
  teardown: Teardown,
): Promise<{ stack: SynthesizedStack; standIns: StandIns }> {
  const [stackOutcome, standInsOutcome] = await Promise.allSettled([
    loadStack(options),
    startStandIns(options, clock),
  ]);
  if (standInsOutcome.status === 'fulfilled') teardown.add(() => standInsOutcome.value.stop());
  if (stackOutcome.status === 'fulfilled' && stackOutcome.value.synthesizedHere) {
    const { assemblyDirectory } = stackOutcome.value.stack;
    teardown.add(() => rmSync(assemblyDirectory, { recursive: true, force: true }));
  }
  if (stackOutcome.status === 'rejected') throw stackOutcome.reason;
  if (standInsOutcome.status === 'rejected') throw standInsOutcome.reason;
  return { stack: stackOutcome.value.stack, standIns: standInsOutcome.value };
}

/** The started parts, together. */
interface CloudParts {
  readonly stack: SynthesizedStack;
  readonly model: StackModel;
  readonly standIns: StandIns;
  readonly resources: StackResources;
  readonly fleet: FunctionFleet;
  readonly routing: EventRouting;
  readonly clock: ShiftableClock | undefined;
  stop(): Promise<void>;
}

/**
 * The Kubernetes emulator of a cloud started with `kubernetesBackend: 'emulator'` (its store, its
 * request log, its open watches): what the bench and the chaos runs read synchronously.
 */
export function k8sEmulatorOf(cloud: Pick<LocalCloud, 'k8s'>): K8sEmulator {
  const { emulator } = cloud.k8s;
  if (emulator === undefined) {
    throw new Error(
      `this local cloud runs on ${cloud.k8s.version}: start it with kubernetesBackend 'emulator'`,
    );
  }
  return emulator;
}

/** The `LocalCloud` interface over the parts: each member is one part's, or (`settle`) asks all three. */
function localCloudOf(parts: CloudParts): LocalCloud {
  const { standIns, resources, fleet, routing, clock } = parts;
  const { ec2, k8s } = standIns;
  const launched: string[] = [];
  const records = () => allRecords(resources.nodeTable);
  return {
    stack: parts.stack,
    model: parts.model,
    ec2,
    cluster: resources.cluster,
    k8s,
    kubeconfigPath: standIns.kubeconfigPath,
    lambdaEndpoint: fleet.lambdaEndpoint,
    table: resources.nodeTable,
    functionNames: fleet.functionNames,
    logs: fleet.logs,
    invoke: (prefix, event) => fleet.invoke(fleet.logicalIdOf(prefix), event),
    putEvent: (event) => routing.putEvent(event),
    emitEc2Event: (instanceId, state) => routing.emitEc2Event(instanceId, state),
    launchInstance: (instanceType, launchOptions = {}) => {
      const instance = launchClusterInstance(ec2, resources, instanceType, {
        ...launchOptions,
        subnet: launchOptions.subnet ?? (launched.length % 2 === 0 ? 'nodesA' : 'nodesB'),
      });
      launched.push(instance.instanceId);
      return instance;
    },
    fireSchedules: () => routing.fireSchedules(),
    drainStream: () => routing.drainStream(),
    settle: () => settle(parts),
    waitUntil: (condition, waitOptions = {}) => waitUntil(condition, waitOptions, standIns),
    records,
    summary: async (instanceIds = launched) => summarize(ec2.state, k8s, await records(), instanceIds),
    denials: () => standIns.denials(),
    functionStats: () => fleet.stats(),
    multiPoolAgent: (nodeName) => standIns.agents.multiPoolAgent(nodeName),
    updateFunctionEnvironment: (variables) => fleet.updateEnvironment(variables),
    streamStats: () => routing.streamStats(),
    get streamFailures() {
      return routing.streamFailures;
    },
    asyncFailures: routing.asyncFailures,
    launched,
    crashInvocations: (prefix, predicate) => fleet.crashInvocations(fleet.logicalIdOf(prefix), predicate),
    advanceClock: (milliseconds) => {
      if (clock === undefined)
        throw new Error('advanceClock needs startLocalCloud({ shiftableClock: true })');
      clock.advance(milliseconds);
    },
    clockOffsetMs: () => clock?.offsetMs() ?? 0,
    stop: () => parts.stop(),
  };
}

/**
 * Quiet means: no asynchronous invocation queued, the stream drained, no function invocation
 * running or waiting, no agent registration pending. Each round waits for the routing to go idle
 * first, since one invocation's writes start the next; gives up after 100 rounds.
 */
async function settle({ routing, fleet, standIns }: CloudParts): Promise<void> {
  for (let round = 0; round < 100; round++) {
    await routing.idle();
    if (routing.pendingInvocations() === 0 && standIns.agents.pendingRegistrations() === 0 && !fleet.busy()) {
      return;
    }
    await sleep(20);
  }
}

/** Polls `condition` until it holds; a failed agent registration or the deadline ends the wait with an error. */
async function waitUntil(
  condition: () => boolean | Promise<boolean>,
  options: { timeoutMs?: number; intervalMs?: number; description?: string },
  standIns: StandIns,
): Promise<void> {
  const deadline = Date.now() + (options.timeoutMs ?? 20_000);
  while (!(await condition())) {
    const agentFailure = standIns.agents.firstFailure();
    if (agentFailure !== undefined) throw agentFailure;
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${options.description ?? 'the condition'}`);
    }
    await sleep(options.intervalMs ?? 50);
  }
}

/** An instance of the stack's cluster (tagged for it, in the nodes' security group) in the given node subnet. */
function launchClusterInstance(
  ec2: Ec2Emulator,
  { cluster, clusterName }: StackResources,
  instanceType: string,
  options: { subnet: 'nodesA' | 'nodesB'; primaryNetworkInterfaceTags?: Record<string, string> },
): InstanceRecord {
  return ec2.state.launchInstance({
    instanceType,
    subnetId: cluster.subnets[options.subnet].subnetId,
    securityGroupIds: [cluster.securityGroups.nodes.groupId],
    tags: { [`kubernetes.io/cluster/${clusterName}`]: 'owned', Name: `${clusterName}-node` },
    ...(options.primaryNetworkInterfaceTags === undefined
      ? {}
      : { primaryNetworkInterfaceTags: options.primaryNetworkInterfaceTags }),
  });
}

/** Every record of the node table, by instance id, page by page. */
async function allRecords(nodeTable: NodeTable): Promise<Map<string, NodeRecord>> {
  const all = new Map<string, NodeRecord>();
  let pageToken: string | undefined;
  do {
    const page = await nodeTable.store.listPage(pageToken);
    for (const record of page.records) all.set(record.instanceId, record);
    pageToken = page.nextPageToken;
  } while (pageToken !== undefined);
  return all;
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

function sleep(milliseconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, milliseconds));
}
