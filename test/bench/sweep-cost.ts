import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EC2Client } from '@aws-sdk/client-ec2';
import { createEc2NetworkAdapter } from '../../functions/aws/ec2-network.ts';
import { withInstanceLimitsCatalog } from '../../functions/aws/instance-limits.ts';
import { tableGenerationOf } from '../../functions/aws/table-generation.ts';
import { forEachWithConcurrency } from '../../functions/core/concurrency.ts';
import type { Log } from '../../functions/core/ports.ts';
import { KubernetesCiliumNodeApi } from '../../functions/k8s/ciliumnode-api.ts';
import { buildKubeConfig } from '../../functions/k8s/kube-config.ts';
import { Environment, readDefaultKnobs } from '../../functions/runtime/environment.ts';
import { allocateNode } from '../../functions/services/allocate-node.ts';
import { syncNode } from '../../functions/services/sync-node.ts';
import { EC2_ADMINISTRATOR } from '../emulators/ec2/authorization.ts';
import { DEFAULT_TOKEN, kubeconfigYaml } from '../emulators/k8s/index.ts';
import { registerCiliumNode } from '../local-cloud/cilium-agent.ts';
import { startLocalCloud } from '../local-cloud/local-cloud.ts';
import type { SynthesizedStack } from '../local-cloud/synthesize.ts';
import { dynamoItemSizeBytes } from '../support/item-size.ts';
import { nowMs, startTap } from './tap.ts';

/**
 * One steady-state sweep (nothing changed since the last one) at a given cluster size: a fresh
 * local cloud is brought to N allocated and published nodes directly (the allocation and sync
 * services in-process, no throttling), then the stack's Sweep function runs once, then its other
 * scheduled work of the same shape: the resync (the Sync function with `{"all":true}`, every
 * minute) and the ENI garbage collection (every 5 minutes). What each cost is read off recording
 * pass-throughs: EC2 calls, DynamoDB read units (an eventually consistent Scan: half a unit per 4 KB
 * of items; a strongly consistent GetItem of a node item: one), bytes listed from the API server,
 * and the invocation's milliseconds.
 */

export interface InvocationCost {
  readonly ec2Calls: Readonly<Record<string, number>>;
  readonly dynamoDbReadUnits: number;
  readonly dynamoDbWrites: number;
  readonly kubernetesListBytes: number;
  readonly kubernetesWrites: number;
  readonly lambdaMs: number;
  /** Set when the invocation did not succeed (e.g. its 5-minute timeout): what it answered. */
  readonly failure?: string;
}

export interface SweepCost extends InvocationCost {
  readonly nodes: number;
  readonly resync: InvocationCost;
  readonly garbageCollection: InvocationCost;
}

const SILENT: Log = { debug() {}, info() {}, warn() {}, error() {} };

export async function measureSweepCost(
  stack: SynthesizedStack,
  dynamoDbEndpoint: string,
  nodes: number,
  progress: (line: string) => void,
): Promise<SweepCost> {
  const ec2Tap = await startTap({ service: 'ec2' });
  const dynamoDbTap = await startTap({ service: 'dynamodb', upstream: dynamoDbEndpoint });
  const k8sTap = await startTap({ service: 'kubernetes' });
  const taps = [ec2Tap, dynamoDbTap, k8sTap];
  const workDirectory = mkdtempSync(join(tmpdir(), 'bench-sweep-cost-'));
  const kubeconfigPath = join(workDirectory, 'kubeconfig');
  writeFileSync(kubeconfigPath, kubeconfigYaml(k8sTap.url, DEFAULT_TOKEN));
  const cloud = await startLocalCloud({
    stack,
    dynamoDbEndpoint,
    runSchedules: false,
    ec2Events: false,
    simulateAgents: false,
    // The emulator, for its speed at thousands of nodes.
    kubernetesBackend: 'emulator',
    streamPollIntervalMs: 3_600_000,
    maxConcurrencyPerFunction: 1,
    environment: {
      AWS_ENDPOINT_URL_EC2: ec2Tap.url,
      AWS_ENDPOINT_URL_DYNAMODB: dynamoDbTap.url,
      KUBECONFIG: kubeconfigPath,
    },
  });
  try {
    ec2Tap.setUpstream(cloud.ec2.url);
    k8sTap.setUpstream(cloud.k8s.url);
    progress(`  sweep cost at ${nodes} nodes: allocating and publishing every node...`);
    await populate(cloud, nodes);
    let itemBytes = 0;
    for (const record of (await cloud.records()).values()) itemBytes += dynamoItemSizeBytes(record);
    const costOf = async (functionName: string, payload: unknown): Promise<InvocationCost> => {
      const marks = taps.map((tap) => tap.records.length);
      const started = nowMs();
      const result = await cloud.invoke(functionName, payload);
      const lambdaMs = nowMs() - started;
      // A failed run is a figure too (at some size it outgrows its timeout): reported, not thrown.
      const failure =
        result.status === 'succeeded'
          ? undefined
          : `${result.error?.errorType ?? 'failed'}: ${result.error?.errorMessage ?? JSON.stringify(result)}`;
      const ec2Calls: Record<string, number> = {};
      for (const record of ec2Tap.records.slice(marks[0]))
        ec2Calls[record.operation] = (ec2Calls[record.operation] ?? 0) + 1;
      const ddb = dynamoDbTap.records.slice(marks[1]);
      const k8s = k8sTap.records.slice(marks[2]);
      const scans = ddb.some((record) => record.operation === 'Scan');
      const getItems = ddb.filter((record) => record.operation === 'GetItem').length;
      return {
        ec2Calls,
        dynamoDbReadUnits: (scans ? Math.ceil(itemBytes / 4096) / 2 : 0) + getItems,
        dynamoDbWrites: ddb.filter((record) => record.operation === 'PutItem').length,
        kubernetesListBytes: k8s
          .filter((record) => record.method === 'GET' && /ciliumnodes(\?|$)/.test(record.path))
          .reduce((sum, record) => sum + (record.responseBytes ?? 0), 0),
        kubernetesWrites: k8s.filter((record) => record.method !== 'GET').length,
        lambdaMs,
        ...(failure === undefined ? {} : { failure }),
      };
    };
    const sweep = await costOf('Sweep', { task: 'sweep' });
    const resync = await costOf('Sync', { all: true });
    const garbageCollection = await costOf('GarbageCollection', { task: 'eni-garbage-collection' });
    return { nodes, ...sweep, resync, garbageCollection };
  } finally {
    await cloud.stop();
    await Promise.all(taps.map((tap) => tap.close()));
    rmSync(workDirectory, { recursive: true, force: true });
  }
}

