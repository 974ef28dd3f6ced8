/**
 * Kubernetes access, from one source: the groups the functions' IAM roles are mapped to (by the
 * stack's EKS access entries, or by aws-auth), and the RBAC rules each group is granted. The RBAC
 * manifest (`infra/kubernetes/rbac.yaml`, written by `npm run rbac`) is rendered from this module,
 * and the local cloud's Kubernetes emulator enforces the same rules for each function's identity.
 *
 * Least privilege: CiliumNodes, and the one ConfigMap the agent reads its knobs from
 * (`cilium-config`: `get` by resource name in its namespace, through a Role, never cluster-wide);
 * only the verbs the code uses (`watch` only for the watcher, which does nothing else). A function
 * that needs more gets a rule here, never an edit of the YAML.
 */

interface RbacRule {
  readonly apiGroups: readonly string[];
  readonly resources: readonly string[];
  readonly verbs: readonly string[];
  /** Why the rule exists: which code path makes these requests. */
  readonly reason: string;
}

export interface KubernetesGroup {
  /** The Kubernetes group name; also the name of its ClusterRole and ClusterRoleBinding. */
  readonly name: string;
  readonly rules: readonly RbacRule[];
  /**
   * Rules on the cilium-config ConfigMap only: a Role (and RoleBinding) of the group's name in the
   * ConfigMap's namespace, each rule limited to `resourceNames: [<its name>]`.
   */
  readonly ciliumConfigRules?: readonly RbacRule[];
}

/** Where cilium-agent's ConfigMap is; `eni-ipam:ciliumConfigNamespace` and `ciliumConfigName`. */
export interface ConfigMapLocation {
  readonly namespace: string;
  readonly name: string;
}

/** Where the cilium Helm chart puts it (`install/kubernetes/cilium/templates/cilium-configmap.yaml`). */
export const DEFAULT_CILIUM_CONFIG: ConfigMapLocation = { namespace: 'kube-system', name: 'cilium-config' };

const CILIUM_API_GROUP = 'cilium.io';
const CORE_API_GROUP = '';

/**
 * Allocate and sweep read knobs (spec.ipam.*, spec.eni.*) and demand (status.ipam.used,
 * spec.ipam.pools.requested), and publish the record version they just wrote with the sync's own
 * guarded patches (so new IPs are usable without waiting for the stream's sync).
 */
export const CILIUMNODE_ALLOCATOR: KubernetesGroup = {
  name: 'serverless-eni-ipam-allocator',
  rules: [
    {
      apiGroups: [CILIUM_API_GROUP],
      resources: ['ciliumnodes'],
      verbs: ['get', 'list', 'create', 'patch'],
      reason:
        'allocate GETs the CiliumNode of the node it serves; sweep LISTs every CiliumNode; both publish what they wrote as the sync does: create a missing CiliumNode with an empty pool, patch spec.ipam.pool and the record-version annotation (JSON Patch with a resourceVersion test)',
    },
    {
      apiGroups: [CILIUM_API_GROUP],
      resources: ['ciliumnodes/status'],
      verbs: ['patch'],
      reason:
        'allocate and sweep publish status.eni.enis, status.ipam.operator-status and the release handshake before the spec, as the sync does',
    },
  ],
  ciliumConfigRules: [
    {
      apiGroups: [CORE_API_GROUP],
      resources: ['configmaps'],
      verbs: ['get'],
      reason:
        'allocate and sweep GET cilium-config (at most once an invocation): the knobs an agent will register, for nodes whose agent has not yet',
    },
  ],
};

/** The sync publishes the record: status first, then spec. */
export const CILIUMNODE_WRITER: KubernetesGroup = {
  name: 'serverless-eni-ipam-writer',
  rules: [
    {
      apiGroups: [CILIUM_API_GROUP],
      resources: ['ciliumnodes'],
      verbs: ['get', 'list', 'create', 'patch'],
      reason:
        'sync GETs (one node) or LISTs (all) before writing; creates a missing CiliumNode with an empty pool; patches spec.ipam.pool and the record-version annotation (JSON Patch with a resourceVersion test)',
    },
    {
      apiGroups: [CILIUM_API_GROUP],
      resources: ['ciliumnodes/status'],
      verbs: ['patch'],
      reason: 'sync patches status.eni.enis, status.ipam.operator-status and the release handshake',
    },
  ],
};

