import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import { ownershipTags } from '../../functions/core/eni-ownership.ts';
import { expandCidr } from '../../functions/core/ip-math.ts';
import { instanceOfEc2Call } from '../emulators/ec2/call-instance.ts';
import type { InjectedFault } from '../emulators/ec2/index.ts';
import { ApiError, type K8sEmulator } from '../emulators/k8s/index.ts';
import {
  type AgentKubernetesApi,
  LocalMultiPoolAgent,
  registerCiliumNode,
  writeUsedIps,
} from '../local-cloud/cilium-agent.ts';
import {
  k8sEmulatorOf,
  type LocalCloud,
  type SynthesizedStack,
  startLocalCloud,
} from '../local-cloud/index.ts';
import { MultiPoolAgentModel } from '../support/cilium-multipool-agent-model.ts';
import { checkRun } from './checks.ts';
import {
  CRASH_POINT_OF_EC2_ACTION,
  type CrashPlan,
  type CrashPoint,
  describePlan,
  type NodePlan,
  planRun,
  type RunPlan,
} from './plan.ts';
import { Prng } from './prng.ts';

/**
 * One chaos run: a fresh local cloud (the synthesized stack's bundled functions on DynamoDB Local
 * and the EC2 and Kubernetes emulators), then the run's phases in order:
 *
 * 1. warm-up: every function's containers start, so the fault phase meets running functions;
 * 2. arming: the plan's EC2 faults (through the emulator's fault registry), Kubernetes faults and
 *    crashes are armed before anything launches;
 * 3. the timeline: launches, agents, EC2 events, terminations and schedule firings at their planned
 *    moments, while the faults hit;
 * 4. the end of the fault phase: every fault disarmed, the timeline finished;
 * 5. the sweep: in-flight work settles, the clock moves past every lease and grace period, the
 *    schedules run, the agents answer;
 * 6. the judgement: `checkRun` judges the end state and every CiliumNode version recorded on the
 *    way, and the 1.20 agents report what they saw.
 *
 * Crashes are real deaths: the EC2 emulator's `before-apply` fault (or the Kubernetes store's write
 * listener, for a sync's status write) terminates the worker thread of the invocation making the
 * call, and only then lets the call apply. The function never sees the answer, and nothing of it
 * runs afterwards: no `finally`, no lease release, no compensation.
 */

export interface ChaosEnvironment {
  readonly stack: SynthesizedStack;
  readonly dynamoDbEndpoint: string;
}

export interface RunOptions {
  /** Receives progress lines (plan, crashes); default none. */
  readonly log?: (line: string) => void;
  /** Hard bound on the whole run; default 150 s. */
  readonly deadlineMs?: number;
  /** Called with the cloud and the failures after the checks, before the cloud stops (to dig into a failure). */
  readonly inspect?: (cloud: LocalCloud, failures: readonly string[]) => void | Promise<void>;
}

export interface RunResult {
  readonly seed: number;
  readonly passed: boolean;
  readonly failures: readonly string[];
  readonly durationMs: number;
  readonly plan: RunPlan;
  readonly summary: string;
  /** The functions' last error lines, for a failed run. */
  readonly recentErrors: readonly string[];
}

/** Moves the functions' clock past the lease (180 s), the consistency grace (60 s) and GC's grace (10 min). */
const CLOCK_ADVANCE_MS = 11 * 60_000;
/** Lambda's async retry waits (1 and 2 minutes) become 1 and 2 seconds. */
const TIME_SCALE = 60;
const SETTLE_TIMEOUT_MS = 45_000;
const SWEEP_ROUNDS = 4;
/** Containers per function (the sweep's reserved concurrency of 1 still applies). */
const CONTAINERS_PER_FUNCTION = 3;
const DEFAULT_DEADLINE_MS = 150_000;

class RunTimeoutError extends Error {
  override readonly name = 'RunTimeoutError';
}

