import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { createEc2Client, createEc2NetworkAdapter } from '../aws/ec2-network.ts';
import { withInstanceLimitsCatalog } from '../aws/instance-limits.ts';
import { DynamoNodeRecordStore } from '../aws/node-table.ts';
import { tableGenerationOf } from '../aws/table-generation.ts';
import { agentReadsNodeKeys } from '../core/cilium-config.ts';
import type { NodeKnobs } from '../core/model.ts';
import { kubernetesConnectionFromEnv } from '../k8s/kube-connection.ts';
import { LazyCiliumNodeApi } from '../k8s/lazy-ciliumnode-api.ts';
import { LazyConfigMapReader } from '../k8s/lazy-configmap-reader.ts';
import type { AllocationDependencies, AllocationSettings } from '../services/allocate-node.ts';
import type { LifecycleDependencies } from '../services/node-lifecycle.ts';
import { preAgentKnobsForInvocation } from '../services/pre-agent-knobs.ts';
import type { ReleaseSettings } from '../services/release-record.ts';
import { syncNode } from '../services/sync-node.ts';
import { Environment, readDefaultKnobs } from './environment.ts';
import type { createLog } from './logger.ts';

/** What a Lambda invocation needs besides its request id; built once per container. */
export type ContainerDependencies = Omit<AllocationDependencies, 'invocationId' | 'preAgentKnobs'> & {
  readonly lifecycle: LifecycleDependencies;
  readonly eniGarbageCollectionGraceMs: number;
  /** Excess-IP release: `RELEASE_EXCESS_IPS` (default false), `EXCESS_IP_RELEASE_DELAY_SECONDS` (default 180). */
  readonly release: ReleaseSettings;
  /**
   * A fresh `preAgentKnobs` for each invocation (the cluster's `cilium-config`, from
   * `CILIUM_CONFIG_NAMESPACE`/`CILIUM_CONFIG_NAME`, read at most once by it).
   */
  readonly preAgentKnobsForInvocation: () => () => Promise<NodeKnobs>;
  /** Starts loading the Kubernetes client (call when an invocation starts; see `LazyCiliumNodeApi`). */
  readonly prepareKubernetes: () => void;
};

/** The allocation's settings, each from its variable (defaults are the configuration contract's). */
function allocationSettings(environment: Environment): AllocationSettings {
  return {
    clusterName: environment.string('CLUSTER_NAME'),
    clusterTagValues: environment.list('CLUSTER_TAG_VALUES'),
    nodeNaming: environment.oneOf<'private-dns-name' | 'instance-id'>('NODE_NAMING'),
    defaultKnobs: readDefaultKnobs(environment),
    prefixDelegationEnabled: environment.boolean('PREFIX_DELEGATION'),
    // Short: the holder's heartbeat renews it while it works (`NodeLease`), so a killed or timed-out
    // invocation frees its node within one lease.
    leaseDurationMs: environment.integer('LEASE_DURATION_SECONDS') * 1000,
    consistencyGraceMs: environment.integer('CONSISTENCY_GRACE_SECONDS') * 1000,
    maxRoundsPerInvocation: 32,
    maxAttachAttempts: 5,
    paused: environment.boolean('PAUSED'),
  };
}

/**
 * Builds the allocating functions' dependencies from the environment the stack sets. Clients are
 * created here, once per container; endpoints come only from the SDK's standard configuration.
 */
export function buildAllocationDependencies(
  variables: Readonly<Record<string, string | undefined>>,
  log: ReturnType<typeof createLog>,
): ContainerDependencies {
  const environment = new Environment(variables);
  const settings = allocationSettings(environment);
  const { clusterName } = settings;
  const ec2Client = createEc2Client();
  // The adapter alone tags new ENIs: our ownership tags over the configured extra ones.
  const extraTags = environment.stringMap('ENI_TAGS');
  const ec2 = withInstanceLimitsCatalog(
    createEc2NetworkAdapter({ client: ec2Client, clusterName, extraTags }),
    {
      onFallback: (event) =>
        log.warn('instance limits from the static table', { ...event, error: String(event.error) }),
    },
  );
  const dynamoDb = new DynamoDBClient({});
  const tableName = environment.string('TABLE_NAME');
  const store = new DynamoNodeRecordStore(dynamoDb, tableName);
  const tableGeneration = tableGenerationOf(dynamoDb, tableName);
  const { ciliumConfig, ciliumNodes } = kubernetesReaders(variables, environment, ec2Client);
  const preAgentKnobSettings = {
    stackDefaults: settings.defaultKnobs,
    agentReadsNodeKeys: agentReadsNodeKeys(environment.optionalString('CILIUM_VERSION')),
  };
  return {
    store,
    ec2,
    ciliumNodes,
    prepareKubernetes: () => ciliumNodes.prepare(),
    // The sync's own checks: the record-version annotation counts in this table, and a record is
    // published only when stamped with it; paused, nothing is written.
    publish: (record, ciliumNode) =>
      syncNode(
        record.instanceId,
        { store, ciliumNodes, log, tableGeneration, paused: settings.paused },
        { record, ciliumNode },
      ),
    settings,
    clock: Date.now,
    log,
    tableGeneration,
    lifecycle: {
      store,
      ec2,
      clock: Date.now,
      log,
      clusterName,
      retiredRecordRetentionDays: environment.integer('RETIRED_RECORD_RETENTION_DAYS'),
    },
    eniGarbageCollectionGraceMs: environment.integer('ENI_GC_GRACE_MINUTES') * 60_000,
    // cilium-operator's --aws-release-excess-ips (off by default) and --excess-ip-release-delay (180 s).
    release: {
      enabled: environment.boolean('RELEASE_EXCESS_IPS'),
      delayMs: environment.integer('EXCESS_IP_RELEASE_DELAY_SECONDS') * 1000,
    },
    preAgentKnobsForInvocation: () => preAgentKnobsForInvocation(ciliumConfig, preAgentKnobSettings, log),
  };
}

/** The cluster's `cilium-config` reader and the CiliumNode client, both loaded on first use. */
function kubernetesReaders(
  variables: Readonly<Record<string, string | undefined>>,
  environment: Environment,
  ec2Client: ReturnType<typeof createEc2Client>,
) {
  const kubernetesConnection = kubernetesConnectionFromEnv(variables);
  const kubernetesCredentials = { credentials: () => ec2Client.config.credentials() };
  return {
    ciliumConfig: new LazyConfigMapReader(kubernetesConnection, kubernetesCredentials, {
      namespace: environment.string('CILIUM_CONFIG_NAMESPACE'),
      name: environment.string('CILIUM_CONFIG_NAME'),
    }),
    ciliumNodes: new LazyCiliumNodeApi(kubernetesConnection, kubernetesCredentials, {
      fieldManager: 'serverless-eni-ipam',
    }),
  };
}
