import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateTableCommand,
  DeleteTableCommand,
  DynamoDBClient,
  UpdateTimeToLiveCommand,
} from '@aws-sdk/client-dynamodb';
import { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import { DynamoNodeRecordStore } from '../../functions/aws/node-table.ts';
import { Ec2Authorizer } from '../emulators/ec2/authorization.ts';
import {
  type ClusterSeed,
  type Ec2Emulator,
  type IamIdentity,
  startEc2Emulator,
} from '../emulators/ec2/index.ts';
import { writeKubeconfig } from '../emulators/k8s/index.ts';
import { type DynamoDbLocal, startDynamoDbLocal } from '../support/dynamodb-local.ts';
import {
  type KubernetesBackend,
  type KubernetesOptions,
  type KubernetesUnderTest,
  startKubernetes,
} from '../support/kubernetes.ts';
import { identityOfFunction } from './identities.ts';
import { assertLoopback, LOCAL_ACCOUNT, LOCAL_REGION, physicalName } from './local-account.ts';
import { LOCAL_OPERATOR_CREDENTIALS } from './local-operator.ts';
import type { ShiftableClock } from './shiftable-clock.ts';
import {
  type SimulatedAgents,
  type SimulatedAgentsOptions,
  startSimulatedAgents,
} from './simulated-agents.ts';
import { type Denials, type DeniedInvoke, denialsOf } from './summary.ts';
import type { SynthesizedStack } from './synthesize.ts';
import { startOrUndo, type Teardown } from './teardown.ts';
import { type StackModel, type TableDefinition, TemplateError } from './template.ts';

/**
 * The local cloud's stand-ins for the systems the functions talk to: DynamoDB Local (the real
 * engine; the template's tables are created on it), the EC2 emulator (a seeded cluster; IAM
 * authorizes every call by the caller's role) and the Kubernetes API: by default the real
 * kube-apiserver (with etcd, `npm run peers:build`), or the emulator where its speed matters (the
 * bench, the chaos runs); RBAC by each function role's group (`rbac.yaml`), each function reached
 * through a kubeconfig with its role's own token. The cluster's nodes register
 * their CiliumNodes as cilium-agent would (`agents`). They start before the stack is known, so
 * they come up while it synthesizes; `createStackResources` then creates what the stack declares.
 */

export interface StandInsOptions extends SimulatedAgentsOptions {
  /** Use a running DynamoDB Local (e.g. the test run's); default: start one for this cloud. */
  readonly dynamoDbEndpoint?: string;
  /** Options for the EC2 emulator (throttling, eventual consistency...). */
  readonly ec2?: Parameters<typeof startEc2Emulator>[0];
  /** Where the functions' kubeconfigs point (e.g. a proxy in front of the emulator); default the server's `url`. */
  readonly kubernetesUrl?: string;
  /** The Kubernetes API server: `kube-apiserver` (default) or the `emulator`. */
  readonly kubernetesBackend?: KubernetesBackend;
  /** CiliumNode CRD generations, the first one served (`KubernetesOptions.schemas`); default the server's. */
  readonly kubernetesSchemas?: KubernetesOptions['schemas'];
}

/** The table whose stream feeds a function: the node table. */
export interface NodeTable {
  readonly logicalId: string;
  readonly name: string;
  readonly streamArn: string;
  readonly endpoint: string;
  readonly client: DynamoDBClient;
  readonly store: DynamoNodeRecordStore;
}

/** What the stack declares, created on the stand-ins. */
export interface StackResources {
  /** The cluster the stack was synthesized for, seeded in the EC2 emulator. */
  readonly clusterName: string;
  readonly cluster: ClusterSeed;
  readonly nodeTable: NodeTable;
  /** `Ref` of a table of the template: its physical name; undefined for any other resource. */
  tableRef(logicalId: string): string | undefined;
  /** `Fn::GetAtt` of a table (`Arn`, and `StreamArn` of the node table); undefined otherwise. */
  tableAttribute(logicalId: string, attribute: string): string | undefined;
}

/** IAM as the stand-ins enforce it: which role an access key is, and what that role may call. */
export interface LocalIam {
  /** Makes `accessKeyId` the session of `identity`'s role: EC2 and the Lambda Invoke API authorize it by its policies. */
  assumeRole(accessKeyId: string, identity: IamIdentity): void;
  /**
   * `lambda:InvokeFunction` on `resourceArn` by the key's role, as IAM decides it: the denial
   * message (an unknown key's token is invalid), or undefined when allowed. Denials are counted
   * in `StandIns.denials`.
   */
  invokeDenial(accessKeyId: string, functionName: string, resourceArn: string): Promise<string | undefined>;
}

export interface StandIns {
  readonly ec2: Ec2Emulator;
  /** The Kubernetes API server the functions and the simulated agents use. */
  readonly k8s: KubernetesUnderTest;
  /** DynamoDB Local, and this process's own clients of it (table setup, stream polling). */
  readonly dynamoDb: {
    readonly endpoint: string;
    readonly client: DynamoDBClient;
    readonly streamsClient: DynamoDBStreamsClient;
  };
  /** A cluster admin's kubeconfig (each function has its own, with its role's group). */
  readonly kubeconfigPath: string;
  readonly agents: SimulatedAgents;
  readonly iam: LocalIam;
  /** Writes the kubeconfig of the function's role (its EKS token) and returns its path; once per role. */
  kubeconfigOf(functionLogicalId: string): string;
  /** Creates the template's tables and seeds the stack's cluster; the tables go with `stop`. */
  createStackResources(stack: SynthesizedStack, model: StackModel): Promise<StackResources>;
  /** EC2 calls IAM denied, Kubernetes requests refused (401/403) and invokes IAM denied, since the start. */
  denials(): Promise<Denials>;
  stop(): Promise<void>;
}

/** The credentials of this process's own DynamoDB clients (DynamoDB Local accepts any). */
const LOCAL_CREDENTIALS = {
  accessKeyId: 'AKIDLOCALCLOUD',
  secretAccessKey: 'local-cloud-secret',
  sessionToken: 'local-cloud-session',
};

/** Starts DynamoDB Local (unless one is given), the EC2 emulator and the Kubernetes API server, together. */
export function startStandIns(
  options: StandInsOptions,
  clock: ShiftableClock | undefined,
): Promise<StandIns> {
  return startOrUndo(async (teardown) => {
    const { dynamoDbLocal, ec2, k8s } = await startServers(options, teardown);
    // The server's own identities (a token per function role): the fleet's kubeconfigs use them.
    const identities = k8s.identities;
    if (clock !== undefined) ec2.setClock(clock.now);
    const dynamoDb = dynamoDbClientsOf(options.dynamoDbEndpoint ?? (dynamoDbLocal as DynamoDbLocal).endpoint);
    teardown.add(
      () => dynamoDb.client.destroy(),
      () => dynamoDb.streamsClient.destroy(),
    );

    const workDirectory = mkdtempSync(join(tmpdir(), 'local-cloud-'));
    teardown.add(() => rmSync(workDirectory, { recursive: true, force: true }));
    const kubernetesUrl = options.kubernetesUrl ?? k8s.url;
    assertLoopback(kubernetesUrl);
    const agents = startSimulatedAgents(ec2, k8s, options);
    teardown.add(() => agents.stop());
    const invokes = invokeAuthorization();
    return {
      ec2,
      k8s,
      dynamoDb,
      kubeconfigPath: k8s.writePersonKubeconfig(workDirectory),
      agents,
      iam: {
        assumeRole: (accessKeyId, identity) => {
          ec2.setIdentity(accessKeyId, identity);
          invokes.assumeRole(accessKeyId, identity);
        },
        invokeDenial: invokes.denial,
      },
      kubeconfigOf: (functionLogicalId) => {
        const identity = identityOfFunction(functionLogicalId, identities);
        const directory = join(workDirectory, identity.functionId);
        // Several functions share the ungrouped identity (garbage collection, the ledger).
        mkdirSync(directory, { recursive: true });
        if (kubernetesUrl === k8s.url) return k8s.writeKubeconfig(directory, identity.kubernetesToken);
        if (k8s.controlPlane !== undefined) {
          return k8s.controlPlane.writeKubeconfig(directory, identity.kubernetesToken, kubernetesUrl);
        }
        return writeKubeconfig(kubernetesUrl, directory, identity.kubernetesToken);
      },
      createStackResources: async (stack, model) => {
        const resources = await createStackResources(stack, model, dynamoDb, ec2);
        // A DynamoDB Local of our own goes with its tables; a shared one keeps running without them.
        if (options.dynamoDbEndpoint !== undefined) teardown.add(() => resources.deleteTables());
        return resources;
      },
      // The functions' requests the server refused (401/403): its audit log, or the emulator's log.
      denials: async () =>
        denialsOf(ec2.calls.log, await k8s.requests(), invokes.denied, PERSON_ACCESS_KEY_IDS),
      stop: () => teardown.run(),
    };
  });
}

/**
 * The three servers, started at once; each one that started is registered with `teardown` before
 * the first failure (if any) is thrown.
 */
async function startServers(
  options: StandInsOptions,
  teardown: Teardown,
): Promise<{ dynamoDbLocal: DynamoDbLocal | undefined; ec2: Ec2Emulator; k8s: KubernetesUnderTest }> {
  const [dynamoDbOutcome, ec2Outcome, k8sOutcome] = await Promise.allSettled([
    options.dynamoDbEndpoint === undefined ? startDynamoDbLocal() : Promise.resolve(undefined),
    // Only the functions' own access keys authenticate; each is given its role's policies (`iam.assumeRole`).
    startEc2Emulator({ ...options.ec2, identities: {} }),
    startKubernetes({
      backend: options.kubernetesBackend ?? 'kube-apiserver',
      account: LOCAL_ACCOUNT,
      ...(options.kubernetesSchemas === undefined ? {} : { schemas: options.kubernetesSchemas }),
    }),
  ]);
  if (dynamoDbOutcome.status === 'fulfilled' && dynamoDbOutcome.value) {
    const dynamoDbLocal = dynamoDbOutcome.value;
    teardown.add(() => dynamoDbLocal.stop());
  }
  if (ec2Outcome.status === 'fulfilled') teardown.add(() => ec2Outcome.value.close());
  if (k8sOutcome.status === 'fulfilled') teardown.add(() => k8sOutcome.value.close());
  return {
    dynamoDbLocal: fulfilled(dynamoDbOutcome),
    ec2: fulfilled(ec2Outcome),
    k8s: fulfilled(k8sOutcome),
  };
}

/** This process's own clients of DynamoDB Local at `endpointUrl` (a trailing slash dropped; loopback only). */
function dynamoDbClientsOf(endpointUrl: string): StandIns['dynamoDb'] {
  const endpoint = endpointUrl.replace(/\/$/, '');
  assertLoopback(endpoint);
  const clientConfig = { region: LOCAL_REGION, credentials: LOCAL_CREDENTIALS, endpoint };
  return {
    endpoint,
    client: new DynamoDBClient(clientConfig),
    streamsClient: new DynamoDBStreamsClient(clientConfig),
  };
}

function fulfilled<T>(outcome: PromiseSettledResult<T>): T {
  if (outcome.status === 'rejected') throw outcome.reason;
  return outcome.value;
}

/** The access keys a person holds (the local operator's): their denials are reported apart. */
const PERSON_ACCESS_KEY_IDS: ReadonlySet<string> = new Set([LOCAL_OPERATOR_CREDENTIALS.accessKeyId]);

/** Lambda's side of IAM: `lambda:InvokeFunction` decided by the caller's role, denials recorded. */
function invokeAuthorization() {
  const authorizers = new Map<string, Ec2Authorizer>();
  const denied: DeniedInvoke[] = [];
  return {
    denied,
    assumeRole: (accessKeyId: string, identity: IamIdentity) =>
      authorizers.set(accessKeyId, new Ec2Authorizer(identity, LOCAL_ACCOUNT)),
    denial: async (accessKeyId: string, functionName: string, resourceArn: string) => {
      const authorizer = authorizers.get(accessKeyId);
      const denial =
        authorizer === undefined
          ? { message: `The security token included in the request is invalid (${accessKeyId})` }
          : await authorizer.firstDenial([
              { action: 'lambda:InvokeFunction', resourceArn, resourceAccount: LOCAL_ACCOUNT, context: {} },
            ]);
      if (denial === undefined) return undefined;
      denied.push({ functionName, accessKeyId });
      return denial.message;
    },
  };
}

/**
 * The template's tables, as CloudFormation would create them, and its cluster. The node table is
 * the one whose stream feeds a function; any other table (the watcher's state) is created as the
 * template declares it, without a stream.
 */
async function createStackResources(
  stack: SynthesizedStack,
  model: StackModel,
  dynamoDb: StandIns['dynamoDb'],
  ec2: Ec2Emulator,
): Promise<StackResources & { deleteTables(): Promise<void> }> {
  const streamedTables = model.tables.filter((table) =>
    model.streamMappings.some((mapping) => mapping.tableLogicalId === table.logicalId),
  );
  const [nodeTableDefinition, ...otherStreamedTables] = streamedTables;
  if (nodeTableDefinition === undefined || otherStreamedTables.length > 0) {
    throw new TemplateError(
      `expected exactly one DynamoDB table with a stream mapping in ${stack.stackName}, found ${streamedTables.length}`,
    );
  }
  const clusterName = clusterNameOf(stack);
  const cluster = ec2.state.seedCluster({ clusterName });
  const created = await createTableFromTemplate(dynamoDb.client, stack.stackName, nodeTableDefinition);
  const nodeTable: NodeTable = {
    logicalId: nodeTableDefinition.logicalId,
    ...created,
    endpoint: dynamoDb.endpoint,
    client: dynamoDb.client,
    store: new DynamoNodeRecordStore(dynamoDb.client, created.name),
  };
  const tableNames = new Map([[nodeTable.logicalId, nodeTable.name]]);
  for (const definition of model.tables.filter((table) => table !== nodeTableDefinition)) {
    const { name } = await createTableFromTemplate(dynamoDb.client, stack.stackName, definition, {
      stream: false,
    });
    tableNames.set(definition.logicalId, name);
  }
  return {
    clusterName,
    cluster,
    nodeTable,
    tableRef: (logicalId) => tableNames.get(logicalId),
    tableAttribute: (logicalId, attribute) => {
      const name = tableNames.get(logicalId);
      if (name === undefined) return undefined;
      if (attribute === 'Arn') return `arn:aws:dynamodb:${LOCAL_REGION}:${LOCAL_ACCOUNT}:table/${name}`;
      return logicalId === nodeTable.logicalId && attribute === 'StreamArn' ? nodeTable.streamArn : undefined;
    },
    deleteTables: async () => {
      for (const name of tableNames.values()) {
        await dynamoDb.client.send(new DeleteTableCommand({ TableName: name }));
      }
    },
  };
}

/**
 * Creates a table from the template's `AWS::DynamoDB::Table` properties (keys, stream view type,
 * TTL attribute), as CloudFormation would: so the functions run against the table the stack
 * declares, not one the tests believe in.
 */
async function createTableFromTemplate(
  client: DynamoDBClient,
  stackName: string,
  definition: TableDefinition,
  options: { stream: boolean } = { stream: true },
): Promise<{ name: string; streamArn: string }> {
  if (!options.stream) {
    const name = physicalName(stackName, definition.logicalId);
    await client.send(
      new CreateTableCommand({
        TableName: name,
        KeySchema: [...definition.keySchema],
        AttributeDefinitions: [...definition.attributeDefinitions],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
    return { name, streamArn: '' };
  }
  if (definition.streamViewType === undefined) {
    throw new TemplateError(
      `${definition.logicalId} has no stream, but the stack maps its stream to a function`,
    );
  }
  const name = physicalName(stackName, definition.logicalId);
  const created = await client.send(
    new CreateTableCommand({
      TableName: name,
      KeySchema: [...definition.keySchema],
      AttributeDefinitions: [...definition.attributeDefinitions],
      BillingMode: definition.billingMode === 'PAY_PER_REQUEST' ? 'PAY_PER_REQUEST' : 'PROVISIONED',
      ...(definition.billingMode === 'PAY_PER_REQUEST'
        ? {}
        : { ProvisionedThroughput: { ReadCapacityUnits: 1000, WriteCapacityUnits: 1000 } }),
      StreamSpecification: { StreamEnabled: true, StreamViewType: definition.streamViewType },
    }),
  );
  if (definition.timeToLiveAttribute !== undefined) {
    await client.send(
      new UpdateTimeToLiveCommand({
        TableName: name,
        TimeToLiveSpecification: { AttributeName: definition.timeToLiveAttribute, Enabled: true },
      }),
    );
  }
  const streamArn = created.TableDescription?.LatestStreamArn;
  if (!streamArn) throw new Error(`DynamoDB Local created ${name} without a stream`);
  return { name, streamArn };
}

/**
 * The cluster the stack was synthesized for (context `eni-ipam:clusterName`), as the template
 * carries it: the allocating functions' CLUSTER_NAME.
 */
function clusterNameOf(stack: SynthesizedStack): string {
  for (const resource of Object.values(stack.template.Resources)) {
    const variables = (
      resource.Properties?.Environment as { Variables?: Record<string, unknown> } | undefined
    )?.Variables;
    if (typeof variables?.CLUSTER_NAME === 'string') return variables.CLUSTER_NAME;
  }
  throw new TemplateError(`no function of ${stack.stackName} names its cluster (CLUSTER_NAME)`);
}
