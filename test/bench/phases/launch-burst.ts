import { setTimeout as sleep } from 'node:timers/promises';
import type { DynamoNodeRecordStore } from '../../../functions/aws/node-table.ts';
import type { NodeRecord } from '../../../functions/core/model.ts';
import { k8sEmulatorOf, type LocalCloud } from '../../local-cloud/local-cloud.ts';
import { summarize } from '../../local-cloud/summary.ts';
import { nowMs } from '../tap.ts';
import type { BenchCloud } from './bench-cloud.ts';
import type { BenchSettings } from './settings.ts';

/** Positions in the logs the bench reads, so that a phase's figures count only its own traffic. */
export interface LogMarks {
  /** Entries of the EC2 emulator's call log. */
  readonly ec2Calls: number;
  /** Entries of the Kubernetes emulator's request log. */
  readonly k8sRequests: number;
  /** Syncs the Sync function logged. */
  readonly syncLog: number;
  /** Records of each tap, in `BenchTaps.all` order. */
  readonly taps: readonly number[];
}

/** What the burst reached, and where its traffic lies in the logs. */
export interface LaunchBurst {
  /** The burst's instances, in launch order. */
  readonly instanceIds: readonly string[];
  /** Each instance's node (CiliumNode) name. */
  readonly nodeNames: ReadonlyMap<string, string>;
  /** Simulated seconds after the launch at which each node was first seen ready. */
  readonly readyAt: ReadonlyMap<string, number>;
  readonly timedOut: boolean;
  readonly timeoutMs: number;
  readonly realSeconds: number;
  /** The logs when the burst was launched, and once it had settled. */
  readonly startMarks: LogMarks;
  readonly endMarks: LogMarks;
  /** Error lines the functions had logged before the burst. */
  readonly functionErrorsBefore: number;
  /** ENIs at device index >= 1 on the burst's instances once it settled. */
  readonly newEnis: number;
  /** The burst's instances whose eth0 ended up holding addresses (one assign each). */
  readonly floorAssigns: number;
  /** Invariant violations over every CiliumNode version, once the burst settled. */
  readonly invariantViolations: number;
}

/** How often the burst's readiness is polled, in real ms. */
const READINESS_POLL_MS = 400;
/** How often a line of progress is printed while the burst runs, in real ms. */
const PROGRESS_EVERY_MS = 5_000;

/**
 * Launches `settings.nodes` instances at once (the mix in launch order) with the duplicate-event
 * rate on and EC2's buckets full, fires the schedules (sweep, ENI GC, resync) every simulated
 * minute, and polls until every node is ready or the timeout passes; then lets the cloud settle
 * and reads what the burst itself made (the demand phases after it add ENIs of their own).
 */
export async function launchBurst(bench: BenchCloud, settings: BenchSettings): Promise<LaunchBurst> {
  const { cloud } = bench;
  cloud.ec2.throttling.reset();
  const startMarks = logMarks(bench);
  const functionErrorsBefore = bench.functionLog.errors;
  bench.functionLog.resetAllocations();
  bench.events.duplicateRate = settings.duplicateEvents;
  settings.onProgress(`launching ${settings.nodes} nodes at once (scale ${settings.scale}x)...`);
  const startRealMs = nowMs();
  const startSimulatedMs = bench.clock();
  const { instanceIds, nodeNames } = launchAtOnce(bench, settings);
  // EventBridge schedules (sweep, ENI GC, resync) on the simulated clock: every simulated minute.
  const scheduleTimer = setInterval(
    () => void cloud.fireSchedules().catch(() => {}),
    60_000 / settings.scale,
  );
  const timeoutMs = settings.timeoutSeconds * 1000;
  let readiness: Readiness;
  try {
    readiness = await waitUntilReady(bench, settings, {
      instanceIds,
      nodeNames,
      ec2CallsBefore: startMarks.ec2Calls,
      simulatedSeconds: () => (bench.clock() - startSimulatedMs) / 1000,
      timeoutMs,
    });
  } finally {
    clearInterval(scheduleTimer);
  }
  const realSeconds = (nowMs() - startRealMs) / 1000;
  settings.onProgress(`${readiness.readyAt.size}/${instanceIds.length} ready; settling...`);
  await cloud.settle();
  const endMarks = logMarks(bench);
  const { newEnis, floorAssigns } = enisMadeFor(cloud.ec2.state, instanceIds);
  const records = await allRecords(bench.directStore);
  const finalSummary = await summarize(cloud.ec2.state, cloud.k8s, records, instanceIds);
  return {
    instanceIds,
    nodeNames,
    readyAt: readiness.readyAt,
    timedOut: readiness.timedOut,
    timeoutMs,
    realSeconds,
    startMarks,
    endMarks,
    functionErrorsBefore,
    newEnis,
    floorAssigns,
    invariantViolations: finalSummary.violations,
  };
}

