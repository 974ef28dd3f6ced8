import { setTimeout as sleep } from 'node:timers/promises';
import type { CallRecord } from '../../emulators/ec2/calls.ts';
import {
  LOCAL_ACCOUNT,
  LOCAL_REGION,
  type LocalCloud,
  startLocalCloud,
} from '../../local-cloud/local-cloud.ts';
import type { SynthesizedStack } from '../../local-cloud/synthesize.ts';
import {
  OPERATOR_PEER_CREDENTIALS,
  type OperatorPeer,
  operatorPeerIamIdentity,
  startOperatorPeer,
} from '../../peers/cilium-1.20/operator-peer.ts';
import type { ObservedRequest } from '../../support/kubernetes.ts';
import { scaledClock, seededRandom } from '../floors.ts';
import { nodeLauncher } from '../phases/bench-cloud.ts';
import { Ec2EventDelivery } from '../phases/ec2-events.ts';
import { type DemandLatency, measurePeerDemand } from './demand.ts';
import { type ComparisonSide, VersionRecorder } from './side.ts';

export interface SideSettings {
  readonly nodes: number;
  readonly instanceTypes: readonly string[];
  readonly demandNodes: number;
  readonly seed: number;
  readonly concurrency: number;
  readonly timeoutSeconds: number;
  readonly dynamoDbEndpoint: string;
  readonly onProgress: (line: string) => void;
  readonly log: (line: string) => void;
}

/** What one side did, read off the stand-ins. */
export interface SideRun {
  readonly side: ComparisonSide;
  readonly nodeNames: readonly string[];
  /** Simulated seconds from the launch to each node's first version a 1.19 agent starts from. */
  readonly readySeconds: ReadonlyMap<string, number>;
  readonly timedOut: boolean;
  /** The side's own EC2 calls from the launch until the burst settled. */
  readonly burstCalls: readonly CallRecord[];
  /** The side's own Kubernetes requests over the same span. */
  readonly burstRequests: readonly ObservedRequest[];
  readonly recorder: VersionRecorder;
  readonly demand: DemandLatency | undefined;
  /** Calls the EC2 stand-in does not serve (InvalidAction), by action: the bench fails on any. */
  readonly unservedActions: readonly string[];
}

/** Runs the burst, then the demand, on a fresh local cloud for one side; stops everything it started. */
export async function runSide(
  stack: SynthesizedStack,
  side: ComparisonSide,
  settings: SideSettings,
): Promise<SideRun> {
  const clock = scaledClock(1);
  settings.onProgress(`${side.label}: starting the local cloud on kube-apiserver...`);
  const cloud = await startLocalCloud({
    stack,
    dynamoDbEndpoint: settings.dynamoDbEndpoint,
    timeScale: 1,
    runSchedules: false,
    ec2Events: false,
    maxConcurrencyPerFunction: settings.concurrency,
    agentVersions: '1.19',
    // Both sides' agents register spec.eni as cilium-agent does (the operator needs the instance type).
    registerInstanceFacts: true,
    kubernetesBackend: 'kube-apiserver',
    // cilium 1.20's CiliumNode CRD: the peer's own generation, so nothing it writes is pruned.
    kubernetesSchemas: ['v1.20'],
    environment: { WATCH_SECONDS: '40', DRAIN_SECONDS: '5' },
    ec2: { throttling: true, clock },
    onLog: ({ functionName, stream, text }) => settings.log(`${functionName} ${stream}: ${text}`),
  });
  const recorder = new VersionRecorder(clock);
  const unsubscribe = cloud.k8s.onVersion(recorder.record);
  const stops: (() => Promise<void> | void)[] = [unsubscribe];
  try {
    const driver = await startDriver(cloud, side, settings, stops);
    return await measure(cloud, side, settings, { clock, recorder, driver });
  } finally {
    for (const stop of stops.reverse()) await stop();
    await cloud.stop();
  }
}

/** What makes the side allocate: our EC2 events and schedules, or the peer process. */
interface Driver {
  readonly fireSchedulesEveryMinute: boolean;
  readonly peer: OperatorPeer | undefined;
  readonly isOwnCall: (call: CallRecord) => boolean;
  readonly isOwnRequest: (request: ObservedRequest) => boolean;
}

