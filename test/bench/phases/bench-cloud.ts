import { rmSync } from 'node:fs';
import type { DynamoNodeRecordStore } from '../../../functions/aws/node-table.ts';
import { type LocalCloud, startLocalCloud } from '../../local-cloud/local-cloud.ts';
import { type SynthesizedStack, synthesizeStack } from '../../local-cloud/synthesize.ts';
import { startDynamoDbLocal } from '../../support/dynamodb-local.ts';
import { scaledClock, seededRandom } from '../floors.ts';
import { startTap, type Tap } from '../tap.ts';
import type { Cleanups } from './cleanups.ts';
import { Ec2EventDelivery } from './ec2-events.ts';
import { FunctionLogRecorder } from './function-log.ts';
import type { BenchSettings } from './settings.ts';

/** An instance as the EC2 emulator launched it. */
type LaunchedInstance = ReturnType<LocalCloud['ec2']['state']['launchInstance']>;

/** Kubernetes request verbs that write an object. */
export const KUBERNETES_WRITE_VERBS: ReadonlySet<string> = new Set(['create', 'update', 'patch']);

/**
 * The recording pass-throughs the functions' endpoints point at. `all` is EC2, DynamoDB,
 * Kubernetes, in that order: the order of every per-tap position the phases keep.
 */
export interface BenchTaps {
  readonly ec2: Tap;
  readonly dynamoDb: Tap;
  readonly kubernetes: Tap;
  readonly all: readonly Tap[];
}

/** The local cloud the phases run on, and what the bench observes it through. */
export interface BenchCloud {
  readonly cloud: LocalCloud;
  readonly dynamoDbEndpoint: string;
  readonly taps: BenchTaps;
  /** Simulated epoch ms (EC2's token buckets run on it). */
  readonly clock: () => number;
  /** The run's seeded draw: duplicate events, then where in the sweep's period the pods start. */
  readonly random: () => number;
  readonly functionLog: FunctionLogRecorder;
  readonly events: Ec2EventDelivery;
  /** Launches an instance of the cluster, alternating between the bench's two node subnets. */
  readonly launch: (instanceType: string) => LaunchedInstance;
  /** The cloud's own client, straight to DynamoDB Local (not through the pass-through). */
  readonly directStore: DynamoNodeRecordStore;
}

/** The project's CDK app, synthesized with the run's context: every function bundled as deployed. */
export async function synthesizeBenchStack(
  settings: BenchSettings,
  cleanups: Cleanups,
): Promise<SynthesizedStack> {
  settings.onProgress('synthesizing the stack (bundling every function)...');
  const stack = await synthesizeStack({
    context: {
      'eni-ipam:firstInterfaceIndex': settings.firstInterfaceIndex,
      'eni-ipam:prefixDelegation': settings.prefixDelegation,
    },
  });
  cleanups.add(() => rmSync(stack.assemblyDirectory, { recursive: true, force: true }));
  return stack;
}

/**
 * Starts the stack on the local cloud behind the taps: EC2 enforcing AWS's token buckets on the
 * scaled clock, no schedules and no EC2 events of its own (the phases fire and deliver them),
 * one Watch invocation per demand measurement.
 */
export async function startBenchCloud(
  stack: SynthesizedStack,
  settings: BenchSettings,
  cleanups: Cleanups,
): Promise<BenchCloud> {
  const dynamoDbEndpoint = settings.dynamoDbEndpoint ?? (await startOwnDynamoDb(cleanups));
  const taps = await startTaps(dynamoDbEndpoint, cleanups);
  const clock = scaledClock(settings.scale);
  const functionLog = new FunctionLogRecorder(settings.functionLog);
  settings.onProgress('starting the local cloud...');
  const cloud = await startLocalCloud({
    stack,
    dynamoDbEndpoint,
    timeScale: settings.scale,
    runSchedules: false,
    ec2Events: false,
    maxConcurrencyPerFunction: settings.concurrency,
    agentVersions: settings.agents,
    environment: {
      // One Watch invocation per demand measurement, ending on its own.
      WATCH_SECONDS: '40',
      DRAIN_SECONDS: '5',
      AWS_ENDPOINT_URL_EC2: taps.ec2.url,
      AWS_ENDPOINT_URL_DYNAMODB: taps.dynamoDb.url,
    },
    kubernetesUrl: taps.kubernetes.url,
    // The emulator, for its speed at the bench's scale (and its synchronous store and request log).
    kubernetesBackend: 'emulator',
    ec2: { throttling: true, clock },
    onLog: functionLog.record,
  });
  cleanups.add(() => cloud.stop());
  taps.ec2.setUpstream(cloud.ec2.url);
  taps.kubernetes.setUpstream(cloud.k8s.url);
  const random = seededRandom(settings.seed);
  const events = new Ec2EventDelivery(cloud, random);
  cleanups.add(() => events.stop());
  return {
    cloud,
    dynamoDbEndpoint,
    taps,
    clock,
    random,
    functionLog,
    events,
    launch: nodeLauncher(cloud),
    directStore: cloud.table.store,
  };
}

async function startOwnDynamoDb(cleanups: Cleanups): Promise<string> {
  const dynamoDb = await startDynamoDbLocal();
  cleanups.add(() => dynamoDb.stop());
  return dynamoDb.endpoint;
}

/** EC2's and Kubernetes' upstreams are set once the cloud runs; DynamoDB's is known now. */
async function startTaps(dynamoDbEndpoint: string, cleanups: Cleanups): Promise<BenchTaps> {
  const ec2 = await startTap({ service: 'ec2' });
  const dynamoDb = await startTap({ service: 'dynamodb', upstream: dynamoDbEndpoint });
  const kubernetes = await startTap({
    service: 'kubernetes',
    keepBody: (request) => request.method !== 'GET',
  });
  const all = [ec2, dynamoDb, kubernetes];
  cleanups.add(() => Promise.all(all.map((tap) => tap.close())).then(() => {}));
  return { ec2, dynamoDb, kubernetes, all };
}

/** Nodes go in two /18 subnets of the bench's own: the seeded node subnets are /24s, too small for a burst of thousands. */
export function nodeLauncher(cloud: LocalCloud): (instanceType: string) => LaunchedInstance {
  const { state } = cloud.ec2;
  const { cluster } = cloud;
  const subnets = [
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
  let launched = 0;
  return (instanceType) =>
    state.launchInstance({
      instanceType,
      subnetId: (subnets[launched++ % 2] as (typeof subnets)[number]).subnetId,
      securityGroupIds: [cluster.securityGroups.nodes.groupId],
      tags: {
        [`kubernetes.io/cluster/${cluster.clusterName}`]: 'owned',
        Name: `${cluster.clusterName}-node`,
      },
    });
}