export async function runChaos(
  seed: number,
  environment: ChaosEnvironment,
  options: RunOptions = {},
): Promise<RunResult> {
  const startedAtMs = Date.now();
  const plan = planRun(seed);
  const log = options.log ?? (() => {});
  for (const line of describePlan(plan)) log(`  ${line}`);
  const counters: RunCounters = { crashes: new Map(), redeliveries: 0, events: 0 };
  const faultPhase = { active: true };
  const recentErrors: string[] = [];
  const cloud = await startChaosCloud(environment, plan, { seed, faultPhase, counters, recentErrors });
  const run: ChaosRun = {
    plan,
    cloud,
    log,
    options,
    counters,
    faultPhase,
    timeline: new Timeline(log),
    instanceIds: plan.nodes.map(() => undefined),
    nodeNames: new Map(),
    agents: { multiPool: new Map(), retired: [], failures: [] },
    phase: (name) => log(`  ${name} at ${((Date.now() - startedAtMs) / 1000).toFixed(1)} s`),
  };
  let failures: string[];
  let summary = '';
  const deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
  try {
    ({ failures, summary } = await withTimeout(
      runPhases(run),
      deadlineMs,
      `run ${seed} did not finish within ${deadlineMs / 1000} s`,
    ));
  } catch (error) {
    failures = [`run: ${(error as Error).message}`];
  } finally {
    faultPhase.active = false;
    run.timeline.cancel();
    await withTimeout(cloud.stop(), 30_000, 'stopping the local cloud').catch((error: unknown) =>
      log(`  ${(error as Error).message}`),
    );
  }
  const durationMs = Date.now() - startedAtMs;
  return { seed, passed: failures.length === 0, failures, durationMs, plan, summary, recentErrors };
}

interface RunCounters {
  readonly crashes: Map<CrashPoint, number>;
  redeliveries: number;
  events: number;
}

/** The simulated agents of a run: the 1.20 ones by node name, those retired by a downgrade, what the downgrades found. */
interface AgentFleet {
  readonly multiPool: Map<string, LocalMultiPoolAgent>;
  readonly retired: LocalMultiPoolAgent[];
  readonly failures: string[];
}

/** What the phases of one run share. */
interface ChaosRun {
  readonly plan: RunPlan;
  readonly cloud: LocalCloud;
  readonly log: (line: string) => void;
  readonly options: RunOptions;
  readonly counters: RunCounters;
  /** `active` until the fault phase ends: crashes and stream redeliveries happen only while it is. */
  readonly faultPhase: { active: boolean };
  readonly timeline: Timeline;
  /** By plan node: the instance launched for it (undefined until it is). */
  readonly instanceIds: (string | undefined)[];
  /** CiliumNode name → instance id, for every launched node. */
  readonly nodeNames: Map<string, string>;
  readonly agents: AgentFleet;
  /** Logs that a phase was reached, with the time since the run started. */
  phase(name: string): void;
}

/** The faults armed for the fault phase, whose hits the summary counts. */
interface ArmedFaults {
  readonly ec2: readonly InjectedFault[];
  /** Kubernetes faults: those on any node at once, one node's when it launches. */
  readonly k8s: { readonly hits: number }[];
  /** Stops the crash at a sync's status write. */
  readonly stopWatchingWrites: () => void;
}

