import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import { ENI_TAG_KEYS, ownershipTags } from '../../functions/core/eni-ownership.ts';
import { expandCidr } from '../../functions/core/ip-math.ts';
import { ApiError, type K8sEmulator } from '../emulators/k8s/index.ts';
import { LocalMultiPoolAgent, registerCiliumNode, writeUsedIps } from '../local-cloud/cilium-agent.ts';
import { type LocalCloud, type SynthesizedStack, startLocalCloud } from '../local-cloud/index.ts';
import { MultiPoolAgentModel } from '../support/cilium-multipool-agent-model.ts';
import { checkRun } from './checks.ts';
import { type CrashPoint, describePlan, type NodePlan, planRun, type RunPlan } from './plan.ts';
import { Prng } from './prng.ts';

/**
 * One chaos run: a fresh local cloud (the synthesized stack's bundled functions on DynamoDB Local
 * and the EC2 and Kubernetes emulators), the run's plan carried out against it while its faults are
 * armed, then the faults stop, the clock moves past every lease and grace period, the schedules
 * run, and `checkRun` judges the end state and every CiliumNode version recorded on the way.
 *
 * Crashes are real deaths: the EC2 emulator's beforeApply hook (or the Kubernetes store's write
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

export class RunTimeoutError extends Error {
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
  const runtimeRandom = new Prng(seed).fork('runtime');
  const recentErrors: string[] = [];
  const counters = { crashes: new Map<CrashPoint, number>(), redeliveries: 0, events: 0 };
  let faultsActive = true;

  const cloud = await startLocalCloud({
    stack: environment.stack,
    dynamoDbEndpoint: environment.dynamoDbEndpoint,
    runSchedules: false,
    ec2Events: false,
    simulateAgents: false,
    shiftableClock: true,
    timeScale: TIME_SCALE,
    maxConcurrencyPerFunction: CONTAINERS_PER_FUNCTION,
    streamPollIntervalMs: 100,
    streamRedelivery: () => {
      if (!faultsActive || !runtimeRandom.chance(plan.streamRedeliveryProbability)) return false;
      counters.redeliveries++;
      return true;
    },
    onLog: ({ functionName, stream, text }) => {
      if (stream === 'stderr' || text.includes('"level":"ERROR"')) {
        recentErrors.push(`${functionName.replace(/^.*?-(\w+?)Function.*$/, '$1')}: ${text.slice(0, 400)}`);
        if (recentErrors.length > 12) recentErrors.shift();
      }
    },
  });
  const timers = new Set<NodeJS.Timeout>();
  const background = new Set<Promise<unknown>>();
  const track = (promise: Promise<unknown>) => {
    const settled = promise.catch((error: unknown) =>
      log(`  background failure: ${(error as Error).message}`),
    );
    background.add(settled);
    void settled.finally(() => background.delete(settled));
  };
  let failures: string[];
  let summary = '';
  try {
    const outcome = await withTimeout(
      execute(),
      options.deadlineMs ?? 150_000,
      `run ${seed} did not finish within ${(options.deadlineMs ?? 150_000) / 1000} s`,
    );
    failures = outcome.failures;
    summary = outcome.summary;
  } catch (error) {
    failures = [`run: ${(error as Error).message}`];
  } finally {
    faultsActive = false;
    for (const timer of timers) clearTimeout(timer);
    await withTimeout(cloud.stop(), 30_000, 'stopping the local cloud').catch((error: unknown) =>
      log(`  ${(error as Error).message}`),
    );
  }
  return {
    seed,
    passed: failures.length === 0,
    failures,
    durationMs: Date.now() - startedAtMs,
    plan,
    summary,
    recentErrors,
  };

  async function execute(): Promise<{ failures: string[]; summary: string }> {
    const { ec2, k8s } = cloud;
    const clusterName = cloud.cluster.clusterName;
    const instanceIds: (string | undefined)[] = plan.nodes.map(() => undefined);
    const nodeNames = new Map<string, string>();
    const phase = (name: string) => log(`  ${name} at ${((Date.now() - startedAtMs) / 1000).toFixed(1)} s`);

    // ---- warm containers first, so the fault phase meets running functions, not cold starts
    await withTimeout(warmUp(cloud), SETTLE_TIMEOUT_MS, 'warming the containers');
    phase('containers warm');

    // ---- faults armed before anything launches
    ec2.setEventualConsistencyMs(plan.eventualConsistencyMs);
    if (plan.throttling) ec2.setThrottling({ buckets: plan.throttling });
    const ec2Faults = plan.ec2Faults.map((fault) =>
      ec2.faults.inject({ action: fault.action, kind: fault.kind, times: fault.times }),
    );
    const k8sFaults = plan.k8sFaults
      .filter((fault) => fault.node === undefined)
      .map((fault) =>
        k8s.faults.inject({
          match: { verb: fault.verb, ...(fault.subresource ? { subresource: fault.subresource } : {}) },
          kind: fault.kind,
          times: fault.times,
        }),
      );
    const crashes = plan.crashes.map((crash) => ({ ...crash, remaining: crash.times }));
    /** Consumes one use of the first armed crash for this point and instance. */
    const takeCrash = (point: CrashPoint, instanceId: string) => {
      const crash = crashes.find(
        (candidate) =>
          candidate.point === point &&
          candidate.remaining > 0 &&
          (candidate.node === undefined || instanceIds[candidate.node] === instanceId),
      );
      if (crash) crash.remaining--;
      return crash;
    };
    const recordCrash = (point: CrashPoint, instanceId: string, killed: number) => {
      counters.crashes.set(point, (counters.crashes.get(point) ?? 0) + 1);
      log(`  crash ${point} of ${instanceId}: ${killed} container(s) killed`);
    };
    ec2.setBeforeApply(async (action, params) => {
      const point = CRASH_POINT_BY_ACTION[action];
      if (!faultsActive || point === undefined) return;
      const instanceId = instanceOfCall(cloud, action, params);
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
    });
    const unsubscribe = k8s.store.onWrite((entry) => {
      if (!faultsActive || entry.verb !== 'patch' || entry.subresource !== 'status') return;
      const instanceId = nodeNames.get(entry.name);
      if (instanceId === undefined || takeCrash('between-status-and-spec-write', instanceId) === undefined)
        return;
      // Synchronously inside the status write: the worker dies before it can read the answer.
      track(
        cloud
          .crashInvocations('Sync', (event) => mentions(event, instanceId))
          .then((killed) => {
            if (killed > 0) recordCrash('between-status-and-spec-write', instanceId, killed);
          }),
      );
    });

    // ---- the timeline: launches, agents, EC2 events, terminations, schedule firings
    const multiPoolAgents = new Map<string, LocalMultiPoolAgent>();
    const retiredAgents: LocalMultiPoolAgent[] = [];
    const agentFailures: string[] = [];
    const at = (delayMs: number, action: () => unknown) => {
      const timer = setTimeout(() => {
        timers.delete(timer);
        try {
          const result = action();
          if (result instanceof Promise) track(result);
        } catch (error) {
          log(`  timeline action failed: ${(error as Error).message}`);
        }
      }, delayMs);
      timers.add(timer);
    };
    const launched = new Promise<void>((resolve) => {
      let remaining = plan.nodes.length;
      for (const [index, node] of plan.nodes.entries()) {
        at(node.launchAtMs, () => {
          const instance = cloud.launchInstance(node.instanceType, {
            subnet: node.subnet,
            ...(node.eth0Ours
              ? { primaryNetworkInterfaceTags: ownershipTags(cloud.cluster.clusterName, 'launch-template') }
              : {}),
          });
          instanceIds[index] = instance.instanceId;
          nodeNames.set(instance.privateDnsName, instance.instanceId);
          for (const fault of plan.k8sFaults.filter((candidate) => candidate.node === index)) {
            k8sFaults.push(
              k8s.faults.inject({
                match: {
                  verb: fault.verb,
                  name: instance.privateDnsName,
                  ...(fault.subresource ? { subresource: fault.subresource } : {}),
                },
                kind: fault.kind,
                times: fault.times,
              }),
            );
          }
          const name = instance.privateDnsName;
          at(node.agentDelayMs, () => {
            registerAgent(k8s, name, instance.instanceId, node);
            if (node.agentVersion === '1.20')
              multiPoolAgents.set(name, new LocalMultiPoolAgent(k8s, name, new MultiPoolAgentModel()));
          });
          const { reportUsed } = node;
          if (reportUsed !== undefined) {
            at(Math.max(reportUsed.afterMs, node.agentDelayMs + 1), () => {
              const multiPool = multiPoolAgents.get(name);
              if (multiPool === undefined) return reportUsedIps(k8s, name, reportUsed.usedCount);
              allocatePods(multiPool, reportUsed.usedCount);
            });
          }
          if (node.switchVersionAfterMs !== undefined) {
            at(Math.max(node.switchVersionAfterMs, node.agentDelayMs + 2), () => {
              const multiPool = multiPoolAgents.get(name);
              if (multiPool === undefined) {
                multiPoolAgents.set(name, upgradeAgent(k8s, name));
              } else {
                multiPoolAgents.delete(name);
                retiredAgents.push(multiPool);
                multiPool.stop();
                agentFailures.push(...downgradeAgent(k8s, name, multiPool.model.endpoints()));
              }
            });
          }
          if (node.terminateAtMs !== undefined) {
            at(node.terminateAtMs - node.launchAtMs, () => {
              ec2.state.setInstanceState(instance.instanceId, 'shutting-down');
              at(150, () => ec2.state.setInstanceState(instance.instanceId, 'terminated'));
            });
          }
          remaining--;
          if (remaining === 0) resolve();
        });
      }
    });
    for (const event of plan.events) {
      at(event.atMs, async () => {
        await launched.then(() => undefined); // an instance's events never precede its launch
        const instanceId = instanceIds[event.node];
        if (instanceId === undefined) return;
        counters.events++;
        await cloud.emitEc2Event(instanceId, event.state);
      });
    }
    for (const atMs of plan.scheduleFiringsAtMs) at(atMs, () => cloud.fireSchedules());
    const lastTimelineMs = Math.max(
      ...plan.nodes.map(
        (node) => node.launchAtMs + Math.max(node.reportUsed?.afterMs ?? 0, node.agentDelayMs + 1) + 2_000,
      ),
      plan.faultPhaseMs,
      ...plan.events.map((event) => event.atMs),
      ...plan.nodes.map((node) => node.launchAtMs + node.agentDelayMs),
      ...plan.nodes.map((node) => (node.terminateAtMs ?? 0) + 200),
    );

    // ---- fault phase
    await sleep(plan.faultPhaseMs);
    phase('faults stop');
    faultsActive = false;
    ec2.faults.clear();
    k8s.faults.clear();
    ec2.setThrottling(false);
    ec2.setEventualConsistencyMs(0);
    ec2.setBeforeApply(undefined);
    unsubscribe();
    const faultHits =
      ec2Faults.reduce((sum, fault) => sum + fault.hits, 0) +
      k8sFaults.reduce((sum, fault) => sum + fault.hits, 0);
    await sleep(Math.max(0, lastTimelineMs - plan.faultPhaseMs) + 50);
    await withTimeout(launched, 5_000, 'instances never launched');

    // ---- the sweep: in-flight work settles, then leases and grace periods pass
    await settle(cloud, 'settling after the fault phase');
    phase('settled');
    cloud.advanceClock(CLOCK_ADVANCE_MS);
    for (let round = 0; round < SWEEP_ROUNDS; round++) {
      await withTimeout(cloud.fireSchedules(), SETTLE_TIMEOUT_MS, 'schedule firing');
      await settle(cloud, `settling after schedule round ${round + 1}`);
      // The agents' next pass: 1.19 agents answer the release handshake, 1.20 agents write pools.
      for (const nodeName of nodeNames.keys()) {
        const multiPool = multiPoolAgents.get(nodeName);
        if (multiPool) multiPool.pass();
        else answerReleaseHandshake(k8s, nodeName);
      }
    }
    for (const [prefix, event] of [
      ['Sweep', { task: 'sweep' }],
      ['Sweep', { task: 'eni-garbage-collection' }],
      ['Sync', { all: true }],
    ] as const) {
      const result = await withTimeout(cloud.invoke(prefix, event), SETTLE_TIMEOUT_MS, `final ${prefix}`);
      if (result.status === 'failed')
        log(`  final ${prefix} ${JSON.stringify(event)} failed: ${result.error.errorMessage}`);
      await settle(cloud, `settling after the final ${prefix}`);
    }
    await withTimeout(Promise.all([...background]), 10_000, 'background work');
    phase('sweep done');

    const failures = await checkRun({
      cloud,
      clusterName,
      instances: plan.nodes.map((node, index) => ({
        instanceId: instanceIds[index] as string,
        terminated: node.terminateAtMs !== undefined,
      })),
    });
    for (const [nodeName, agent] of multiPoolAgents) {
      agent.stop();
      const instanceId = nodeNames.get(nodeName) ?? nodeName;
      const terminated = plan.nodes[instanceIds.indexOf(instanceId)]?.terminateAtMs !== undefined;
      for (const problem of agent.model.problems) failures.push(`agent-1.20: ${nodeName}: ${problem}`);
      for (const error of agent.failures) failures.push(`agent-1.20: ${nodeName}: ${error.message}`);
      if (!terminated) failures.push(...inUseOnEc2(cloud, instanceId, agent.model.inUseIps()));
    }
    for (const agent of retiredAgents) {
      for (const problem of agent.model.problems)
        failures.push(`agent-1.20 (before its downgrade): ${problem}`);
    }
    failures.push(...agentFailures);
    await options.inspect?.(cloud, failures);
    const stats = cloud.functionStats();
    const invocations = Object.values(stats).reduce((sum, entry) => sum + entry.invocations, 0);
    const failedInvocations = Object.values(stats).reduce((sum, entry) => sum + entry.failures, 0);
    const crashText =
      [...counters.crashes]
        .map(([point, count]) => `${point.replace(/-network-interface(-attribute)?/, '')} x${count}`)
        .join(', ') || 'none';
    const summary = `${plan.nodes.length} nodes, ${faultHits} faults hit, crashes: ${crashText}, ${counters.events} events, ${counters.redeliveries} stream redeliveries, ${invocations} invocations (${failedInvocations} failed)`;
    return { failures, summary };
  }
}

