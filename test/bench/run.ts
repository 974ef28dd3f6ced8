import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DynamoNodeRecordStore } from '../../functions/aws/node-table.ts';
import { ENI_TAG_KEYS } from '../../functions/core/eni-ownership.ts';
import type { NodeRecord } from '../../functions/core/model.ts';
import { isNonMutatingAction } from '../emulators/ec2/throttling.ts';
import type { AgentVersion } from '../local-cloud/cilium-agent.ts';
import { type LocalCloud, startLocalCloud } from '../local-cloud/local-cloud.ts';
import { summarize } from '../local-cloud/summary.ts';
import { synthesizeStack } from '../local-cloud/synthesize.ts';
import { type DynamoDbLocal, startDynamoDbLocal } from '../support/dynamodb-local.ts';
import { buildBaselineBundles } from './baseline-bundles.ts';
import { type BundleFigures, measureBundles } from './bundles.ts';
import { type LatencyFigures, measureDemandLatency } from './demand.ts';
import {
  floorReadyNodes,
  type Interval,
  longestSequentialChain,
  necessaryMutatingCalls,
  parseMix,
  scaledClock,
  seededRandom,
  type TokenBucketFloor,
  tokenBucketFloor,
} from './floors.ts';
import { DYNAMODB_ITEM_LIMIT_BYTES, m5x24ItemSizes } from './item-size.ts';
import { type Figure, figure } from './report.ts';
import { renderReadyChart } from './svg.ts';
import { type InvocationCost, measureSweepCost, type SweepCost } from './sweep-cost.ts';
import { nowMs, startTap, type Tap, type TapRecord } from './tap.ts';

/**
 * `npm run bench`: N nodes launched at once on the local cloud (the synthesized stack's bundled
 * functions) with the EC2 emulator enforcing AWS's per-action token buckets on a scaled clock.
 * Every figure is measured from what the stand-ins observed (the EC2 call log, the Kubernetes
 * request log and history, DynamoDB's answers through a recording pass-through, the functions'
 * logs) and reported beside its floor as a ratio. Nothing is asserted about wall-clock time.
 */

export interface BenchOptions {
  readonly nodes: number;
  /** `type:weight,...`, e.g. `m5.large:2,t3.medium:1`. */
  readonly mix: string;
  readonly firstInterfaceIndex: 0 | 1;
  readonly prefixDelegation: boolean;
  /** Fraction of EC2 events delivered twice (0..1). */
  readonly duplicateEvents: number;
  /** Simulated seconds per real second (EC2 token refill, schedules, Lambda retry waits). */
  readonly scale: number;
  /** Containers per function (Lambda's concurrency, locally); default 8. */
  readonly concurrency?: number;
  /** Fresh-process imports per function for the init time (median); default 5. */
  readonly importRuns?: number;
  /** The simulated cilium-agents: 1.19 (CRD protocol, default), 1.20 (multi-pool), or mixed (every other node). */
  readonly agents?: '1.19' | '1.20' | 'mixed';
  /** Nodes whose pods start at once for the demand-to-pool latency (m5.large of the burst); default 50. */
  readonly demandNodes?: number;
  /** Cluster sizes at which one steady-state sweep's cost is measured; default 100, 1000, 5000. */
  readonly sweepCostNodes?: readonly number[];
  /** Time today's naive bundles beside the functions' (built from git history); default true. */
  readonly naiveBaseline?: boolean;
  /** Real seconds to wait for every node before reporting what was reached. */
  readonly timeoutSeconds?: number;
  /** A running DynamoDB Local (e.g. the test run's); default start one. */
  readonly dynamoDbEndpoint?: string;
  /** Seed for the duplicate-event draw. */
  readonly seed?: number;
  /** Where the functions' log lines go (default: dropped). */
  readonly functionLog?: (line: string) => void;
  readonly onProgress?: (line: string) => void;
}

export interface SingleNodeRoundTrips {
  readonly instanceId: string;
  readonly instanceType: string;
  readonly roundTrips: number;
  readonly floor: number;
  readonly elapsedMs: number;
  readonly chain: readonly string[];
}

export interface BenchReport {
  readonly options: Omit<BenchOptions, 'functionLog' | 'onProgress' | 'dynamoDbEndpoint'>;
  readonly startedAt: string;
  readonly wallSeconds: number;
  readonly figures: readonly Figure[];
  readonly floor: TokenBucketFloor;
  readonly readyNodes: number;
  /** Simulated seconds after the launch at which each node was first seen ready. */
  readonly readySeconds: readonly number[];
  readonly burst: {
    readonly realSeconds: number;
    readonly timedOut: boolean;
    readonly invariantViolations: number;
    readonly newEnis: number;
    readonly floorAssigns: number;
    readonly leakedEnis: number;
    readonly ec2CallsByAction: Readonly<Record<string, number>>;
    readonly ec2ThrottledByAction: Readonly<Record<string, number>>;
    readonly dynamoDb: {
      readonly putAttempts: number;
      readonly putSucceeded: number;
      readonly conditionFailures: number;
      readonly getItems: number;
    };
    readonly kubernetes: {
      readonly writeRequests: number;
      readonly conflicts: number;
      readonly changingSyncs: number;
    };
    readonly allocations: Readonly<Record<string, number>>;
    readonly eventsDelivered: number;
    readonly eventsDuplicated: number;
    readonly functionErrors: number;
    readonly functionStats: Readonly<Record<string, unknown>>;
  };
  readonly noOpSync: { readonly inSync: number; readonly writeRequests: number; readonly outcomes: unknown };
  readonly singleNode: SingleNodeRoundTrips | undefined;
  /** The same, launched after the containers were warmed. */
  readonly warmSingleNode: SingleNodeRoundTrips | undefined;
  readonly itemSizes: {
    readonly ipsBytes: number;
    readonly prefixesBytes: number;
    readonly prefixesExpandedBytes: number;
  };
  readonly bundles: readonly BundleFigures[];
  readonly demandToPool?: { readonly watcher: LatencyFigures; readonly sweepAlone: LatencyFigures };
  readonly sweepCosts: readonly SweepCost[];
}

export interface BenchResult {
  readonly report: BenchReport;
  readonly chartSvg: string;
}

/** Toolchain §6 (measured alone, esbuild ESM, minified): the third-party code each function must bundle. */
const SDK_BUNDLE_REFERENCE = {
  ec2AndDynamoDb: { bytes: 908_259, importMs: 165 },
  kubernetesClient: { bytes: 1_043_156, importMs: 145 },
} as const;

