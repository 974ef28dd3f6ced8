/**
 * The configuration contract between the stack and the functions: every environment variable a
 * function reads is defined here once, with its kind and its default, and every function lists
 * the variables it reads. The functions parse with these definitions (`runtime/environment.ts`:
 * no default is written anywhere else); the stack sets exactly a function's own variables
 * (`environmentFor`: a variable the function does not read cannot be set, a required one cannot
 * be left out); `test/infra/configuration-contract.test.ts` proves both ends for every function.
 * Pure data.
 */

export type VariableSpec =
  | { readonly kind: 'string'; readonly required: true; readonly description: string }
  | {
      readonly kind: 'string';
      readonly required?: false;
      readonly default?: string;
      readonly description: string;
    }
  | { readonly kind: 'integer'; readonly default: number; readonly description: string }
  | { readonly kind: 'boolean'; readonly default: boolean; readonly description: string }
  | { readonly kind: 'list'; readonly required: true; readonly description: string }
  | {
      readonly kind: 'json-string-map';
      readonly default: Readonly<Record<string, string>>;
      readonly description: string;
    }
  | {
      readonly kind: 'one-of';
      readonly values: readonly string[];
      readonly default: string;
      readonly description: string;
    };

export const CONFIGURATION_VARIABLES = {
  // ---- where things are
  TABLE_NAME: { kind: 'string', required: true, description: 'the node table (one item per node)' },
  LEDGER_TABLE_NAME: {
    kind: 'string',
    required: true,
    description: 'the IP ledger table (every assignment and release of an address)',
  },
  LEDGER_RETENTION_DAYS: {
    kind: 'integer',
    default: 90,
    description: 'how long a ledger entry is kept (its TTL), in days',
  },
  WATCH_TABLE_NAME: { kind: 'string', required: true, description: "the watcher's lease and progress table" },
  ALLOCATE_FUNCTION_NAME: {
    kind: 'string',
    required: true,
    description: 'the allocate function the watcher hands nodes to',
  },
  CLUSTER_NAME: { kind: 'string', required: true, description: 'the cluster; in every ownership tag' },
  CLUSTER_TAG_VALUES: {
    kind: 'list',
    required: true,
    description: 'values of kubernetes.io/cluster/<name> that mark an instance as a node',
  },
  // ---- how nodes are served
  NODE_NAMING: {
    kind: 'one-of',
    values: ['private-dns-name', 'instance-id'],
    default: 'private-dns-name',
    description: "how a CiliumNode is named after its instance (the kubelet's node name)",
  },
  PREFIX_DELEGATION: { kind: 'boolean', default: false, description: '/28 prefixes instead of single IPs' },
  RELEASE_EXCESS_IPS: { kind: 'boolean', default: false, description: 'release IPs above the watermark' },
  EXCESS_IP_RELEASE_DELAY_SECONDS: {
    kind: 'integer',
    default: 180,
    description: 'how long an IP stays excess before its release starts',
  },
  ENI_TAGS: { kind: 'json-string-map', default: {}, description: 'extra tags of every ENI we create' },
  ENI_GC_GRACE_MINUTES: {
    kind: 'integer',
    default: 10,
    description: 'how long a detached ENI of ours lives before garbage collection',
  },
  RETIRED_RECORD_RETENTION_DAYS: {
    kind: 'integer',
    default: 30,
    description: "how long a terminated node's record is kept",
  },
  LEASE_DURATION_SECONDS: {
    kind: 'integer',
    default: 15,
    description: "a mutating invocation's node lease, renewed every third of it while the invocation works",
  },
  CONSISTENCY_GRACE_SECONDS: {
    kind: 'integer',
    default: 60,
    description: 'how long EC2 Describe is not believed to have lost what we just assigned',
  },
  PAUSED: { kind: 'boolean', default: false, description: 'observe only: no EC2 mutation, no write' },
  // ---- the knobs for nodes whose agent has not registered (per-node CiliumNode values win)
  DEFAULT_PRE_ALLOCATE: { kind: 'integer', default: 8, description: 'spec.ipam.pre-allocate' },
  DEFAULT_MIN_ALLOCATE: { kind: 'integer', default: 0, description: 'spec.ipam.min-allocate' },
  DEFAULT_MAX_ALLOCATE: { kind: 'integer', default: 0, description: 'spec.ipam.max-allocate (0: no cap)' },
  DEFAULT_MAX_ABOVE_WATERMARK: {
    kind: 'integer',
    default: 0,
    description: 'spec.ipam.max-above-watermark',
  },
  DEFAULT_FIRST_INTERFACE_INDEX: {
    kind: 'integer',
    default: 0,
    description: 'spec.eni.first-interface-index',
  },
  CILIUM_CONFIG_NAMESPACE: {
    kind: 'string',
    default: 'kube-system',
    description: "the cilium-config ConfigMap's namespace (knobs before the agent registers)",
  },
  CILIUM_CONFIG_NAME: {
    kind: 'string',
    default: 'cilium-config',
    description: "the cilium-config ConfigMap's name",
  },
  CILIUM_VERSION: {
    kind: 'string',
    description: "the cluster's cilium version: which cilium-config keys its agents read",
  },
  // ---- concurrency and time budgets
  SYNC_CONCURRENCY: { kind: 'integer', default: 8, description: 'nodes one sync invocation writes at once' },
  WATCH_LEASE_SECONDS: { kind: 'integer', default: 30, description: "the watcher's single-flight lease" },
  WATCH_CONCURRENCY: {
    kind: 'integer',
    // cilium-operator's `--parallel-alloc-workers` default: nodes whose allocation runs at once.
    default: 50,
    description: 'nodes the watcher has served at once',
  },
  WATCH_NODES_PER_INVOCATION: {
    kind: 'integer',
    default: 10,
    description: 'most nodes one allocate invocation serves for the watcher (at once)',
  },
  WATCH_STANDBY_SECONDS: {
    kind: 'integer',
    default: 75,
    description: "how long a tick stands by for the holder's end",
  },
  WATCH_SECONDS: { kind: 'integer', default: 780, description: 'how long one watcher invocation watches' },
  DRAIN_SECONDS: {
    kind: 'integer',
    default: 90,
    description: "kept free before the watcher's timeout to finish the nodes being served",
  },
  // ---- the Kubernetes connection (kube-connection.ts): KUBECONFIG, else EKS IAM authentication
  KUBECONFIG: { kind: 'string', description: 'a kubeconfig path (local cloud, non-EKS clusters)' },
  EKS_CLUSTER_NAME: { kind: 'string', description: 'the EKS cluster the token is for' },
  EKS_ENDPOINT: { kind: 'string', description: "the EKS API server's https endpoint" },
  EKS_CA_DATA: { kind: 'string', description: "the API server's CA (base64 PEM)" },
} as const satisfies Record<string, VariableSpec>;