/**
 * The watcher lists and watches CiliumNodes and does nothing else with them: it hands each node
 * to the allocate function, which reads the CiliumNode again itself.
 */
export const CILIUMNODE_WATCHER: KubernetesGroup = {
  name: 'serverless-eni-ipam-watcher',
  rules: [
    {
      apiGroups: [CILIUM_API_GROUP],
      resources: ['ciliumnodes'],
      verbs: ['list', 'watch'],
      reason:
        'watch LISTs every CiliumNode (at its start and after a 410 Gone) and WATCHes from the list’s resourceVersion',
    },
  ],
};

export const KUBERNETES_GROUPS: readonly KubernetesGroup[] = [
  CILIUMNODE_ALLOCATOR,
  CILIUMNODE_WRITER,
  CILIUMNODE_WATCHER,
];

/** The stack's functions by construct id (the prefix of their logical ids in the template). */
export type IpamFunctionId = 'Allocate' | 'Sweep' | 'Sync' | 'Watch';

/** The one group each function's role is mapped to. */
export const FUNCTION_KUBERNETES_GROUPS: Readonly<Record<IpamFunctionId, KubernetesGroup>> = {
  Allocate: CILIUMNODE_ALLOCATOR,
  Sweep: CILIUMNODE_ALLOCATOR,
  Sync: CILIUMNODE_WRITER,
  Watch: CILIUMNODE_WATCHER,
};

const RBAC_API_GROUP = 'rbac.authorization.k8s.io';

/**
 * The ClusterRole and ClusterRoleBinding of every group, and the Role and RoleBinding of every
 * group with cilium-config rules (in `ciliumConfig.namespace`, limited to `ciliumConfig.name`), as
 * `kubectl apply` takes them.
 */
export function rbacObjects(
  groups: readonly KubernetesGroup[] = KUBERNETES_GROUPS,
  ciliumConfig: ConfigMapLocation = DEFAULT_CILIUM_CONFIG,
): object[] {
  const subjects = (group: KubernetesGroup) => [
    { apiGroup: RBAC_API_GROUP, kind: 'Group', name: group.name },
  ];
  return groups.flatMap((group) => [
    {
      apiVersion: `${RBAC_API_GROUP}/v1`,
      kind: 'ClusterRole',
      metadata: { name: group.name },
      rules: group.rules.map(({ apiGroups, resources, verbs }) => ({
        apiGroups: [...apiGroups],
        resources: [...resources],
        verbs: [...verbs],
      })),
    },
    {
      apiVersion: `${RBAC_API_GROUP}/v1`,
      kind: 'ClusterRoleBinding',
      metadata: { name: group.name },
      roleRef: { apiGroup: RBAC_API_GROUP, kind: 'ClusterRole', name: group.name },
      subjects: subjects(group),
    },
    ...(group.ciliumConfigRules === undefined
      ? []
      : [
          {
            apiVersion: `${RBAC_API_GROUP}/v1`,
            kind: 'Role',
            metadata: { name: group.name, namespace: ciliumConfig.namespace },
            rules: group.ciliumConfigRules.map(({ apiGroups, resources, verbs }) => ({
              apiGroups: [...apiGroups],
              resources: [...resources],
              resourceNames: [ciliumConfig.name],
              verbs: [...verbs],
            })),
          },
          {
            apiVersion: `${RBAC_API_GROUP}/v1`,
            kind: 'RoleBinding',
            metadata: { name: group.name, namespace: ciliumConfig.namespace },
            roleRef: { apiGroup: RBAC_API_GROUP, kind: 'Role', name: group.name },
            subjects: subjects(group),
          },
        ]),
  ]);
}