const WRITE_VERBS = new Set(['create', 'update', 'patch']);

interface SyncLogEntry {
  readonly atMs: number;
  readonly instanceId: string;
  readonly nodeName?: string;
  readonly outcome: string;
  readonly writes: number;
  readonly conflicts: number;
}

export async function runBench(options: BenchOptions): Promise<BenchResult> {
  validate(options);
  const progress = options.onProgress ?? (() => {});
  const startedAtMs = Date.now();
  const cleanups: (() => Promise<void> | void)[] = [];
  try {
    progress('synthesizing the stack (bundling every function)...');
    const stack = await synthesizeStack({
      context: {
        'eni-ipam:firstInterfaceIndex': options.firstInterfaceIndex,
        'eni-ipam:prefixDelegation': options.prefixDelegation,
      },
    });
    cleanups.push(() => rmSync(stack.assemblyDirectory, { recursive: true, force: true }));
    progress('timing module initialisation of every function (fresh processes)...');
    const baseline = options.naiveBaseline === false ? undefined : await buildBaselineBundles(process.cwd());
    if (baseline) cleanups.push(() => baseline.cleanup());
    const bundles = await measureBundles(stack, options.importRuns ?? 5, baseline?.bundles);
    const itemSizes = m5x24ItemSizes();

    let dynamoDbEndpoint = options.dynamoDbEndpoint;
    if (dynamoDbEndpoint === undefined) {
      const dynamoDb: DynamoDbLocal = await startDynamoDbLocal();
      cleanups.push(() => dynamoDb.stop());
      dynamoDbEndpoint = dynamoDb.endpoint;
    }
    const ec2Tap = await startTap({ service: 'ec2' });
    const dynamoDbTap = await startTap({ service: 'dynamodb', upstream: dynamoDbEndpoint });
    const k8sTap = await startTap({
      service: 'kubernetes',
      keepBody: (request) => request.method !== 'GET',
    });
    const taps = [ec2Tap, dynamoDbTap, k8sTap];
    cleanups.push(() => Promise.all(taps.map((tap) => tap.close())).then(() => {}));
    const workDirectory = mkdtempSync(join(tmpdir(), 'bench-'));
    cleanups.push(() => rmSync(workDirectory, { recursive: true, force: true }));

    const clock = scaledClock(options.scale);
    const syncLog: SyncLogEntry[] = [];
    const allocations: Record<string, number> = {};
    let functionErrors = 0;
    progress('starting the local cloud...');
    const cloud = await startLocalCloud({
      stack,
      dynamoDbEndpoint,
      timeScale: options.scale,
      runSchedules: false,
      ec2Events: false,
      maxConcurrencyPerFunction: options.concurrency ?? 8,
      agentVersions: options.agents ?? '1.19',
      environment: {
        // One Watch invocation per demand measurement, ending on its own.
        WATCH_SECONDS: '40',
        DRAIN_SECONDS: '5',
        AWS_ENDPOINT_URL_EC2: ec2Tap.url,
        AWS_ENDPOINT_URL_DYNAMODB: dynamoDbTap.url,
      },
      kubernetesUrl: k8sTap.url,
      ec2: { throttling: true, clock },
      onLog: ({ functionName, stream, text }) => {
        options.functionLog?.(`${functionName} ${stream}: ${text}`);
        if (stream === 'stderr' || text.includes('"level":"ERROR"')) functionErrors++;
        if (text.includes('"sync finished"')) {
          const entry = parseJson(text);
          if (entry && typeof entry.instanceId === 'string' && typeof entry.outcome === 'string') {
            syncLog.push({
              atMs: nowMs(),
              instanceId: entry.instanceId,
              ...(typeof entry.nodeName === 'string' ? { nodeName: entry.nodeName } : {}),
              outcome: entry.outcome,
              writes: Number(entry.writes ?? 0),
              conflicts: Number(entry.conflicts ?? 0),
            });
          }
        } else if (text.includes('"allocation finished"')) {
          const kind = (parseJson(text)?.outcome as { kind?: string } | undefined)?.kind ?? 'unknown';
          allocations[kind] = (allocations[kind] ?? 0) + 1;
        }
      },
    });
    cleanups.push(() => cloud.stop());
    ec2Tap.setUpstream(cloud.ec2.url);
    k8sTap.setUpstream(cloud.k8s.url);

    const { state } = cloud.ec2;
    const { cluster } = cloud;
    const benchSubnets = [
      state.addSubnet({
        vpcId: cluster.vpc.vpcId,
        availabilityZone: cluster.availabilityZones[0],
        cidrBlock: '10.0.64.0/18',
        tags: { Name: 'bench-nodes-a' },
      }),
      state.addSubnet({
        vpcId: cluster.vpc.vpcId,
        availabilityZone: cluster.availabilityZones[1],
        cidrBlock: '10.0.128.0/18',
        tags: { Name: 'bench-nodes-b' },
      }),
    ];
    let launchedCount = 0;
    const launch = (instanceType: string) =>
      state.launchInstance({
        instanceType,
        subnetId: (benchSubnets[launchedCount++ % 2] as (typeof benchSubnets)[number]).subnetId,
        securityGroupIds: [cluster.securityGroups.nodes.groupId],
        tags: {
          [`kubernetes.io/cluster/${cluster.clusterName}`]: 'owned',
          Name: `${cluster.clusterName}-node`,
        },
      });

    // EC2 events, delivered by the bench so a fraction can be delivered twice.
    const random = seededRandom(options.seed ?? 1);
    let duplicateRate = 0;
    let eventsDelivered = 0;
    let eventsDuplicated = 0;
    const runningEventAt = new Map<string, number>();
    const duplicateTimers = new Set<NodeJS.Timeout>();
    cleanups.push(() => {
      for (const timer of duplicateTimers) clearTimeout(timer);
    });
    const deliver = (instanceId: string, eventState: string) => {
      if (eventState === 'running') eventsDelivered++;
      void cloud.emitEc2Event(instanceId, eventState).catch(() => {});
    };
    const unsubscribe = state.onInstanceStateChange(({ instanceId, state: eventState }) => {
      if (eventState === 'running' && !runningEventAt.has(instanceId))
        runningEventAt.set(instanceId, nowMs());
      deliver(instanceId, eventState);
      if (duplicateRate > 0 && random() < duplicateRate) {
        if (eventState === 'running') eventsDuplicated++;
        const timer = setTimeout(
          () => {
            duplicateTimers.delete(timer);
            deliver(instanceId, eventState);
          },
          Math.floor(random() * 200),
        );
        duplicateTimers.add(timer);
      }
    });
    cleanups.push(unsubscribe);

    // The cloud's own client talks to DynamoDB Local directly (not through the pass-through).
    const directStore = cloud.table.store;

    // ---- one node alone: sequential round trips from the event to a usable pool
    progress('one node alone: round trips from the EC2 event to a usable pool...');
    const singleNode = await measureSingleNode(cloud, launch, parseMix(options.mix)[0] as string, {
      taps,
      runningEventAt,
    });
    await cloud.settle();

    // ---- warm containers: a burst on AWS cold-starts its Lambdas in parallel on separate hosts;
    // here they would share two cores, so every container is started (and imported) beforehand.
    progress(`warming ${options.concurrency ?? 8} containers per function...`);
    await warmContainers(cloud, options.concurrency ?? 8);
    await cloud.settle();

    // ---- one node alone again, on warm containers: what a node launched into an active cluster waits for
    progress('one node alone, warm containers: round trips from the EC2 event to a usable pool...');
    const warmSingleNode = await measureSingleNode(cloud, launch, parseMix(options.mix)[0] as string, {
      taps,
      runningEventAt,
    });
    await cloud.settle();

    // ---- the burst
    const mix = parseMix(options.mix);
    cloud.ec2.throttling.reset();
    const marks = {
      ec2Calls: cloud.ec2.calls.log.length,
      k8sRequests: cloud.k8s.requests.all().length,
      taps: taps.map((tap) => tap.records.length),
      syncLog: syncLog.length,
      functionErrors,
    };
    for (const key of Object.keys(allocations)) delete allocations[key];
    duplicateRate = options.duplicateEvents;
    progress(`launching ${options.nodes} nodes at once (scale ${options.scale}x)...`);
    const burstStartReal = nowMs();
    const burstStartSim = clock();
    const instanceIds: string[] = [];
    const nodeNames = new Map<string, string>();
    for (let index = 0; index < options.nodes; index++) {
      const instance = launch(mix[index % mix.length] as string);
      instanceIds.push(instance.instanceId);
      nodeNames.set(instance.instanceId, instance.privateDnsName);
    }
    // EventBridge schedules (sweep, ENI GC, resync) on the simulated clock: every simulated minute.
    const scheduleTimer = setInterval(
      () => void cloud.fireSchedules().catch(() => {}),
      60_000 / options.scale,
    );
    cleanups.push(() => clearInterval(scheduleTimer));

    const readyAt = new Map<string, number>();
    const timeoutMs = (options.timeoutSeconds ?? Math.min(1_200, 120 + options.nodes * 0.6)) * 1000;
    const deadline = Date.now() + timeoutMs;
    let lastProgress = Date.now();
    let timedOut = false;
    for (let poll = 0; readyAt.size < instanceIds.length; poll++) {
      if (Date.now() > deadline || poll > 1_000_000) {
        timedOut = true;
        break;
      }
      await pollReadiness(
        cloud,
        directStore,
        instanceIds,
        nodeNames,
        readyAt,
        () => (clock() - burstStartSim) / 1000,
      );
      if (Date.now() - lastProgress > 5_000) {
        lastProgress = Date.now();
        progress(
          `  ${readyAt.size}/${instanceIds.length} ready at ${((clock() - burstStartSim) / 1000).toFixed(1)} simulated s; EC2 calls ${cloud.ec2.calls.log.length - marks.ec2Calls}, throttled ${cloud.ec2.calls.log.slice(marks.ec2Calls).filter((call) => call.outcome === 'throttled').length}`,
        );
      }
      await sleep(400);
    }
    const burstRealSeconds = (nowMs() - burstStartReal) / 1000;
    clearInterval(scheduleTimer);
    progress(`${readyAt.size}/${instanceIds.length} ready; settling...`);
    await cloud.settle();
    const burstEndMarks = {
      ec2Calls: cloud.ec2.calls.log.length,
      k8sRequests: cloud.k8s.requests.all().length,
      syncLog: syncLog.length,
      taps: taps.map((tap) => tap.records.length),
    };
    // What the burst itself made (the demand phases below add ENIs of their own).
    const burstEnis = enisMadeFor(state, instanceIds);
    const finalRecords = await allRecords(directStore);
    const finalSummary = summarize(state, cloud.k8s, finalRecords, instanceIds);

    // ---- a no-op sync of every node
    progress('a resync of every node (expected to change nothing)...');
    const noOpStart = cloud.k8s.requests.all().length;
    const noOpSyncLogStart = syncLog.length;
    const noOpResult = await cloud.invoke('Sync', { all: true });
    const noOpRequests = cloud.k8s.requests.all().slice(noOpStart);
    const noOpEntries = syncLog.slice(noOpSyncLogStart).filter((entry) => entry.outcome === 'in-sync');
    const inSyncNames = new Set(noOpEntries.map((entry) => entry.nodeName));
    const noOpWrites = noOpRequests.filter(
      (request) =>
        WRITE_VERBS.has(request.verb) && request.name !== undefined && inSyncNames.has(request.name),
    ).length;

    // ---- demand-to-pool latency: pods start on m5.large nodes of the burst, served by the sweep
    // alone, then by the watcher
    const demandNames = instanceIds
      .filter((instanceId) => state.instance(instanceId)?.instanceType === 'm5.large')
      .slice(0, options.demandNodes ?? 50)
      .map((instanceId) => nodeNames.get(instanceId) as string);
    const demandOptions = {
      newPods: 5,
      preAllocate: 8,
      scale: options.scale,
      random,
      timeoutMs: Math.max(150_000 / options.scale, 60_000),
    };
    let demandToPool: BenchReport['demandToPool'];
    if (demandNames.length > 0) {
      cloud.ec2.throttling.reset();
      progress(`demand-to-pool latency: pods start on ${demandNames.length} nodes, the sweep alone...`);
      const sweepAlone = await measureDemandLatency(cloud, demandNames, { ...demandOptions, mode: 'sweep' });
      cloud.ec2.throttling.reset();
      progress(`demand-to-pool latency: pods start on ${demandNames.length} nodes, the watcher...`);
      const watcher = await measureDemandLatency(cloud, demandNames, { ...demandOptions, mode: 'watcher' });
      demandToPool = { watcher, sweepAlone };
    }

    const sweepCosts: SweepCost[] = [];
    for (const nodes of options.sweepCostNodes ?? [100, 1_000, 5_000]) {
      progress(`one steady-state sweep at ${nodes} nodes...`);
      sweepCosts.push(await measureSweepCost(stack, dynamoDbEndpoint, nodes, progress));
    }

    // ---- EC2 figures
    // The burst's own calls: the demand phases and the steady state after it make calls of their own.
    const burstCalls = cloud.ec2.calls.log.slice(marks.ec2Calls, burstEndMarks.ec2Calls);
    const accepted = burstCalls.filter((call) => call.outcome !== 'throttled');
    const throttled = burstCalls.filter((call) => call.outcome === 'throttled');
    const mutatingAccepted = accepted.filter((call) => !isNonMutatingAction(call.action));
    const eniCalls = mutatingAccepted.filter((call) => !/PrivateIpAddresses$/.test(call.action)).length;
    const nonMutatingAccepted = accepted.filter((call) => isNonMutatingAction(call.action)).length;
    // Denials over the whole run (setup, burst, steady state): every one is a call the roles forbid.
    // (The watcher's invokes of the allocate function are authorized by its role too.)
    const denials = cloud.denials();
    const total = (counts: Readonly<Record<string, number>>) =>
      Object.values(counts).reduce((sum, count) => sum + count, 0);
    const { newEnis, floorAssigns } = burstEnis;
    const burstInstanceIds = new Set(instanceIds);
    const leakedEnis = state
      .networkInterfaceHistory()
      .filter(
        (eni) =>
          burstInstanceIds.has(eni.tags[ENI_TAG_KEYS.instanceId] ?? '') && eni.attachment === undefined,
      ).length;
    const floor = tokenBucketFloor(necessaryMutatingCalls(newEnis, floorAssigns));
    const n = options.nodes;
    const readySeconds = [...readyAt.values()];
    const lastReady = readySeconds.length === n ? Math.max(...readySeconds) : undefined;

    // ---- DynamoDB figures (the functions' traffic, through the pass-through)
    const ddbRecords = dynamoDbTap.records.slice(marks.taps[1], burstEndMarks.taps[1]);
    const puts = ddbRecords.filter((record) => record.operation === 'PutItem');
    const putSucceeded = puts.filter((record) => record.statusCode === 200).length;
    const conditionFailures = puts.filter(
      (record) => record.errorType === 'ConditionalCheckFailedException',
    ).length;

    // ---- Kubernetes figures
    const burstK8s = cloud.k8s.requests.all().slice(marks.k8sRequests, burstEndMarks.k8sRequests);
    const k8sWrites = burstK8s.filter((request) => WRITE_VERBS.has(request.verb));
    const burstSyncs = syncLog.slice(marks.syncLog, burstEndMarks.syncLog);
    const changingSyncs = burstSyncs.filter((entry) => entry.outcome === 'written').length;

    const figures: Figure[] = [
      figure({
        id: 'mutating_calls_per_new_eni',
        label: 'mutating EC2 calls per new ENI',
        value: newEnis === 0 ? undefined : eniCalls / newEnis,
        reference: 3,
        unit: 'calls/ENI',
        note: `accepted (not throttled) mutating calls other than Assign/UnassignPrivateIpAddresses (${eniCalls}) over ENIs attached at device index >= 1 to the launched instances at the end (${newEnis}); floor 3 = create (IPs and tags in the call), attach, set delete-on-termination. n/a when no node needed a new ENI.`,
      }),
      figure({
        id: 'mutating_calls_per_node',
        label: 'mutating EC2 calls per node',
        value: mutatingAccepted.length / n,
        reference: (3 * newEnis + floorAssigns) / n,
        unit: 'calls/node',
        note: `accepted mutating calls (${mutatingAccepted.length}) over ${n} nodes; floor (3 x ${newEnis} new ENIs + ${floorAssigns} assigns) / ${n}, where an assign is needed once per pre-existing ENI (eth0) that ended up holding secondary IPs or prefixes.`,
      }),
      figure({
        id: 'non_mutating_calls_per_node',
        label: 'non-mutating EC2 calls per node',
        value: nonMutatingAccepted / n,
        reference: 2,
        unit: 'calls/node',
        note: `accepted Describe* calls (${nonMutatingAccepted}) over ${n} nodes. Floor 2: one filtered DescribeInstances (state, type, subnet and the cluster tag, which events do not carry) and one filtered DescribeNetworkInterfaces (the attached ENIs: EC2, not the record, is the truth). VPC, subnets, route tables and instance types are cluster-wide or static and could be cached across nodes; the orphan check before a create is covered by the ClientToken.`,
      }),
      figure({
        id: 'throttled_retries',
        label: 'throttled EC2 calls (retried)',
        value: throttled.length,
        reference: 0,
        unit: 'calls',
        note: `calls answered RequestLimitExceeded by the emulator's per-action buckets during the burst: ${formatCounts(countBy(throttled.map((call) => call.action)))}.`,
      }),
      figure({
        id: 'denied_ec2_calls',
        label: 'EC2 calls denied by IAM',
        value: total(denials.ec2),
        reference: 0,
        unit: 'calls',
        note: `calls of the whole run the EC2 emulator answered UnauthorizedOperation after evaluating the caller's synthesized role policies: ${formatCounts(denials.ec2)}. Floor 0: the allocator never attempts a call its role may not make.`,
      }),
      figure({
        id: 'denied_k8s_requests',
        label: 'Kubernetes requests denied (401/403)',
        value: total(denials.kubernetes),
        reference: 0,
        unit: 'requests',
        note: `requests of the whole run the Kubernetes emulator refused for authentication (401) or RBAC (403, each function's own group): ${formatCounts(denials.kubernetes)}. Floor 0.`,
      }),
      figure({
        id: 'denied_lambda_invokes',
        label: 'Lambda invokes denied by IAM',
        value: total(denials.lambda),
        reference: 0,
        unit: 'invokes',
        note: `function-to-function invokes of the whole run (the watcher's of the allocate function) the local Lambda API refused after evaluating the caller's synthesized role policies: ${formatCounts(denials.lambda)}. Floor 0.`,
      }),
      figure({
        id: 'time_to_last_ready',
        label: 'time until the last node is ready',
        value: lastReady,
        reference: floor.seconds,
        unit: 'simulated s',
        note: `simulated seconds (EC2 clock, ${options.scale}x real time) from the launch to the moment the last node was first seen ready (record active with addresses, CiliumNode pool non-empty and published from the latest record version, no invariant violation; polled every 0.4 real s). Floor: max over actions of max(0, (calls - burst) / refill) for the necessary calls: ${floor.actions.map((action) => `${action.action} ${action.calls} calls (${action.burst}/${action.refillPerSecond}) ${action.seconds.toFixed(1)} s`).join('; ')}. ${timedOut ? `TIMED OUT after ${Math.round(timeoutMs / 1000)} real s with ${readyAt.size}/${n} ready.` : ''}`,
      }),
      singleNodeFigure(
        'single_node_round_trips',
        'sequential round trips, one node alone (cold containers)',
        singleNode,
      ),
      singleNodeFigure(
        'single_node_round_trips_warm',
        'sequential round trips, one node alone (warm containers)',
        warmSingleNode,
      ),
      figure({
        id: 'ddb_condition_failures_per_write',
        label: 'DynamoDB conditional-check failures per successful write',
        value: putSucceeded === 0 ? undefined : conditionFailures / putSucceeded,
        reference: 0,
        unit: 'failures/write',
        note: `PutItem answers seen by a pass-through in front of DynamoDB Local during the burst: ${conditionFailures} ConditionalCheckFailedException over ${putSucceeded} successful writes (${puts.length} attempts, ${(putSucceeded / n).toFixed(2)} successful writes per node). Every write is conditional on the version read, so a failure is a lost race (a duplicate event, the sweep, a lease).`,
      }),
      figure({
        id: 'k8s_writes_per_changing_sync',
        label: 'Kubernetes writes per changing sync',
        value: changingSyncs === 0 ? undefined : k8sWrites.length / changingSyncs,
        reference: 2,
        unit: 'writes/sync',
        note: `write requests (create, update, patch; 409s included) in the Kubernetes emulator's request log during the burst (${k8sWrites.length}, ${k8sWrites.filter((request) => request.statusCode === 409).length} conflicts) over syncs that reported outcome written in the sync function's log (${changingSyncs}). Floor 2: status first, then spec.`,
      }),
      figure({
        id: 'k8s_writes_per_noop_sync',
        label: 'Kubernetes writes per no-op sync',
        value: noOpEntries.length === 0 ? undefined : noOpWrites / noOpEntries.length,
        reference: 0,
        unit: 'writes/sync',
        note: `a manual {"all":true} resync after the burst settled: write requests to the CiliumNodes of the ${noOpEntries.length} syncs that reported in-sync (${noOpWrites}).`,
      }),
      figure({
        id: 'item_size_m5_24xlarge_ips',
        label: 'node item size, m5.24xlarge full, secondary IPs',
        value: itemSizes.ipsBytes,
        reference: DYNAMODB_ITEM_LIMIT_BYTES,
        referenceKind: 'limit',
        unit: 'bytes',
        note: 'dynamoItemSizeBytes (DynamoDB sizing rules) of a realistic record: 15 ENIs x 49 secondary IPs, our tags on every created ENI, knobs, VPC, a lease and a recorded error; limit 400 KB.',
      }),
      figure({
        id: 'item_size_m5_24xlarge_prefixes',
        label: 'node item size, m5.24xlarge full, /28 prefixes',
        value: itemSizes.prefixesBytes,
        reference: DYNAMODB_ITEM_LIMIT_BYTES,
        referenceKind: 'limit',
        unit: 'bytes',
        note: `the same record with 15 x 49 /28 prefixes stored as prefixes (11,760 addresses); expanded to single IPs it would be ${itemSizes.prefixesExpandedBytes} bytes.`,
      }),
      ...(demandToPool ? demandFigures(demandToPool, warmSingleNode ?? singleNode, options.scale) : []),
      ...sweepCosts.flatMap(sweepCostFigures),
      ...bundles.flatMap((bundle) => bundleFigures(bundle)),
    ];

    const report: BenchReport = {
      options: {
        nodes: options.nodes,
        mix: options.mix,
        firstInterfaceIndex: options.firstInterfaceIndex,
        prefixDelegation: options.prefixDelegation,
        duplicateEvents: options.duplicateEvents,
        scale: options.scale,
        concurrency: options.concurrency ?? 8,
        importRuns: options.importRuns ?? 5,
        demandNodes: options.demandNodes ?? 50,
        sweepCostNodes: options.sweepCostNodes ?? [100, 1_000, 5_000],
        seed: options.seed ?? 1,
      },
      startedAt: new Date(startedAtMs).toISOString(),
      wallSeconds: (Date.now() - startedAtMs) / 1000,
      figures,
      floor,
      readyNodes: readyAt.size,
      readySeconds: instanceIds.flatMap((id) => (readyAt.has(id) ? [readyAt.get(id) as number] : [])),
      burst: {
        realSeconds: burstRealSeconds,
        timedOut,
        invariantViolations: finalSummary.violations,
        newEnis,
        floorAssigns,
        leakedEnis,
        ec2CallsByAction: countBy(burstCalls.map((call) => call.action)),
        ec2ThrottledByAction: countBy(throttled.map((call) => call.action)),
        dynamoDb: {
          putAttempts: puts.length,
          putSucceeded,
          conditionFailures,
          getItems: ddbRecords.filter((record) => record.operation === 'GetItem').length,
        },
        kubernetes: {
          writeRequests: k8sWrites.length,
          conflicts: k8sWrites.filter((request) => request.statusCode === 409).length,
          changingSyncs,
        },
        allocations: { ...allocations },
        eventsDelivered,
        eventsDuplicated,
        functionErrors: functionErrors - marks.functionErrors,
        functionStats: cloud.functionStats(),
      },
      noOpSync: {
        inSync: noOpEntries.length,
        writeRequests: noOpWrites,
        outcomes:
          noOpResult.status === 'succeeded'
            ? (noOpResult.payload as { outcomes?: unknown }).outcomes
            : noOpResult.error,
      },
      singleNode,
      warmSingleNode,
      itemSizes: {
        ipsBytes: itemSizes.ipsBytes,
        prefixesBytes: itemSizes.prefixesBytes,
        prefixesExpandedBytes: itemSizes.prefixesExpandedBytes,
      },
      bundles,
      ...(demandToPool ? { demandToPool } : {}),
      sweepCosts,
    };
    const chartSvg = renderReadyChart({
      title: `${n} nodes launched at once (${options.mix}${options.prefixDelegation ? ', prefixes' : ''}, first-interface-index ${options.firstInterfaceIndex})`,
      readySeconds: report.readySeconds,
      nodes: n,
      floorAt: (seconds) => floorReadyNodes(floor, n, seconds),
      floorSeconds: floor.seconds,
    });
    return { report, chartSvg };
  } finally {
    for (const cleanup of cleanups.splice(0).reverse()) {
      try {
        await cleanup();
      } catch (error) {
        progress(`cleanup failed: ${(error as Error).message}`);
      }
    }
  }
}