/** The local cloud of a run, its stream redelivery drawn from the run's own stream. */
function startChaosCloud(
  environment: ChaosEnvironment,
  plan: RunPlan,
  run: {
    readonly seed: number;
    readonly faultPhase: { readonly active: boolean };
    readonly counters: RunCounters;
    readonly recentErrors: string[];
  },
): Promise<LocalCloud> {
  const runtimeRandom = new Prng(run.seed).fork('runtime');
  return startLocalCloud({
    stack: environment.stack,
    dynamoDbEndpoint: environment.dynamoDbEndpoint,
    runSchedules: false,
    ec2Events: false,
    simulateAgents: false,
    // The emulator: for its speed, and for what only it does (a crash inside a status write, its
    // synchronous store and history read by the checks).
    kubernetesBackend: 'emulator',
    shiftableClock: true,
    timeScale: TIME_SCALE,
    maxConcurrencyPerFunction: CONTAINERS_PER_FUNCTION,
    streamPollIntervalMs: 100,
    streamRedelivery: () => {
      if (!run.faultPhase.active || !runtimeRandom.chance(plan.streamRedeliveryProbability)) return false;
      run.counters.redeliveries++;
      return true;
    },
    onLog: ({ functionName, stream, text }) => {
      if (stream === 'stderr' || text.includes('"level":"ERROR"')) {
        run.recentErrors.push(
          `${functionName.replace(/^.*?-(\w+?)Function.*$/, '$1')}: ${text.slice(0, 400)}`,
        );
        if (run.recentErrors.length > 12) run.recentErrors.shift();
      }
    },
  });
}

async function runPhases(run: ChaosRun): Promise<{ failures: string[]; summary: string }> {
  await withTimeout(warmUp(run.cloud), SETTLE_TIMEOUT_MS, 'warming the containers');
  run.phase('containers warm');
  const armed = armFaults(run);
  const launched = scheduleTimeline(run, armed);
  await endFaultPhase(run, armed, launched);
  const faultHits = [...armed.ec2, ...armed.k8s].reduce((sum, fault) => sum + fault.hits, 0);
  await sweep(run);
  run.phase('sweep done');
  return judge(run, faultHits);
}

/** Arms every fault of the plan before anything launches; one node's Kubernetes faults wait for its launch. */
function armFaults(run: ChaosRun): ArmedFaults {
  const { ec2, k8s } = run.cloud;
  const armedEc2: InjectedFault[] = [];
  for (const fault of run.plan.ec2Faults) {
    const injected = ec2.faults.arm(fault);
    if (injected !== undefined) armedEc2.push(injected);
  }
  const armedK8s = run.plan.k8sFaults
    .filter((fault) => fault.node === undefined)
    .map((fault) =>
      k8s.faults.inject({
        match: { verb: fault.verb, ...(fault.subresource ? { subresource: fault.subresource } : {}) },
        kind: fault.kind,
        times: fault.times,
      }),
    );
  return { ec2: armedEc2, k8s: armedK8s, stopWatchingWrites: armCrashes(run) };
}

/**
 * Arms the plan's crashes: at an EC2 call through the emulator's `before-apply` fault, between a
 * sync's status and spec writes through the Kubernetes store's write listener. Returns what stops
 * the latter.
 */
function armCrashes(run: ChaosRun): () => void {
  const { cloud } = run;
  const crashes = run.plan.crashes.map((crash) => ({ ...crash, remaining: crash.times }));
  /** Consumes one use of the first armed crash for this point and instance. */
  const takeCrash = (
    point: CrashPoint,
    instanceId: string,
  ): (CrashPlan & { remaining: number }) | undefined => {
    const crash = crashes.find(
      (candidate) =>
        candidate.point === point &&
        candidate.remaining > 0 &&
        (candidate.node === undefined || run.instanceIds[candidate.node] === instanceId),
    );
    if (crash) crash.remaining--;
    return crash;
  };
  const recordCrash = (point: CrashPoint, instanceId: string, killed: number) => {
    run.counters.crashes.set(point, (run.counters.crashes.get(point) ?? 0) + 1);
    run.log(`  crash ${point} of ${instanceId}: ${killed} container(s) killed`);
  };
  cloud.ec2.faults.arm({
    kind: 'before-apply',
    hook: async (action, params) => {
      const point = CRASH_POINT_OF_EC2_ACTION[action];
      if (!run.faultPhase.active || point === undefined) return;
      const instanceId = instanceOfEc2Call(cloud.ec2.state, action, params);
      const crash = instanceId === undefined ? undefined : takeCrash(point, instanceId);
      if (instanceId === undefined || crash === undefined) return;
      // Kill the allocator working on this instance (or the sweep), THEN let EC2 apply the call.
      let killed = await cloud.crashInvocations('Allocate', (event) => eventInstanceId(event) === instanceId);
      if (killed === 0) killed = await cloud.crashInvocations('Sweep', isSweepTask);
      if (killed === 0) {
        crash.remaining++; // nobody to kill (the call came from elsewhere): the crash stays armed
        return;
      }
      recordCrash(point, instanceId, killed);
    },
  });
  return k8sEmulatorOf(cloud).store.onWrite((entry) => {
    if (!run.faultPhase.active || entry.verb !== 'patch' || entry.subresource !== 'status') return;
    const instanceId = run.nodeNames.get(entry.name);
    if (instanceId === undefined || takeCrash('between-status-and-spec-write', instanceId) === undefined)
      return;
    // Synchronously inside the status write: the worker dies before it can read the answer.
    run.timeline.track(
      cloud
        .crashInvocations('Sync', (event) => mentions(event, instanceId))
        .then((killed) => {
          if (killed > 0) recordCrash('between-status-and-spec-write', instanceId, killed);
        }),
    );
  });
}