async function startDriver(
  cloud: LocalCloud,
  side: ComparisonSide,
  settings: SideSettings,
  stops: (() => Promise<void> | void)[],
): Promise<Driver> {
  const peerUser = 'system:serviceaccount:kube-system:cilium-operator';
  if (side.peerLimits === undefined) {
    const events = new Ec2EventDelivery(cloud, seededRandom(settings.seed));
    stops.push(() => events.stop());
    return {
      fireSchedulesEveryMinute: true,
      peer: undefined,
      isOwnCall: (call) => call.accessKeyId !== OPERATOR_PEER_CREDENTIALS.accessKeyId,
      isOwnRequest: (request) => request.user !== peerUser,
    };
  }
  const { controlPlane, operatorPeerToken } = cloud.k8s;
  if (controlPlane === undefined || operatorPeerToken === undefined)
    throw new Error('the operator peer needs the real kube-apiserver');
  cloud.ec2.setIdentity(OPERATOR_PEER_CREDENTIALS.accessKeyId, operatorPeerIamIdentity(LOCAL_ACCOUNT));
  settings.onProgress(`${side.label}: starting cilium-operator's ENI allocator...`);
  const peer = await startOperatorPeer({
    kubernetesUrl: cloud.k8s.url,
    kubernetesCaPem: controlPlane.caPem,
    kubernetesToken: operatorPeerToken,
    ec2Endpoint: cloud.ec2.url,
    region: LOCAL_REGION,
    hostVpcId: cloud.cluster.vpc.vpcId,
    ipamApiLimits: side.peerLimits,
    onLog: (line) => settings.log(`operator-peer ${line}`),
  });
  stops.push(() => peer.stop());
  return {
    fireSchedulesEveryMinute: false,
    peer,
    isOwnCall: (call) => call.accessKeyId === OPERATOR_PEER_CREDENTIALS.accessKeyId,
    isOwnRequest: (request) => request.user === peerUser,
  };
}

async function measure(
  cloud: LocalCloud,
  side: ComparisonSide,
  settings: SideSettings,
  { clock, recorder, driver }: { clock: () => number; recorder: VersionRecorder; driver: Driver },
): Promise<SideRun> {
  const launch = nodeLauncher(cloud);
  cloud.ec2.throttling.reset();
  await cloud.k8s.resetRequests();
  const callsBefore = cloud.ec2.calls.log.length;
  settings.onProgress(`${side.label}: launching ${settings.nodes} nodes at once...`);
  const launchedAtMs = clock();
  const nodeNames: string[] = [];
  const instanceTypeOf = new Map<string, string>();
  for (let index = 0; index < settings.nodes; index++) {
    const type = settings.instanceTypes[index % settings.instanceTypes.length] as string;
    const instance = launch(type);
    nodeNames.push(instance.privateDnsName);
    instanceTypeOf.set(instance.privateDnsName, type);
  }
  recorder.watch(nodeNames);
  const schedules = driver.fireSchedulesEveryMinute
    ? setInterval(() => void cloud.fireSchedules().catch(() => {}), 60_000)
    : undefined;
  const deadline = Date.now() + settings.timeoutSeconds * 1000;
  let lastProgress = Date.now();
  try {
    while (recorder.readyAtMs.size < nodeNames.length && Date.now() < deadline) {
      if (driver.peer?.exitedEarly())
        throw new Error(`the cilium-operator peer exited:\n${driver.peer.recentLog.slice(-15).join('\n')}`);
      if (Date.now() - lastProgress > 5_000) {
        lastProgress = Date.now();
        settings.onProgress(
          `  ${recorder.readyAtMs.size}/${nodeNames.length} ready at ${((clock() - launchedAtMs) / 1000).toFixed(1)} s; EC2 calls ${cloud.ec2.calls.log.length - callsBefore}`,
        );
      }
      await sleep(200);
    }
  } finally {
    clearInterval(schedules);
  }
  const timedOut = recorder.readyAtMs.size < nodeNames.length;
  await settle(cloud, driver);
  const burstCalls = cloud.ec2.calls.log.slice(callsBefore).filter(driver.isOwnCall);
  const burstRequests = (await cloud.k8s.requests()).filter(driver.isOwnRequest);
  const demandNodes = nodeNames
    .filter((name) => instanceTypeOf.get(name) === 'm5.large')
    .slice(0, settings.demandNodes);
  const demand =
    demandNodes.length === 0 || timedOut
      ? undefined
      : await measurePeerDemand(cloud, demandNodes, {
          clock,
          recorder,
          ourWatcher: driver.peer === undefined,
          settings,
        });
  const readySeconds = new Map(
    [...recorder.readyAtMs].map(([name, atMs]) => [name, (atMs - launchedAtMs) / 1000] as const),
  );
  const unservedActions = [
    ...new Set(
      cloud.ec2.calls.log
        .filter(driver.isOwnCall)
        .filter((call) => call.errorCode === 'InvalidAction')
        .map((call) => call.action),
    ),
  ];
  return {
    side,
    nodeNames,
    readySeconds,
    timedOut,
    burstCalls,
    burstRequests,
    recorder,
    demand,
    unservedActions,
  };
}

/** Ours: nothing pending anywhere. The peer: no EC2 call of its own for 3 s (at most 30 s). */
async function settle(cloud: LocalCloud, driver: Driver): Promise<void> {
  if (driver.peer === undefined) {
    await cloud.settle();
    return;
  }
  const until = Date.now() + 30_000;
  let seen = cloud.ec2.calls.log.length;
  let quietSince = Date.now();
  while (Date.now() < until && Date.now() - quietSince < 3_000) {
    await sleep(250);
    if (cloud.ec2.calls.log.length !== seen) {
      seen = cloud.ec2.calls.log.length;
      quietSince = Date.now();
    }
  }
}