function singleNodeFigure(id: string, label: string, singleNode: SingleNodeRoundTrips | undefined): Figure {
  return figure({
    id,
    label,
    value: singleNode?.roundTrips,
    reference: singleNode?.floor,
    unit: 'round trips',
    note: singleNode
      ? `${singleNode.instanceType} launched alone: the longest chain of the functions' EC2, DynamoDB and Kubernetes requests (recorded with start and end by pass-throughs) in which each starts after the previous one ended, from the EC2 running event to the end of the first CiliumNode write whose pool is non-empty (${singleNode.elapsedMs.toFixed(0)} real ms). Chain: ${singleNode.chain.join(' > ')}. Requests that run at once in the code but start after another ended (a cold container's first calls of each kind, the emulator answering in milliseconds) count as steps. Floor: DescribeInstances, the parallel reads, claim (conditional put), 3 per new ENI (create, attach, modify) and 1 per assign, record write, CiliumNode status patch, spec patch.`
      : 'the single node did not become ready in 60 s',
  });
}

function bundleFigures(bundle: BundleFigures): Figure[] {
  const name = bundle.logicalId.replace(/Function[0-9A-F]{8}$/, '');
  const usesEc2 = !name.startsWith('Sync');
  const reference = usesEc2
    ? {
        bytes: SDK_BUNDLE_REFERENCE.ec2AndDynamoDb.bytes + SDK_BUNDLE_REFERENCE.kubernetesClient.bytes,
        importMs:
          SDK_BUNDLE_REFERENCE.ec2AndDynamoDb.importMs + SDK_BUNDLE_REFERENCE.kubernetesClient.importMs,
        what: 'client-ec2 + lib-dynamodb (908,259 B, 165 ms) plus @kubernetes/client-node 1.4.0 (1,043,156 B, 145 ms)',
      }
    : {
        bytes: SDK_BUNDLE_REFERENCE.kubernetesClient.bytes,
        importMs: SDK_BUNDLE_REFERENCE.kubernetesClient.importMs,
        what: '@kubernetes/client-node 1.4.0 alone (1,043,156 B, 145 ms; the DynamoDB client it also needs has no row of its own)',
      };
  const naive = bundle.baseline;
  const baselineRows = naive
    ? [
        figure({
          id: `init_ms_vs_naive_${name}`,
          label: `module initialisation, ${name}, vs today's naive bundle`,
          value: bundle.medianImportMs,
          reference: naive.medianImportMs,
          referenceKind: 'limit',
          unit: 'ms',
          note: `the same fresh-process import, alternated run by run with the naive ${naive.handlerFolder} bundle (the handler at the baseline commit, client-node imported eagerly; ${naive.bytes} bytes; ${naive.importMs.map((ms) => ms.toFixed(0)).join(', ')} ms). Target: at most half (ratio <= 0.50).`,
        }),
      ]
    : [];
  return [
    ...baselineRows,
    figure({
      id: `bundle_bytes_${name}`,
      label: `bundle size, ${name}`,
      value: bundle.bytes,
      reference: reference.bytes,
      referenceKind: 'reference',
      unit: 'bytes',
      note: `what a cold start parses: the synthesized asset's index.mjs and the chunks it imports statically (${bundle.deferred.chunks} more chunks, ${bundle.deferred.bytes} bytes, load on first use). Reference (not a strict floor): toolchain.md §6, the third-party code this function must bundle, measured alone: ${reference.what}.`,
    }),
    figure({
      id: `init_ms_${name}`,
      label: `module initialisation, ${name}`,
      value: bundle.medianImportMs,
      reference: reference.importMs,
      referenceKind: 'reference',
      unit: 'ms',
      note: `median of ${bundle.importMs.length} \`await import()\` of index.mjs in a fresh Node ${process.version} process with the function's environment (${bundle.importMs.map((ms) => ms.toFixed(0)).join(', ')} ms). Reference: the same toolchain.md §6 rows (import time measured alone on this kind of machine).`,
    }),
    figure({
      id: `deferred_load_ms_${name}`,
      label: `deferred chunks loaded on first use, ${name}`,
      value: bundle.deferred.medianImportMs,
      reference: bundle.medianImportMs,
      referenceKind: 'reference',
      unit: 'ms',
      note: `median time, in the same processes right after the init, to import every chunk the bundle defers (${bundle.deferred.chunks} chunks, ${bundle.deferred.bytes} bytes: the Kubernetes client and the SDK's rarely used credential providers; an upper bound of what a first invocation waits for, which starts the Kubernetes client's load as it begins so that it overlaps its first AWS call). Reference: this function's module initialisation.`,
    }),
  ];
}