const CRASH_POINT_BY_ACTION: Readonly<Record<string, CrashPoint>> = {
  CreateNetworkInterface: 'after-create-network-interface',
  AttachNetworkInterface: 'after-attach-network-interface',
  ModifyNetworkInterfaceAttribute: 'after-modify-network-interface-attribute',
};

/** The instance an EC2 call works for: its InstanceId, the instance tag of a create, or the ENI's attachment. */
function instanceOfCall(
  cloud: LocalCloud,
  action: string,
  params: Readonly<Record<string, string>>,
): string | undefined {
  if (action === 'AttachNetworkInterface') return params.InstanceId;
  if (action === 'CreateNetworkInterface') {
    for (const [key, value] of Object.entries(params)) {
      const match = /^(TagSpecification\.\d+\.Tag\.\d+)\.Key$/.exec(key);
      if (match && value === ENI_TAG_KEYS.instanceId) return params[`${match[1]}.Value`];
    }
    return undefined;
  }
  const eniId = params.NetworkInterfaceId;
  if (eniId === undefined) return undefined;
  const eni = cloud.ec2.state.networkInterface(eniId);
  return eni?.attachment?.instanceId ?? eni?.tags[ENI_TAG_KEYS.instanceId];
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
function registerAgent(k8s: K8sEmulator, nodeName: string, instanceId: string, node: NodePlan): void {
  registerCiliumNode(k8s, nodeName, instanceId, {
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
function allocatePods(agent: LocalMultiPoolAgent, count: number): void {
  for (let pod = 0; pod < count; pod++) agent.model.allocate(`default/pod-${pod}`, 'ipv4', Date.now());
  agent.pass();
}

/**
 * An in-place upgrade to 1.20: the new agent restores the endpoints the 1.19 agent reported in
 * `status.ipam.used` from the CIDRs it derives from status, then takes over (it clears `used`).
 */
function upgradeAgent(k8s: K8sEmulator, nodeName: string): LocalMultiPoolAgent {
  const current = k8s.store.get(nodeName) as unknown as CiliumNode | undefined;
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
function downgradeAgent(
  k8s: K8sEmulator,
  nodeName: string,
  endpoints: ReadonlyMap<string, string>,
): string[] {
  let missing: string[] = [];
  const outcome = writeUsedIps(k8s, nodeName, (current) => {
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

export function withTimeout<T>(promise: Promise<T>, milliseconds: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new RunTimeoutError(`timed out: ${what}`)), milliseconds);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function sleep(milliseconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, milliseconds));
}