/** Schedules the launches, EC2 events and schedule firings; resolves once every node launched. */
function scheduleTimeline(run: ChaosRun, armed: ArmedFaults): Promise<void> {
  const { plan, timeline } = run;
  const launched = new Promise<void>((resolve) => {
    let remaining = plan.nodes.length;
    for (const [index, node] of plan.nodes.entries()) {
      timeline.at(node.launchAtMs, () => {
        launchNode(run, armed, index, node);
        remaining--;
        if (remaining === 0) resolve();
      });
    }
  });
  for (const event of plan.events) {
    timeline.at(event.atMs, async () => {
      await launched; // an instance's events never precede its launch
      const instanceId = run.instanceIds[event.node];
      if (instanceId === undefined) return;
      run.counters.events++;
      await run.cloud.emitEc2Event(instanceId, event.state);
    });
  }
  for (const atMs of plan.scheduleFiringsAtMs) timeline.at(atMs, () => run.cloud.fireSchedules());
  return launched;
}

/** Launches one node, arms its own Kubernetes faults, and schedules its agent's life and its termination. */
function launchNode(run: ChaosRun, armed: ArmedFaults, index: number, node: NodePlan): void {
  const { cloud, timeline, agents } = run;
  const { k8s } = cloud;
  const instance = cloud.launchInstance(node.instanceType, {
    subnet: node.subnet,
    ...(node.eth0Ours
      ? { primaryNetworkInterfaceTags: ownershipTags(cloud.cluster.clusterName, 'launch-template') }
      : {}),
  });
  const name = instance.privateDnsName;
  run.instanceIds[index] = instance.instanceId;
  run.nodeNames.set(name, instance.instanceId);
  for (const fault of run.plan.k8sFaults.filter((candidate) => candidate.node === index)) {
    armed.k8s.push(
      k8s.faults.inject({
        match: { verb: fault.verb, name, ...(fault.subresource ? { subresource: fault.subresource } : {}) },
        kind: fault.kind,
        times: fault.times,
      }),
    );
  }
  timeline.at(node.agentDelayMs, async () => {
    await registerAgent(k8s, name, instance.instanceId, node);
    if (node.agentVersion === '1.20')
      agents.multiPool.set(name, new LocalMultiPoolAgent(k8s, name, new MultiPoolAgentModel()));
  });
  const { reportUsed } = node;
  if (reportUsed !== undefined) {
    timeline.at(Math.max(reportUsed.afterMs, node.agentDelayMs + 1), () => {
      const multiPool = agents.multiPool.get(name);
      if (multiPool === undefined) return reportUsedIps(k8sEmulatorOf(cloud), name, reportUsed.usedCount);
      return allocatePods(multiPool, reportUsed.usedCount);
    });
  }
  if (node.switchVersionAfterMs !== undefined) {
    timeline.at(Math.max(node.switchVersionAfterMs, node.agentDelayMs + 2), () => switchAgent(run, name));
  }
  if (node.terminateAtMs !== undefined) {
    timeline.at(node.terminateAtMs - node.launchAtMs, () => {
      cloud.ec2.state.setInstanceState(instance.instanceId, 'shutting-down');
      timeline.at(150, () => cloud.ec2.state.setInstanceState(instance.instanceId, 'terminated'));
    });
  }
}