async function measureSingleNode(
  cloud: LocalCloud,
  launch: (instanceType: string) => { instanceId: string; privateDnsName: string },
  instanceType: string,
  context: { taps: readonly Tap[]; runningEventAt: ReadonlyMap<string, number> },
): Promise<SingleNodeRoundTrips | undefined> {
  const marks = context.taps.map((tap) => tap.records.length);
  const k8sTap = context.taps[2] as Tap;
  const instance = launch(instanceType);
  const isUsableWrite = (record: TapRecord) =>
    record.method !== 'GET' &&
    record.statusCode >= 200 &&
    record.statusCode < 300 &&
    record.path.includes(`/ciliumnodes/${instance.privateDnsName}`) &&
    Object.keys(parseJson(record.body ?? '')?.spec?.ipam?.pool ?? {}).length > 0;
  let usable: TapRecord | undefined;
  const deadline = Date.now() + 60_000;
  while (usable === undefined && Date.now() < deadline) {
    usable = k8sTap.records.slice(marks[2]).find(isUsableWrite);
    if (usable === undefined) await sleep(50);
  }
  const eventAt = context.runningEventAt.get(instance.instanceId);
  if (usable === undefined || eventAt === undefined) return undefined;
  const readyAt = usable.endMs;
  const window: (TapRecord & Interval)[] = context.taps.flatMap((tap, index) =>
    tap.records.slice(marks[index]).filter((record) => record.startMs >= eventAt && record.endMs <= readyAt),
  );
  const chain = longestSequentialChain(window);
  const enis = cloud.ec2.state.instanceNetworkInterfaces(instance.instanceId);
  const newEnis = enis.filter((eni) => (eni.attachment?.deviceIndex ?? 0) > 0).length;
  const primary = enis.find((eni) => (eni.attachment?.deviceIndex ?? 0) === 0);
  const assigns =
    primary && (primary.secondaryPrivateIpAddresses.length > 0 || primary.ipv4Prefixes.length > 0) ? 1 : 0;
  return {
    instanceId: instance.instanceId,
    instanceType,
    roundTrips: chain.length,
    floor: 2 + 1 + 3 * newEnis + assigns + 1 + 2,
    elapsedMs: readyAt - eventAt,
    chain: chain.map((record) => `${record.service}:${record.operation}`),
  };
}