export type VariableName = keyof typeof CONFIGURATION_VARIABLES;

/** Set by the platform or by the function construct itself, not by the contract. */
export const PLATFORM_VARIABLES: readonly string[] = [
  'AWS_REGION',
  'NODE_OPTIONS',
  'POWERTOOLS_SERVICE_NAME',
  'POWERTOOLS_LOG_LEVEL',
  'POWERTOOLS_METRICS_NAMESPACE',
];

const KUBERNETES_CONNECTION = ['KUBECONFIG', 'EKS_CLUSTER_NAME', 'EKS_ENDPOINT', 'EKS_CA_DATA'] as const;
const DEFAULT_KNOBS = [
  'DEFAULT_PRE_ALLOCATE',
  'DEFAULT_MIN_ALLOCATE',
  'DEFAULT_MAX_ALLOCATE',
  'DEFAULT_MAX_ABOVE_WATERMARK',
  'DEFAULT_FIRST_INTERFACE_INDEX',
] as const;
/** allocate, sweep and garbage collection build the same dependencies. */
const ALLOCATING = [
  'TABLE_NAME',
  'CLUSTER_NAME',
  'CLUSTER_TAG_VALUES',
  'NODE_NAMING',
  'PREFIX_DELEGATION',
  'RELEASE_EXCESS_IPS',
  'EXCESS_IP_RELEASE_DELAY_SECONDS',
  'ENI_TAGS',
  'ENI_GC_GRACE_MINUTES',
  'RETIRED_RECORD_RETENTION_DAYS',
  'LEASE_DURATION_SECONDS',
  'CONSISTENCY_GRACE_SECONDS',
  'PAUSED',
  ...DEFAULT_KNOBS,
  'CILIUM_CONFIG_NAMESPACE',
  'CILIUM_CONFIG_NAME',
  'CILIUM_VERSION',
  ...KUBERNETES_CONNECTION,
] as const;

export type FunctionName = 'Allocate' | 'Sweep' | 'GarbageCollection' | 'Sync' | 'Watch' | 'Ledger';

/** What each function reads, and nothing else. */
export const FUNCTION_VARIABLES: Readonly<Record<FunctionName, readonly VariableName[]>> = {
  Allocate: ALLOCATING,
  Sweep: ALLOCATING,
  GarbageCollection: ALLOCATING,
  Sync: ['TABLE_NAME', 'SYNC_CONCURRENCY', 'PAUSED', ...KUBERNETES_CONNECTION],
  Ledger: ['LEDGER_TABLE_NAME', 'LEDGER_RETENTION_DAYS'],
  Watch: [
    'WATCH_TABLE_NAME',
    'ALLOCATE_FUNCTION_NAME',
    'PAUSED',
    ...DEFAULT_KNOBS,
    'WATCH_LEASE_SECONDS',
    'WATCH_CONCURRENCY',
    'WATCH_NODES_PER_INVOCATION',
    'WATCH_STANDBY_SECONDS',
    'WATCH_SECONDS',
    'DRAIN_SECONDS',
    // The allocate function's node lease: when to ask again for a node whose serving failed.
    'LEASE_DURATION_SECONDS',
    ...KUBERNETES_CONNECTION,
  ],
};

/** Whether the function cannot start without the variable. */
export function isRequired(name: VariableName): boolean {
  const spec: VariableSpec = CONFIGURATION_VARIABLES[name];
  return 'required' in spec && spec.required === true;
}

/**
 * The environment the stack gives `functionName`: its own variables among `values` (the stack's
 * values for every variable it sets), nothing else. Throws, naming them, when a variable the
 * function requires has no value, or when `values` sets a variable no function reads.
 */
export function environmentFor(
  functionName: FunctionName,
  values: Readonly<Partial<Record<VariableName, string>>>,
): Record<string, string> {
  const unknown = Object.keys(values).filter((name) => !(name in CONFIGURATION_VARIABLES));
  if (unknown.length > 0) {
    throw new Error(`no function reads ${unknown.join(', ')}: define it in CONFIGURATION_VARIABLES first`);
  }
  const own = FUNCTION_VARIABLES[functionName];
  const missing = own.filter((name) => isRequired(name) && values[name] === undefined);
  if (missing.length > 0) throw new Error(`${functionName} requires ${missing.join(', ')}`);
  const environment: Record<string, string> = {};
  for (const name of own) {
    const value = values[name];
    if (value !== undefined) environment[name] = value;
  }
  return environment;
}
