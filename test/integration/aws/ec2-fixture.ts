import type { EC2Client } from '@aws-sdk/client-ec2';
import {
  createEc2Client,
  createEc2NetworkAdapter,
  type Ec2NetworkAdapterOptions,
} from '../../../functions/aws/ec2-network.ts';
import type { Ec2RetryOptions, Sleep } from '../../../functions/aws/ec2-retry.ts';
import type { Ec2NetworkPort } from '../../../functions/core/ports.ts';
import {
  type ClusterSeed,
  createManualClock,
  type Ec2Emulator,
  type ManualClock,
  startEc2Emulator,
} from '../../emulators/ec2/index.ts';
import { stackFunctionIdentities } from '../../support/stack-policies.ts';

/**
 * One EC2 emulator per test, reached by the REAL EC2Client through the SDK's standard
 * configuration (AWS_ENDPOINT_URL_EC2, AWS_REGION, env credentials), exactly as in Lambda. The
 * emulator runs on a manual clock; the fixture's `sleep` advances that clock and is the adapter's,
 * so its waits for eventual consistency (`justCreated`, `justAttached`) take no real time.
 */
export interface Ec2Fixture {
  readonly emulator: Ec2Emulator;
  readonly seed: ClusterSeed;
  readonly clock: ManualClock;
  readonly client: EC2Client;
  readonly adapter: Ec2NetworkPort;
  /** A `Sleep` that advances the emulator clock instead of waiting, and records the wait. */
  readonly sleep: Sleep;
  /** Every wait asked of `sleep`, in ms. */
  readonly sleeps: number[];
  readonly clusterName: string;
  /** Launches a running instance in node subnet A. */
  launch(instanceType?: string): string;
  close(): Promise<void>;
}

const CLUSTER_NAME = 'unit-cluster';
const ACCESS_KEY_ID = 'AKIDEMULATOR';

/** Retries that take milliseconds, not seconds. */
const FAST_RETRY: Ec2RetryOptions = { maxAttempts: 4, baseDelayMs: 1, maxDelayMs: 5 };

export async function startEc2Fixture(
  options: {
    retry?: Partial<Ec2RetryOptions>;
    adapter?: Partial<Omit<Ec2NetworkAdapterOptions, 'client'>>;
    /** A dual-stack VPC (`seedCluster({ dualStack })`). */
    dualStack?: boolean;
  } = {},
): Promise<Ec2Fixture> {
  const clock = createManualClock();
  const emulator = await startEc2Emulator({ clock: clock.now, identities: {} });
  process.env.AWS_REGION = 'us-east-1';
  process.env.AWS_ACCESS_KEY_ID = ACCESS_KEY_ID;
  process.env.AWS_SECRET_ACCESS_KEY = 'emulator-secret';
  process.env.AWS_ENDPOINT_URL_EC2 = emulator.url;
  const seed = emulator.state.seedCluster({
    clusterName: CLUSTER_NAME,
    ...(options.dualStack ? { dualStack: true } : {}),
  });
  // The adapter runs as the allocate function's role, with the stack's policies for this cluster.
  emulator.setIdentity(
    ACCESS_KEY_ID,
    (await stackFunctionIdentities({ clusterName: CLUSTER_NAME, vpcId: seed.vpc.vpcId })).Allocate,
  );
  const client = createEc2Client({ retry: { ...FAST_RETRY, ...options.retry } });
  const sleeps: number[] = [];
  const sleep: Sleep = async (delayMs) => {
    sleeps.push(delayMs);
    clock.advance(delayMs);
  };
  const adapter = createEc2NetworkAdapter({
    clusterName: CLUSTER_NAME,
    ...options.adapter,
    notFoundRetry: { sleep, ...options.adapter?.notFoundRetry },
    client,
  });
  return {
    emulator,
    seed,
    clock,
    client,
    adapter,
    sleep,
    sleeps,
    clusterName: CLUSTER_NAME,
    launch: (instanceType = 'm5.large') =>
      emulator.state.launchInstance({
        instanceType,
        subnetId: seed.subnets.nodesA.subnetId,
        tags: { [`kubernetes.io/cluster/${CLUSTER_NAME}`]: 'owned' },
      }).instanceId,
    close: async () => {
      client.destroy();
      await emulator.close();
    },
  };
}