/**
 * Starts `containers` containers of each event- and stream-driven function with invocations that
 * change nothing: a `running` event for an instance EC2 does not know (one DescribeInstances, then
 * `ignored`), and a sync of that unknown instance (`no-record`).
 */
async function warmContainers(cloud: LocalCloud, containers: number): Promise<void> {
  const unknownInstance = 'i-0000000000000beef';
  const event = {
    version: '0',
    id: 'bench-warm-up',
    source: 'aws.ec2',
    'detail-type': 'EC2 Instance State-change Notification',
    account: '123456789012',
    region: 'us-east-1',
    time: new Date().toISOString(),
    resources: [`arn:aws:ec2:us-east-1:123456789012:instance/${unknownInstance}`],
    detail: { 'instance-id': unknownInstance, state: 'running' },
  };
  await Promise.all(
    Array.from({ length: containers }, () => [
      cloud.invoke('Allocate', event),
      cloud.invoke('Sync', { instanceId: unknownInstance }),
    ]).flat(),
  );
}

/** The new ENIs on the instances, and how many of them got addresses on eth0 (one assign each). */
function enisMadeFor(
  state: LocalCloud['ec2']['state'],
  instanceIds: readonly string[],
): { newEnis: number; floorAssigns: number } {
  let newEnis = 0;
  let floorAssigns = 0;
  for (const instanceId of instanceIds) {
    const enis = state.instanceNetworkInterfaces(instanceId);
    newEnis += enis.filter((eni) => (eni.attachment?.deviceIndex ?? 0) > 0).length;
    const primary = enis.find((eni) => (eni.attachment?.deviceIndex ?? 0) === 0);
    if (primary && (primary.secondaryPrivateIpAddresses.length > 0 || primary.ipv4Prefixes.length > 0))
      floorAssigns++;
  }
  return { newEnis, floorAssigns };
}

