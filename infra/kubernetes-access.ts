/**
 * Kubernetes access, from one source: the groups the functions' IAM roles are mapped to (by the
 * stack's EKS access entries, or by aws-auth), and the RBAC rules each group is granted. The RBAC
 * manifest (`infra/kubernetes/rbac.yaml`, written by `npm run rbac`) is rendered from this module,
 * and the local cloud's Kubernetes emulator enforces the same rules for each function's identity.
 *
 * Least privilege: CiliumNodes only, and only the verbs the code uses (no `watch`: no function
 * watches). A function that needs more gets a rule here, never an edit of the YAML.
 */

export interface RbacRule {
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
}

const CILIUM_API_GROUP = 'cilium.io';

/** Allocate and sweep read knobs (spec.ipam.*, spec.eni.*) and demand (status.ipam.used). */
export const CILIUMNODE_READER: KubernetesGroup = {
  name: 'serverless-eni-ipam-reader',
  rules: [
    {
      apiGroups: [CILIUM_API_GROUP],
      resources: ['ciliumnodes'],
      verbs: ['get', 'list'],
      reason: 'allocate GETs the CiliumNode of the node it serves; sweep LISTs every CiliumNode',
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

export const KUBERNETES_GROUPS: readonly KubernetesGroup[] = [CILIUMNODE_READER, CILIUMNODE_WRITER];

/** The stack's functions by construct id (the prefix of their logical ids in the template). */
export type IpamFunctionId = 'Allocate' | 'Sweep' | 'Sync';

/** The one group each function's role is mapped to. */
export const FUNCTION_KUBERNETES_GROUPS: Readonly<Record<IpamFunctionId, KubernetesGroup>> = {
  Allocate: CILIUMNODE_READER,
  Sweep: CILIUMNODE_READER,
  Sync: CILIUMNODE_WRITER,
};

/** The ClusterRole and ClusterRoleBinding of every group, as `kubectl apply` takes them. */
export function rbacObjects(groups: readonly KubernetesGroup[] = KUBERNETES_GROUPS): object[] {
  return groups.flatMap((group) => [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: group.name },
      rules: group.rules.map(({ apiGroups, resources, verbs }) => ({
        apiGroups: [...apiGroups],
        resources: [...resources],
        verbs: [...verbs],
      })),
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: group.name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: group.name },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: group.name }],
    },
  ]);
}
