import { randomUUID } from 'node:crypto';
import type { EC2Client } from '@aws-sdk/client-ec2';
import { createEc2Client, createEc2NetworkAdapter } from '../../functions/aws/ec2-network.ts';
import type { Ec2RetryOptions, Sleep } from '../../functions/aws/ec2-retry.ts';
import { withInstanceLimitsCatalog } from '../../functions/aws/instance-limits.ts';
import type { CiliumNode } from '../../functions/core/ciliumnode.ts';
import type { Log } from '../../functions/core/ports.ts';
import { KubernetesCiliumNodeApi } from '../../functions/k8s/ciliumnode-api.ts';
import { buildKubeConfig } from '../../functions/k8s/kube-config.ts';
import type { AllocationDependencies, AllocationSettings } from '../../functions/services/allocate-node.ts';
import type { LifecycleDependencies } from '../../functions/services/node-lifecycle.ts';
import type { SweepDependencies } from '../../functions/services/sweep.ts';
import { syncNode } from '../../functions/services/sync-node.ts';
import {
  type ClusterSeed,
  createManualClock,
  type Ec2Emulator,
  type Ec2EmulatorOptions,
  type IamIdentity,
  type InstanceRecord,
  type ManualClock,
  startEc2Emulator,
} from '../emulators/ec2/index.ts';
import type { SchemaVersion } from '../emulators/k8s/index.ts';
import { defaultKnobs } from '../fixtures/node-records.ts';
import {
  type KubernetesBackend,
  type KubernetesOptions,
  type KubernetesUnderTest,
  startKubernetes as startKubernetesUnderTest,
} from './kubernetes.ts';
import { createTestNodeTable, type TestNodeTable } from './node-table.ts';
import { stackFunctionIdentities } from './stack-policies.ts';

export const CLUSTER_NAME = 'scenario-cluster';
/** The allocator's access key in the EC2 emulator (its identity: the stack's Allocate role). */
export const ACCESS_KEY_ID = 'AKIAALLOCATEHARNESS0';

/** Where and how `launch` starts an instance. */
interface LaunchOptions {
  tags?: Record<string, string>;
  subnetId?: string;
  securityGroupIds?: string[];
  /** eth0's tags (a launch template's); default none, as EC2 creates it. */
  primaryNetworkInterfaceTags?: Record<string, string>;
}

/**
 * Everything the allocation talks to, for real: DynamoDB Local (a fresh node table), the EC2
 * emulator (seeded cluster, manual clock) reached by the real EC2Client, and kube-apiserver (one
 * per test file and CRD, reset for each harness) reached by the real client-node as the allocate
 * function's identity. Only the clock and the waits are ours: `sleep`
 * advances the manual clock, so eventual-consistency waits and lease expiry take no real time.
 */
export interface AllocationHarness {
  readonly ec2: Ec2Emulator;
  /** The allocate role's policies, as synthesized for this cluster (`ec2.setIdentity(ACCESS_KEY_ID, …)` changes them). */
  readonly identity: IamIdentity;
  readonly seed: ClusterSeed;
  readonly clock: ManualClock;
  readonly k8s: KubernetesUnderTest;
  readonly table: TestNodeTable;
  readonly ec2Client: EC2Client;
  /** The CiliumNode client the functions' dependencies use: the allocate function's identity. */
  readonly functionCiliumNodes: KubernetesCiliumNodeApi;
  /** A cluster admin's CiliumNode client, for what the test does itself (an agent's writes, fixtures). */
  readonly ciliumNodes: KubernetesCiliumNodeApi;
  /** A CiliumNode client as a function's identity (`Allocate`, `Sweep`, `Sync`, `Watch`). */
  ciliumNodesAs(functionId: string): KubernetesCiliumNodeApi;
  readonly settings: AllocationSettings;
  readonly logs: { level: string; message: string; fields?: Record<string, unknown> }[];
  dependencies(overrides?: Partial<AllocationDependencies>): AllocationDependencies;
  /**
   * The allocate function's dependencies as deployed: what it writes is published at once by the
   * sync's own code (`syncNode` with the record it wrote), as the Allocate identity.
   */
  publishingDependencies(overrides?: Partial<AllocationDependencies>): AllocationDependencies;
  lifecycle(): LifecycleDependencies;
  sweepDependencies(): SweepDependencies;
  /** A running cluster member in node subnet A. */
  launch(instanceType: string, options?: LaunchOptions): InstanceRecord;
  /** What an agent writes when it starts: its CiliumNode, named after the PrivateDnsName. */
  createCiliumNode(instance: InstanceRecord, spec?: Record<string, unknown>): Promise<CiliumNode>;
  /** ENIs attached to the instance beyond eth0, sorted by device index. */
  secondaryEnis(instanceId: string): ReturnType<Ec2Emulator['state']['networkInterfaces']>;
  close(): Promise<void>;
}