async function pollReadiness(
  cloud: LocalCloud,
  store: DynamoNodeRecordStore,
  instanceIds: readonly string[],
  nodeNames: ReadonlyMap<string, string>,
  readyAt: Map<string, number>,
  elapsedSeconds: () => number,
): Promise<void> {
  // Only nodes whose CiliumNode already shows a pool can be ready: read their records.
  const candidates = instanceIds.filter((instanceId) => {
    if (readyAt.has(instanceId)) return false;
    const current = cloud.k8s.store.get(nodeNames.get(instanceId) ?? '') as
      | { spec?: { ipam?: { pool?: Record<string, unknown> } } }
      | undefined;
    return Object.keys(current?.spec?.ipam?.pool ?? {}).length > 0;
  });
  if (candidates.length === 0) return;
  const records = new Map<string, NodeRecord>();
  for (let start = 0; start < candidates.length; start += 25) {
    const chunk = candidates.slice(start, start + 25);
    const fetched = await Promise.all(chunk.map((instanceId) => store.get(instanceId)));
    fetched.forEach((record, index) => {
      if (record) records.set(chunk[index] as string, record);
    });
  }
  const seconds = elapsedSeconds();
  for (const node of summarize(cloud.ec2.state, cloud.k8s, records, candidates).nodes) {
    if (node.ready) readyAt.set(node.instanceId, seconds);
  }
}