/** Upgrades a 1.19 agent in place to 1.20, or downgrades a 1.20 one to 1.19. */
async function switchAgent(run: ChaosRun, nodeName: string): Promise<void> {
  const { agents } = run;
  const k8s = run.cloud.k8s;
  const multiPool = agents.multiPool.get(nodeName);
  if (multiPool === undefined) {
    agents.multiPool.set(nodeName, await upgradeAgent(k8s, nodeName));
    return;
  }
  agents.multiPool.delete(nodeName);
  agents.retired.push(multiPool);
  multiPool.stop();
  agents.failures.push(...(await downgradeAgent(k8s, nodeName, multiPool.model.endpoints())));
}

/**
 * Lets the fault phase run its planned length, then disarms every fault (the EC2 ones through the
 * registry's `disarmAll`) and waits for the rest of the timeline and every launch.
 */
async function endFaultPhase(run: ChaosRun, armed: ArmedFaults, launched: Promise<void>): Promise<void> {
  const { plan, cloud } = run;
  await sleep(plan.faultPhaseMs);
  run.phase('faults stop');
  run.faultPhase.active = false;
  cloud.ec2.faults.disarmAll();
  cloud.k8s.faults.clear();
  armed.stopWatchingWrites();
  await sleep(Math.max(0, lastTimelineMs(plan) - plan.faultPhaseMs) + 50);
  await withTimeout(launched, 5_000, 'instances never launched');
}

/** When the last planned action of the timeline is due (an agent's first pass after its report included). */
function lastTimelineMs(plan: RunPlan): number {
  return Math.max(
    ...plan.nodes.map(
      (node) => node.launchAtMs + Math.max(node.reportUsed?.afterMs ?? 0, node.agentDelayMs + 1) + 2_000,
    ),
    plan.faultPhaseMs,
    ...plan.events.map((event) => event.atMs),
    ...plan.nodes.map((node) => node.launchAtMs + node.agentDelayMs),
    ...plan.nodes.map((node) => (node.terminateAtMs ?? 0) + 200),
  );
}

/** In-flight work settles, then leases and grace periods pass while the schedules and the agents run. */
async function sweep(run: ChaosRun): Promise<void> {
  const { cloud } = run;
  await settle(cloud, 'settling after the fault phase');
  run.phase('settled');
  cloud.advanceClock(CLOCK_ADVANCE_MS);
  for (let round = 0; round < SWEEP_ROUNDS; round++) {
    await withTimeout(cloud.fireSchedules(), SETTLE_TIMEOUT_MS, 'schedule firing');
    await settle(cloud, `settling after schedule round ${round + 1}`);
    // The agents' next pass: 1.19 agents answer the release handshake, 1.20 agents write pools.
    for (const nodeName of run.nodeNames.keys()) {
      const multiPool = run.agents.multiPool.get(nodeName);
      if (multiPool) await multiPool.pass();
      else answerReleaseHandshake(k8sEmulatorOf(cloud), nodeName);
    }
  }
  for (const [prefix, event] of [
    ['Sweep', { task: 'sweep' }],
    ['Sweep', { task: 'eni-garbage-collection' }],
    ['Sync', { all: true }],
  ] as const) {
    const result = await withTimeout(cloud.invoke(prefix, event), SETTLE_TIMEOUT_MS, `final ${prefix}`);
    if (result.status === 'failed')
      run.log(`  final ${prefix} ${JSON.stringify(event)} failed: ${result.error.errorMessage}`);
    await settle(cloud, `settling after the final ${prefix}`);
  }
  await withTimeout(run.timeline.backgroundSettled(), 10_000, 'background work');
}