interface AllocationHarnessOptions {
  ec2?: Ec2EmulatorOptions;
  settings?: Partial<AllocationSettings>;
  retry?: Partial<Ec2RetryOptions>;
  /** CDK context the stack's policies are synthesized with (e.g. `eni-ipam:vpcOwnerAccountId`). */
  stackContext?: Record<string, unknown>;
  /** Let `close` pass although IAM denied calls (default false: a denied call fails the test). */
  allowDeniedCalls?: boolean;
  /** A dual-stack VPC: an IPv6 /64 on every node and pod subnet (`seedCluster({ dualStack })`). */
  dualStack?: boolean;
  /**
   * The CiliumNode CRD generations the cluster runs, the first one pruning (default: all four,
   * v1.19-dev first). A cluster of 1.20 agents with IPv6 runs `CRD_OF_MULTI_POOL_CLUSTERS`.
   */
  crdSchemas?: readonly SchemaVersion[];
  /**
   * Default `kube-apiserver`; `emulator` for a test that needs what only it has (its store's
   * compaction, its count of open watches).
   */
  kubernetes?: KubernetesBackend;
  /**
   * A kube-apiserver of the harness's own, stopped by `close` (for a test that kills and restarts
   * it, or one that needs its etcd compacted often and its watch cache off).
   */
  ownKubernetes?: boolean | Pick<KubernetesOptions, 'compactionInterval' | 'watchCache'>;
}

export async function startAllocationHarness(
  options: AllocationHarnessOptions = {},
): Promise<AllocationHarness> {
  const clock = createManualClock();
  const { ec2, seed, identity, ec2Client } = await startEc2AsAllocateRole(options, clock);
  const { k8s, ciliumNodes, functionCiliumNodes, clientAs } = await startKubernetes(options);
  const table = await createTestNodeTable();
  const settings = allocationSettings(options);
  const logs: AllocationHarness['logs'] = [];
  const log = recordingLog(logs);
  const sleep: Sleep = async (delayMs) => clock.advance(delayMs);
  const ec2Port = withInstanceLimitsCatalog(
    createEc2NetworkAdapter({ client: ec2Client, clusterName: CLUSTER_NAME, notFoundRetry: { sleep } }),
  );

  const harness: AllocationHarness = {
    ec2,
    identity,
    seed,
    clock,
    k8s,
    table,
    ec2Client,
    functionCiliumNodes,
    ciliumNodes,
    ciliumNodesAs: (functionId) => clientAs(k8s.tokenOf(functionId)),
    settings,
    logs,
    dependencies: (overrides = {}) => ({
      store: table.store,
      ec2: ec2Port,
      ciliumNodes: functionCiliumNodes,
      settings,
      clock: clock.now,
      log,
      invocationId: randomUUID(),
      // A deployment that reads no cilium-config, knows no table generation and leaves the
      // publishing to the stream's sync.
      preAgentKnobs: async () => settings.defaultKnobs,
      tableGeneration: async () => undefined,
      publish: async () => undefined,
      ...overrides,
    }),
    publishingDependencies: (overrides = {}) =>
      harness.dependencies({
        publish: (record, ciliumNode) =>
          syncNode(
            record.instanceId,
            { store: table.store, ciliumNodes: functionCiliumNodes, log },
            { record, ciliumNode },
          ),
        ...overrides,
      }),
    lifecycle: () => ({
      store: table.store,
      ec2: ec2Port,
      clock: clock.now,
      log,
      clusterName: CLUSTER_NAME,
      retiredRecordRetentionDays: 30,
    }),
    sweepDependencies: () => ({ ...harness.dependencies(), lifecycle: harness.lifecycle(), concurrency: 4 }),
    launch: (instanceType, launchOptions = {}) => launchClusterMember(ec2, seed, instanceType, launchOptions),
    createCiliumNode: (instance, spec = {}) =>
      ciliumNodes.create({
        apiVersion: 'cilium.io/v2',
        kind: 'CiliumNode',
        metadata: { name: instance.privateDnsName },
        spec: { 'instance-id': instance.instanceId, ...spec },
      }),
    secondaryEnis: (instanceId) =>
      ec2.state
        .networkInterfaces({ instanceId })
        .filter((eni) => (eni.attachment?.deviceIndex ?? 0) > 0)
        .sort((a, b) => (a.attachment?.deviceIndex ?? 0) - (b.attachment?.deviceIndex ?? 0)),
    close: async () => {
      ec2Client.destroy();
      const ownServer = k8s.backend === 'emulator' || (options.ownKubernetes ?? false) !== false;
      await Promise.all([ec2.close(), ownServer ? k8s.close() : Promise.resolve()]);
      // Every scenario proves the allocator made no call its role may not make, unless it is about that.
      const denied = ec2.calls.log.filter((call) => call.deniedByIam === true);
      if (denied.length > 0 && options.allowDeniedCalls !== true) {
        throw new Error(
          `IAM denied ${denied.length} EC2 call(s): ${denied.map((call) => call.action).join(', ')}`,
        );
      }
    },
  };
  return harness;
}