/** N running members, each allocated and published as its EC2 event would have left it. */
async function populate(cloud: Awaited<ReturnType<typeof startLocalCloud>>, nodes: number): Promise<void> {
  const { state } = cloud.ec2;
  const { cluster } = cloud;
  const allocate = cloud.model.functions.find((definition) => definition.logicalId.startsWith('Allocate'));
  const environment = new Environment((allocate?.environment ?? {}) as Record<string, string>);
  const clusterName = cluster.clusterName;
  // Setting the cluster up is not what is measured: it runs as an EC2 administrator (the emulator
  // authorizes every call by its access key), the measured sweep as its own synthesized role.
  cloud.ec2.setIdentity('bench', EC2_ADMINISTRATOR);
  const client = new EC2Client({
    region: 'us-east-1',
    endpoint: cloud.ec2.url,
    credentials: { accessKeyId: 'bench', secretAccessKey: 'bench' },
  });
  const ec2 = withInstanceLimitsCatalog(createEc2NetworkAdapter({ client, clusterName }));
  const kubeConfig = buildKubeConfig(
    { kind: 'kubeconfig', path: cloud.k8s.writeKubeconfig() },
    { credentials: async () => ({ accessKeyId: 'unused', secretAccessKey: 'unused' }) },
  );
  const ciliumNodes = new KubernetesCiliumNodeApi(kubeConfig);
  const store = cloud.table.store;
  // Stamped with this table's generation, as the stack's allocate function stamps them: a record
  // without the stamp is one the sweep must reconcile (restore safety), which is not steady state.
  const tableGeneration = tableGenerationOf(cloud.table.client, cloud.table.name);
  // Room for 5000 nodes' addresses (about 11 each: eth0, and an ENI or two at the pre-allocate
  // watermark): three /18 node subnets in two AZs, and two /18s in the VPC's secondary CIDR that
  // the ENIs may take from too.
  const addSubnet = (cidrBlock: string, index: number) =>
    state.addSubnet({
      vpcId: cluster.vpc.vpcId,
      availabilityZone: cluster.availabilityZones[index % 2] as string,
      cidrBlock,
      tags: { Name: `sweep-cost-${index}` },
    });
  const subnets = ['10.0.64.0/18', '10.0.128.0/18', '10.0.192.0/18'].map(addSubnet);
  for (const [index, cidrBlock] of ['100.64.64.0/18', '100.64.128.0/18'].entries())
    addSubnet(cidrBlock, index + 3);
  const instances = Array.from({ length: nodes }, (_, index) =>
    state.launchInstance({
      instanceType: index % 3 === 2 ? 't3.medium' : 'm5.large',
      subnetId: (subnets[index % subnets.length] as (typeof subnets)[number]).subnetId,
      securityGroupIds: [cluster.securityGroups.nodes.groupId],
      tags: { [`kubernetes.io/cluster/${clusterName}`]: 'owned' },
    }),
  );
  await forEachWithConcurrency(instances, 32, (instance) =>
    registerCiliumNode(cloud.k8s, instance.privateDnsName, instance.instanceId),
  );
  const syncDependencies = { store, ciliumNodes, log: SILENT, tableGeneration };
  await forEachWithConcurrency(instances, 32, async (instance) => {
    await allocateNode(instance.instanceId, {
      store,
      ec2,
      ciliumNodes,
      publish: (record, ciliumNode) => syncNode(record.instanceId, syncDependencies, { record, ciliumNode }),
      tableGeneration,
      preAgentKnobs: async () => readDefaultKnobs(environment),
      settings: {
        clusterName,
        clusterTagValues: ['owned', 'shared'],
        nodeNaming: 'private-dns-name',
        defaultKnobs: readDefaultKnobs(environment),
        prefixDelegationEnabled: false,
        leaseDurationMs: 180_000,
        consistencyGraceMs: 0,
        maxRoundsPerInvocation: 32,
        maxAttachAttempts: 5,
      },
      clock: Date.now,
      log: SILENT,
      invocationId: randomUUID(),
    });
    // What the table's stream sync does after the allocation: publish its last version (the one
    // that records delete-on-termination, which the allocation leaves to the stream).
    await syncNode(instance.instanceId, syncDependencies);
  });
}