/** The checks over the end state and the history, what the 1.20 agents saw, and the run's summary line. */
async function judge(run: ChaosRun, faultHits: number): Promise<{ failures: string[]; summary: string }> {
  const { plan, cloud, agents } = run;
  const failures = await checkRun({
    cloud,
    clusterName: cloud.cluster.clusterName,
    instances: plan.nodes.map((node, index) => ({
      instanceId: run.instanceIds[index] as string,
      terminated: node.terminateAtMs !== undefined,
    })),
  });
  for (const [nodeName, agent] of agents.multiPool) {
    agent.stop();
    const instanceId = run.nodeNames.get(nodeName) ?? nodeName;
    const terminated = plan.nodes[run.instanceIds.indexOf(instanceId)]?.terminateAtMs !== undefined;
    for (const problem of agent.model.problems) failures.push(`agent-1.20: ${nodeName}: ${problem}`);
    for (const error of agent.failures) failures.push(`agent-1.20: ${nodeName}: ${error.message}`);
    if (!terminated) failures.push(...inUseOnEc2(cloud, instanceId, agent.model.inUseIps()));
  }
  for (const agent of agents.retired) {
    for (const problem of agent.model.problems)
      failures.push(`agent-1.20 (before its downgrade): ${problem}`);
  }
  failures.push(...agents.failures);
  await run.options.inspect?.(cloud, failures);
  return { failures, summary: summarize(run, faultHits) };
}

function summarize(run: ChaosRun, faultHits: number): string {
  const stats = Object.values(run.cloud.functionStats());
  const invocations = stats.reduce((sum, entry) => sum + entry.invocations, 0);
  const failedInvocations = stats.reduce((sum, entry) => sum + entry.failures, 0);
  const crashText =
    [...run.counters.crashes]
      .map(([point, count]) => `${point.replace(/-network-interface(-attribute)?/, '')} x${count}`)
      .join(', ') || 'none';
  const { counters } = run;
  return `${run.plan.nodes.length} nodes, ${faultHits} faults hit, crashes: ${crashText}, ${counters.events} events, ${counters.redeliveries} stream redeliveries, ${invocations} invocations (${failedInvocations} failed)`;
}

/** The timed actions of a run and the background work they start; a failure is logged, never thrown. */
class Timeline {
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly background = new Set<Promise<unknown>>();

  constructor(private readonly log: (line: string) => void) {}

  /** Runs `action` in `delayMs`; a promise it returns is tracked as background work. */
  at(delayMs: number, action: () => unknown): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      try {
        const result = action();
        if (result instanceof Promise) this.track(result);
      } catch (error) {
        this.log(`  timeline action failed: ${(error as Error).message}`);
      }
    }, delayMs);
    this.timers.add(timer);
  }

  track(promise: Promise<unknown>): void {
    const settled = promise.catch((error: unknown) =>
      this.log(`  background failure: ${(error as Error).message}`),
    );
    this.background.add(settled);
    void settled.finally(() => this.background.delete(settled));
  }

  /** Resolves once the background work started so far has settled. */
  backgroundSettled(): Promise<unknown> {
    return Promise.all([...this.background]);
  }

  /** Cancels every action not yet run. */
  cancel(): void {
    for (const timer of this.timers) clearTimeout(timer);
  }
}

function eventInstanceId(event: unknown): string | undefined {
  const detail = (event as { detail?: { 'instance-id'?: unknown } } | null)?.detail;
  return typeof detail?.['instance-id'] === 'string' ? detail['instance-id'] : undefined;
}

function isSweepTask(event: unknown): boolean {
  return (event as { task?: unknown } | null)?.task === 'sweep';
}

/** A sync invocation that may be writing this instance's CiliumNode: its stream batch, `{instanceId}` or `{all}`. */
function mentions(event: unknown, instanceId: string): boolean {
  return (event as { all?: unknown } | null)?.all === true || JSON.stringify(event).includes(instanceId);
}