/**
 * The EC2 emulator on the manual clock, with a seeded cluster, and the real EC2Client signing as
 * the allocate function's role: the stack's policies for this cluster. Points this process's
 * AWS_ENDPOINT_URL_EC2 and AWS_ACCESS_KEY_ID at it, for the clients the code under test builds.
 */
async function startEc2AsAllocateRole(options: AllocationHarnessOptions, clock: ManualClock) {
  const ec2 = await startEc2Emulator({ clock: clock.now, ...options.ec2, identities: {} });
  const seed = ec2.state.seedCluster({
    clusterName: CLUSTER_NAME,
    ...(options.dualStack ? { dualStack: true } : {}),
  });
  const identity = (
    await stackFunctionIdentities({
      clusterName: CLUSTER_NAME,
      vpcId: seed.vpc.vpcId,
      region: ec2.state.region,
      ...(options.stackContext ? { context: options.stackContext } : {}),
    })
  ).Allocate;
  ec2.setIdentity(ACCESS_KEY_ID, identity);
  process.env.AWS_ENDPOINT_URL_EC2 = ec2.url;
  process.env.AWS_ACCESS_KEY_ID = ACCESS_KEY_ID;
  const ec2Client = createEc2Client({
    retry: { maxAttempts: 8, baseDelayMs: 1, maxDelayMs: 20, ...options.retry },
  });
  return { ec2, seed, identity, ec2Client };
}

/**
 * One kube-apiserver per test process (a test file) and CRD, shared by the file's harnesses and
 * reset for each; it ends with the process. The emulator is started afresh for each harness.
 */
const sharedServers = new Map<string, Promise<KubernetesUnderTest>>();

async function kubernetesFor(options: AllocationHarnessOptions): Promise<KubernetesUnderTest> {
  const schemas = options.crdSchemas ? { schemas: options.crdSchemas } : {};
  if (options.kubernetes === 'emulator') return startKubernetesUnderTest({ backend: 'emulator', ...schemas });
  if (options.ownKubernetes === true) return startKubernetesUnderTest(schemas);
  if (typeof options.ownKubernetes === 'object')
    return startKubernetesUnderTest({ ...schemas, ...options.ownKubernetes });
  const key = options.crdSchemas?.[0] ?? 'default';
  let server = sharedServers.get(key);
  if (server === undefined) {
    server = startKubernetesUnderTest(schemas);
    sharedServers.set(key, server);
  }
  const k8s = await server;
  await k8s.reset();
  return k8s;
}

/** The Kubernetes API with the requested CRD generations, and the real CiliumNode clients on it. */
async function startKubernetes(options: AllocationHarnessOptions) {
  const k8s = await kubernetesFor(options);
  const clientAs = (token: string) =>
    new KubernetesCiliumNodeApi(
      buildKubeConfig(
        { kind: 'kubeconfig', path: k8s.writeKubeconfig(undefined, token) },
        { credentials: async () => ({ accessKeyId: 'unused', secretAccessKey: 'unused' }) },
      ),
      { fieldManager: 'serverless-eni-ipam' },
    );
  return {
    k8s,
    clientAs,
    ciliumNodes: clientAs(k8s.token),
    functionCiliumNodes: clientAs(k8s.tokenOf('Allocate')),
  };
}

/** The deployment's allocation settings for the scenario cluster (pre-allocate 8), with `options.settings` on top. */
function allocationSettings(options: AllocationHarnessOptions): AllocationSettings {
  return {
    clusterName: CLUSTER_NAME,
    clusterTagValues: ['owned', 'shared'],
    nodeNaming: 'private-dns-name',
    defaultKnobs: { ...defaultKnobs, preAllocate: 8 },
    prefixDelegationEnabled: false,
    leaseDurationMs: 180_000,
    consistencyGraceMs: 60_000,
    maxRoundsPerInvocation: 32,
    maxAttachAttempts: 5,
    ...options.settings,
  };
}

/** A log that appends every line to `logs`, with its level. */
function recordingLog(logs: AllocationHarness['logs']): Log {
  const record =
    (level: string): Log['info'] =>
    (message, fields) => {
      logs.push({ level, message, ...(fields ? { fields } : {}) });
    };
  return { debug: record('debug'), info: record('info'), warn: record('warn'), error: record('error') };
}

/** A running instance tagged as a member of the scenario cluster; by default in node subnet A. */
function launchClusterMember(
  ec2: Ec2Emulator,
  seed: ClusterSeed,
  instanceType: string,
  launchOptions: LaunchOptions,
): InstanceRecord {
  return ec2.state.launchInstance({
    instanceType,
    subnetId: launchOptions.subnetId ?? seed.subnets.nodesA.subnetId,
    securityGroupIds: launchOptions.securityGroupIds ?? [seed.securityGroups.nodes.groupId],
    tags: { [`kubernetes.io/cluster/${CLUSTER_NAME}`]: 'owned', ...launchOptions.tags },
    ...(launchOptions.primaryNetworkInterfaceTags
      ? { primaryNetworkInterfaceTags: launchOptions.primaryNetworkInterfaceTags }
      : {}),
  });
}
