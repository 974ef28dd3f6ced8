import { setTimeout as sleep } from 'node:timers/promises';
import type { LocalCloud } from '../../local-cloud/local-cloud.ts';
import { type Interval, longestSequentialChain } from '../floors.ts';
import { type Figure, figure } from '../report.ts';
import type { TapRecord } from '../tap.ts';
import type { BenchCloud } from './bench-cloud.ts';
import { parseJson } from './function-log.ts';
import type { BenchSettings } from './settings.ts';

/** One node launched alone: the sequential round trips from its EC2 event to a usable pool. */
export interface SingleNodeRoundTrips {
  readonly instanceId: string;
  readonly instanceType: string;
  readonly roundTrips: number;
  readonly floor: number;
  /** Real ms from the EC2 event to the usable write, the added latency included. */
  readonly elapsedMs: number;
  /** The latency every tap added to each request (`ADDED_LATENCY_MS`). */
  readonly addedLatencyMs: number;
  readonly chain: readonly string[];
}

/**
 * The latency each pass-through adds to every request while the node alone runs: the stand-ins
 * answer in about a millisecond, so without it requests the code starts together (the reads after
 * DescribeInstances) would be ordered by a cold client's CPU time and counted as sequential. A
 * uniform 25 ms is in the range of AWS's in-region API latency; the other phases add none.
 */
const ADDED_LATENCY_MS = 25;

/** How long a node alone may take to get a usable pool before its figure reads n/a. */
const USABLE_POOL_TIMEOUT_MS = 60_000;

/**
 * Launches one node of the mix's first instance type into an otherwise idle cloud, measures its
 * round trips (see `singleNodeFigure`), then lets the cloud settle. `containers` says whether the
 * functions' containers were warmed first (`warmContainers`): a node launched into an active
 * cluster meets warm ones.
 */
export async function measureRoundTripsAlone(
  bench: BenchCloud,
  settings: BenchSettings,
  containers: 'cold' | 'warm',
): Promise<SingleNodeRoundTrips | undefined> {
  settings.onProgress(
    containers === 'cold'
      ? 'one node alone: round trips from the EC2 event to a usable pool...'
      : 'one node alone, warm containers: round trips from the EC2 event to a usable pool...',
  );
  for (const tap of bench.taps.all) tap.setLatencyMs(ADDED_LATENCY_MS);
  try {
    const roundTrips = await roundTripsOfOneNode(bench, settings.instanceTypes[0] as string);
    await bench.cloud.settle();
    return roundTrips;
  } finally {
    for (const tap of bench.taps.all) tap.setLatencyMs(0);
  }
}

/**
 * A burst on AWS cold-starts its Lambdas in parallel on separate hosts; here they would share two
 * cores, so every container is started (and its bundle imported) before the burst.
 */
export async function warmEveryContainer(bench: BenchCloud, settings: BenchSettings): Promise<void> {
  settings.onProgress(`warming ${settings.concurrency} containers per function...`);
  await warmContainers(bench.cloud, settings.concurrency);
  await bench.cloud.settle();
}

/**
 * The longest chain of the node's requests (EC2, DynamoDB, Kubernetes, as the taps recorded them)
 * in which each starts after the previous one ended, from its EC2 `running` event to the end of
 * the first CiliumNode write whose pool is non-empty. Undefined when no such write came in time.
 */
async function roundTripsOfOneNode(
  bench: BenchCloud,
  instanceType: string,
): Promise<SingleNodeRoundTrips | undefined> {
  const { taps } = bench;
  const marks = taps.all.map((tap) => tap.records.length);
  const kubernetesMark = taps.kubernetes.records.length;
  const instance = bench.launch(instanceType);
  const isUsableWrite = (record: TapRecord) =>
    record.method !== 'GET' &&
    record.statusCode >= 200 &&
    record.statusCode < 300 &&
    record.path.includes(`/ciliumnodes/${instance.privateDnsName}`) &&
    Object.keys(parseJson(record.body ?? '')?.spec?.ipam?.pool ?? {}).length > 0;
  let usable: TapRecord | undefined;
  const deadline = Date.now() + USABLE_POOL_TIMEOUT_MS;
  while (usable === undefined && Date.now() < deadline) {
    usable = taps.kubernetes.records.slice(kubernetesMark).find(isUsableWrite);
    if (usable === undefined) await sleep(50);
  }
  const eventAt = bench.events.runningEventAt.get(instance.instanceId);
  if (usable === undefined || eventAt === undefined) return undefined;
  const readyAt = usable.endMs;
  const window: (TapRecord & Interval)[] = taps.all.flatMap((tap, index) =>
    tap.records.slice(marks[index]).filter((record) => record.startMs >= eventAt && record.endMs <= readyAt),
  );
  const chain = longestSequentialChain(window);
  const enis = bench.cloud.ec2.state.instanceNetworkInterfaces(instance.instanceId);
  const newEnis = enis.filter((eni) => (eni.attachment?.deviceIndex ?? 0) > 0).length;
  const primary = enis.find((eni) => (eni.attachment?.deviceIndex ?? 0) === 0);
  const assigns =
    primary && (primary.secondaryPrivateIpAddresses.length > 0 || primary.ipv4Prefixes.length > 0) ? 1 : 0;
  return {
    instanceId: instance.instanceId,
    instanceType,
    roundTrips: chain.length,
    // DescribeInstances, the parallel reads, the claim, 2 per new ENI (create, attach) and 1 per
    // assign, the record write, the CiliumNode status and spec patches.
    floor: 2 + 1 + 2 * newEnis + assigns + 1 + 2,
    elapsedMs: readyAt - eventAt,
    addedLatencyMs: ADDED_LATENCY_MS,
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

/** The figures of the node alone, on cold containers then on warm ones. */
export function roundTripsAloneFigures(
  cold: SingleNodeRoundTrips | undefined,
  warm: SingleNodeRoundTrips | undefined,
): Figure[] {
  return [
    singleNodeFigure(
      'single_node_round_trips',
      'sequential round trips, one node alone (cold containers)',
      cold,
    ),
    singleNodeFigure(
      'single_node_round_trips_warm',
      'sequential round trips, one node alone (warm containers)',
      warm,
    ),
  ];
}

function singleNodeFigure(id: string, label: string, singleNode: SingleNodeRoundTrips | undefined): Figure {
  return figure({
    id,
    label,
    value: singleNode?.roundTrips,
    reference: singleNode?.floor,
    unit: 'round trips',
    note: singleNode
      ? `${singleNode.instanceType} launched alone: the longest chain of the functions' EC2, DynamoDB and Kubernetes requests (recorded with start and end by pass-throughs) in which each starts after the previous one ended, from the EC2 running event to the end of the first CiliumNode write whose pool is non-empty (${singleNode.elapsedMs.toFixed(0)} real ms). Chain: ${singleNode.chain.join(' > ')}. Each pass-through holds every request ${singleNode.addedLatencyMs} ms before forwarding it (in this phase only), so requests the code starts together overlap as they would against AWS instead of being ordered by the client's CPU time. Floor: DescribeInstances, the parallel reads, claim (conditional put), 2 per new ENI (create, attach) and 1 per assign, record write, CiliumNode status patch, spec patch; delete-on-termination (ModifyNetworkInterfaceAttribute) is set after the addresses are published, off this path.`
      : 'the single node did not become ready in 60 s',
  });
}