async function allRecords(store: DynamoNodeRecordStore): Promise<Map<string, NodeRecord>> {
  const all = new Map<string, NodeRecord>();
  let pageToken: string | undefined;
  for (let page = 0; page < 10_000; page++) {
    const result = await store.listPage(pageToken);
    for (const record of result.records) all.set(record.instanceId, record);
    pageToken = result.nextPageToken;
    if (pageToken === undefined) break;
  }
  return all;
}

function validate(options: BenchOptions): void {
  if (!Number.isInteger(options.nodes) || options.nodes < 1 || options.nodes > 5_000)
    throw new Error(`--nodes must be 1..5000, got ${options.nodes}`);
  if (!(options.scale > 0 && options.scale <= 1_000))
    throw new Error(`--scale must be in (0, 1000], got ${options.scale}`);
  if (!(options.duplicateEvents >= 0 && options.duplicateEvents <= 1))
    throw new Error(`--duplicate-events must be in [0, 1], got ${options.duplicateEvents}`);
  if (options.firstInterfaceIndex !== 0 && options.firstInterfaceIndex !== 1)
    throw new Error(`--first-interface-index must be 0 or 1, got ${options.firstInterfaceIndex}`);
  if (options.agents !== undefined && !['1.19', '1.20', 'mixed'].includes(options.agents))
    throw new Error(`--agents must be 1.19, 1.20 or mixed, got ${options.agents}`);
  parseMix(options.mix);
}

function countBy(values: readonly string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

function formatCounts(counts: Readonly<Record<string, number>>): string {
  const entries = Object.entries(counts);
  return entries.length === 0 ? 'none' : entries.map(([key, value]) => `${key} ${value}`).join(', ');
}

// biome-ignore lint/suspicious/noExplicitAny: parsed log lines and API answers are untyped JSON
function parseJson(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function sleep(milliseconds: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, milliseconds));
}