/** `settings.nodes` instances in one go, the mix's types in turn. */
function launchAtOnce(
  bench: BenchCloud,
  settings: BenchSettings,
): { instanceIds: string[]; nodeNames: Map<string, string> } {
  const instanceIds: string[] = [];
  const nodeNames = new Map<string, string>();
  const { instanceTypes } = settings;
  for (let index = 0; index < settings.nodes; index++) {
    const instance = bench.launch(instanceTypes[index % instanceTypes.length] as string);
    instanceIds.push(instance.instanceId);
    nodeNames.set(instance.instanceId, instance.privateDnsName);
  }
  return { instanceIds, nodeNames };
}

interface Readiness {
  readonly readyAt: ReadonlyMap<string, number>;
  readonly timedOut: boolean;
}

interface BurstInFlight {
  readonly instanceIds: readonly string[];
  readonly nodeNames: ReadonlyMap<string, string>;
  /** EC2 calls logged before the launch: the progress line counts the burst's own. */
  readonly ec2CallsBefore: number;
  /** Simulated seconds since the launch. */
  readonly simulatedSeconds: () => number;
  readonly timeoutMs: number;
}

/** Polls every 0.4 real s until every node is ready or `timeoutMs` passed, printing progress every 5 s. */
async function waitUntilReady(
  bench: BenchCloud,
  settings: BenchSettings,
  burst: BurstInFlight,
): Promise<Readiness> {
  const { cloud } = bench;
  const { instanceIds } = burst;
  const readyAt = new Map<string, number>();
  const deadline = Date.now() + burst.timeoutMs;
  let lastProgress = Date.now();
  for (let poll = 0; readyAt.size < instanceIds.length; poll++) {
    if (Date.now() > deadline || poll > 1_000_000) return { readyAt, timedOut: true };
    await pollReadiness(
      cloud,
      bench.directStore,
      instanceIds,
      burst.nodeNames,
      readyAt,
      burst.simulatedSeconds,
    );
    if (Date.now() - lastProgress > PROGRESS_EVERY_MS) {
      lastProgress = Date.now();
      const burstCalls = cloud.ec2.calls.log.slice(burst.ec2CallsBefore);
      settings.onProgress(
        `  ${readyAt.size}/${instanceIds.length} ready at ${burst.simulatedSeconds().toFixed(1)} simulated s; EC2 calls ${burstCalls.length}, throttled ${burstCalls.filter((call) => call.outcome === 'throttled').length}`,
      );
    }
    await sleep(READINESS_POLL_MS);
  }
  return { readyAt, timedOut: false };
}

function logMarks(bench: BenchCloud): LogMarks {
  return {
    ec2Calls: bench.cloud.ec2.calls.log.length,
    k8sRequests: k8sEmulatorOf(bench.cloud).requests.all().length,
    syncLog: bench.functionLog.syncs.length,
    taps: bench.taps.all.map((tap) => tap.records.length),
  };
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
    const current = k8sEmulatorOf(cloud).store.get(nodeNames.get(instanceId) ?? '') as
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
  for (const node of (await summarize(cloud.ec2.state, cloud.k8s, records, candidates)).nodes) {
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