/** The simulated cilium-agent registers its CiliumNode with the node's knobs in `spec.ipam` and `spec.eni`. */
function registerAgent(
  k8s: AgentKubernetesApi,
  nodeName: string,
  instanceId: string,
  node: NodePlan,
): Promise<void> {
  return registerCiliumNode(k8s, nodeName, instanceId, {
    ipam: {
      ...(node.knobs.minAllocate === undefined ? {} : { 'min-allocate': node.knobs.minAllocate }),
      ...(node.knobs.preAllocate === undefined ? {} : { 'pre-allocate': node.knobs.preAllocate }),
    },
    eni:
      node.knobs.firstInterfaceIndex === undefined
        ? {}
        : { 'first-interface-index': node.knobs.firstInterfaceIndex },
  });
}

/**
 * Starts every function's containers with invocations that change nothing (a malformed EC2 event,
 * a sync of an unknown instance, a garbage collection of an empty cluster).
 */
async function warmUp(cloud: LocalCloud): Promise<void> {
  const unknownInstance = { instanceId: 'i-0ffffffffffffffff' };
  await Promise.all([
    ...Array.from({ length: CONTAINERS_PER_FUNCTION }, () => cloud.invoke('Allocate', { warm: true })),
    ...Array.from({ length: CONTAINERS_PER_FUNCTION }, () => cloud.invoke('Sync', unknownInstance)),
    cloud.invoke('Sweep', { task: 'eni-garbage-collection' }),
  ]);
}

/**
 * The agent giving pods IPs: the lowest `count` pool IPs go into `status.ipam.used` (a status
 * update, as the agent writes it). Waits (bounded) for a non-empty pool; retries on a conflict.
 */
async function reportUsedIps(k8s: K8sEmulator, nodeName: string, count: number): Promise<void> {
  for (let attempt = 1; attempt <= 20; attempt++) {
    const current = k8s.store.get(nodeName);
    const pool = (current?.spec as { ipam?: { pool?: Record<string, { resource?: string }> } } | undefined)
      ?.ipam?.pool;
    const ips = Object.keys(pool ?? {})
      .sort()
      .slice(0, count);
    if (current === undefined || ips.length === 0) {
      await sleep(100);
      continue;
    }
    const status = (current.status ?? {}) as { ipam?: Record<string, unknown> };
    try {
      k8s.store.update(
        nodeName,
        {
          ...current,
          status: {
            ...current.status,
            ipam: {
              ...status.ipam,
              used: Object.fromEntries(
                ips.map((ip, index) => [
                  ip,
                  { owner: `default/pod-${index}`, resource: pool?.[ip]?.resource ?? '' },
                ]),
              ),
            },
          },
        },
        'status',
        'update',
      );
      return;
    } catch (error) {
      if (!(error instanceof ApiError && error.code === 409)) throw error;
    }
  }
}

/**
 * The 1.19 agent's answers in `status.ipam.release-ips` (cilium `pkg/ipam/crd.go`): every
 * `marked-for-release` IP becomes `ready-for-release` when it is in the pool and not in
 * `status.ipam.used`, else `do-not-release`; a `released` entry is deleted once the IP is out of
 * the pool. One status update; a conflict leaves it to the next refresh.
 */
function answerReleaseHandshake(k8s: K8sEmulator, nodeName: string): void {
  const current = k8s.store.get(nodeName);
  const status = current?.status as { ipam?: Record<string, unknown> } | undefined;
  const answers = { ...((status?.ipam?.['release-ips'] ?? {}) as Record<string, string>) };
  if (current === undefined || Object.keys(answers).length === 0) return;
  const pool = ((current.spec as { ipam?: { pool?: Record<string, unknown> } } | undefined)?.ipam?.pool ??
    {}) as Record<string, unknown>;
  const used = (status?.ipam?.used ?? {}) as Record<string, unknown>;
  for (const [ip, state] of Object.entries(answers)) {
    if (state === 'released' && !Object.hasOwn(pool, ip)) delete answers[ip];
    if (state === 'marked-for-release') {
      answers[ip] =
        Object.hasOwn(pool, ip) && !Object.hasOwn(used, ip) ? 'ready-for-release' : 'do-not-release';
    }
  }
  try {
    k8s.store.update(
      nodeName,
      { ...current, status: { ...current.status, ipam: { ...status?.ipam, 'release-ips': answers } } },
      'status',
      'update',
    );
  } catch (error) {
    if (!(error instanceof ApiError && error.code === 409)) throw error;
  }
}