function demandFigures(
  { watcher, sweepAlone }: NonNullable<BenchReport['demandToPool']>,
  singleNode: SingleNodeRoundTrips | undefined,
  scale: number,
): Figure[] {
  // Floor: the same chain for one node alone (event to usable pool), as measured above.
  const floor = singleNode ? (singleNode.elapsedMs / 1000) * scale : undefined;
  const floorNote = `Floor: one node alone, EC2 event to usable pool (${singleNode ? `${singleNode.roundTrips} round trips` : 'n/a'}).`;
  const rows: Figure[] = [];
  for (const [mode, latency] of [
    ['watcher', watcher],
    ['sweep alone', sweepAlone],
  ] as const) {
    const versions = Object.keys(latency.byAgent) as AgentVersion[];
    // One set of rows per agent version when both ran (a mixed cluster), else one for all.
    const groups: [AgentVersion | undefined, Omit<LatencyFigures, 'byAgent'>][] =
      versions.length > 1
        ? versions.map((version) => [version, latency.byAgent[version] as Omit<LatencyFigures, 'byAgent'>])
        : [[versions[0], latency]];
    for (const [version, figures] of groups) {
      const suffix = versions.length > 1 ? `_${version?.replace('.', '_')}` : '';
      for (const [statistic, value] of [
        ['p50', figures.p50Seconds],
        ['p99', figures.p99Seconds],
        ['max', figures.maxSeconds],
      ] as const) {
        rows.push(
          figure({
            id: `demand_to_pool_${mode.replace(' ', '_')}${suffix}_${statistic}`,
            label: `demand to pool, ${mode}${versions.length > 1 ? `, ${version} agents` : ''}, ${statistic}`,
            value,
            reference: floor,
            unit: 'simulated s',
            note: `pods start at once on ${figures.nodes} m5.large nodes running ${version ?? '1.19'} agents (5 more pool IPs used each, past the pre-allocate watermark of 8); ${demandNote(version)} (${figures.served}/${figures.nodes} served). ${mode === 'watcher' ? 'One Watch invocation holds the watch; no sweep runs. Target: p99 <= 2 s.' : 'Only the scheduled sweep (every simulated minute) serves them; the pod starts fall at a seeded point of its period.'} ${floorNote}`,
          }),
        );
      }
    }
  }
  return rows;
}

function demandNote(version: AgentVersion | undefined): string {
  return version === '1.20'
    ? "from the agent's spec.ipam.pools.requested write to the first CiliumNode version whose status.eni.enis (non-excluded ENIs) holds the requested IPv4 addresses"
    : "from the agent's status.ipam.used write to the first CiliumNode version whose pool meets the watermark again";
}

function sweepCostFigures(cost: SweepCost): Figure[] {
  const ec2Total = Object.values(cost.ec2Calls).reduce((sum, calls) => sum + calls, 0);
  const note = `one {"task":"sweep"} invocation of the stack's Sweep function after ${cost.nodes} nodes were allocated and published (nothing changed since), read off pass-throughs${cost.failure ? `; THE SWEEP FAILED (${cost.failure}), so the figures are of the part it did` : ''}.`;
  return [
    figure({
      id: `sweep_cost_ec2_calls_${cost.nodes}`,
      label: `steady-state sweep, ${cost.nodes} nodes, EC2 calls`,
      value: ec2Total,
      reference: Math.ceil(cost.nodes / 1000),
      unit: 'calls',
      note: `${note} Calls: ${formatCounts(cost.ec2Calls)}. Floor: one filtered DescribeInstances page per 1000 instances (nothing changed, nothing else to ask).`,
    }),
    figure({
      id: `sweep_cost_rcu_${cost.nodes}`,
      label: `steady-state sweep, ${cost.nodes} nodes, DynamoDB read units`,
      value: cost.dynamoDbReadUnits,
      reference: 0,
      unit: 'RCU',
      note: `${note} An eventually consistent Scan of every record: half a unit per 4 KB of items (item sizes by DynamoDB's rules); ${cost.dynamoDbWrites} writes. Floor 0: with nothing changed nothing needs reading (the platform offers no change feed the sweep could read instead, short of the stream the sync consumes).`,
    }),
    figure({
      id: `sweep_cost_k8s_bytes_${cost.nodes}`,
      label: `steady-state sweep, ${cost.nodes} nodes, bytes listed from the API server`,
      value: cost.kubernetesListBytes,
      reference: 0,
      unit: 'bytes',
      note: `${note} Response bytes of CiliumNode LIST requests; ${cost.kubernetesWrites} Kubernetes writes. Floor 0 (a watch delivers only changes).`,
    }),
    figure({
      id: `sweep_cost_lambda_ms_${cost.nodes}`,
      label: `steady-state sweep, ${cost.nodes} nodes, Lambda time`,
      value: cost.lambdaMs,
      reference: 0,
      unit: 'ms',
      note: `${note} Wall time of the invocation on the local cloud (billed duration on Lambda is of this order at 512 MB). Floor 0: nothing changed.`,
    }),
    ...scheduledWorkFigures(
      'resync',
      'the resync ({"all":true} to the Sync function, every minute)',
      cost.nodes,
      cost.resync,
    ),
    ...scheduledWorkFigures(
      'gc',
      'the ENI garbage collection ({"task":"eni-garbage-collection"}, every 5 minutes)',
      cost.nodes,
      cost.garbageCollection,
    ),
  ];
}

/** The resync's and the garbage collection's cost in the same steady state as the sweep's. */
function scheduledWorkFigures(key: string, what: string, nodes: number, cost: InvocationCost): Figure[] {
  const ec2Total = Object.values(cost.ec2Calls).reduce((sum, calls) => sum + calls, 0);
  const note = `one run of ${what} right after the steady-state sweep at ${nodes} nodes, read off pass-throughs: EC2 calls ${ec2Total} (${formatCounts(cost.ec2Calls)}), ${cost.dynamoDbWrites} DynamoDB writes, ${cost.kubernetesListBytes} bytes listed, ${cost.kubernetesWrites} Kubernetes writes${cost.failure ? `; IT FAILED (${cost.failure})` : ''}. Read units: half a unit per 4 KB of items for a Scan, one per GetItem. Floor 0: nothing changed.`;
  return [
    figure({
      id: `${key}_cost_rcu_${nodes}`,
      label: `steady-state ${key}, ${nodes} nodes, DynamoDB read units`,
      value: cost.dynamoDbReadUnits,
      reference: 0,
      unit: 'RCU',
      note,
    }),
    figure({
      id: `${key}_cost_lambda_ms_${nodes}`,
      label: `steady-state ${key}, ${nodes} nodes, Lambda time`,
      value: cost.lambdaMs,
      reference: 0,
      unit: 'ms',
      note,
    }),
  ];
}