/** A 1.20 agent's pods: `count` allocations, retried by the agent's own passes when the pool is short. */
function allocatePods(agent: LocalMultiPoolAgent, count: number): Promise<void> {
  for (let pod = 0; pod < count; pod++) agent.model.allocate(`default/pod-${pod}`, 'ipv4', Date.now());
  return agent.pass();
}

/**
 * An in-place upgrade to 1.20: the new agent restores the endpoints the 1.19 agent reported in
 * `status.ipam.used` from the CIDRs it derives from status, then takes over (it clears `used`).
 */
async function upgradeAgent(k8s: AgentKubernetesApi, nodeName: string): Promise<LocalMultiPoolAgent> {
  const current = (await k8s.getCiliumNode(nodeName)) as unknown as CiliumNode | undefined;
  const model = new MultiPoolAgentModel();
  if (current !== undefined) {
    model.observe(current);
    for (const [ip, allocation] of Object.entries(current.status?.ipam?.used ?? {})) {
      model.restore(allocation?.owner ?? ip, ip);
    }
  }
  return new LocalMultiPoolAgent(k8s, nodeName, model);
}

/**
 * A downgrade to 1.19: the old agent restores its endpoints from the dual-written `spec.ipam.pool`
 * (an IP missing there fails its restore) and reports them in `status.ipam.used`.
 */
async function downgradeAgent(
  k8s: AgentKubernetesApi,
  nodeName: string,
  endpoints: ReadonlyMap<string, string>,
): Promise<string[]> {
  let missing: string[] = [];
  const outcome = await writeUsedIps(k8s, nodeName, (current) => {
    const pool = current.spec?.ipam?.pool ?? {};
    missing = [...endpoints]
      .filter(([, ip]) => pool[ip] === undefined)
      .map(([owner, ip]) => `downgrade: ${nodeName}: ${owner}'s ${ip} is not in spec.ipam.pool`);
    if (missing.length > 0) return undefined;
    return Object.fromEntries(
      [...endpoints].map(([owner, ip]) => [ip, { owner, resource: pool[ip]?.resource }]),
    );
  });
  if (outcome === 'declined') return missing;
  if (outcome === 'conflicts') return [`downgrade: ${nodeName}: could not report used IPs`];
  return [];
}

/** Every IP a 1.20 agent holds is assigned on EC2 to an ENI of the instance. */
function inUseOnEc2(cloud: LocalCloud, instanceId: string, ips: readonly string[]): string[] {
  const assigned = new Set(
    cloud.ec2.state
      .instanceNetworkInterfaces(instanceId)
      .flatMap((eni) => [
        ...eni.secondaryPrivateIpAddresses,
        ...eni.ipv4Prefixes.flatMap((prefix) => expandCidr(prefix)),
      ]),
  );
  return ips
    .filter((ip) => !assigned.has(ip))
    .map((ip) => `in-use-sacred: ${instanceId}: the 1.20 agent's ${ip} is not assigned on EC2`);
}

async function settle(cloud: LocalCloud, what: string): Promise<void> {
  await withTimeout(cloud.settle(), SETTLE_TIMEOUT_MS, what);
}

function withTimeout<T>(promise: Promise<T>, milliseconds: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new RunTimeoutError(`timed out: ${what}`)), milliseconds);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function sleep(milliseconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, milliseconds));
}
