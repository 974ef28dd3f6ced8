import { randomBytes } from 'node:crypto';
import {
  FUNCTION_KUBERNETES_GROUPS,
  type IpamFunctionId,
  KUBERNETES_GROUPS,
  rbacObjects,
} from '../../infra/kubernetes-access.ts';
import type { Identity } from '../emulators/k8s/index.ts';

/**
 * Who each function of the local cloud is: as in the real account, every function runs as its own
 * role, and EKS maps that role to the Kubernetes group `infra/kubernetes-access.ts` names for it.
 * Each gets its own bearer token here (the EKS token of its role), so the Kubernetes emulator
 * authorizes its requests by that group's RBAC, from the same source as `rbac.yaml`.
 */

export interface FunctionIdentity {
  readonly functionId: string;
  readonly kubernetesToken: string;
  readonly kubernetes: Identity;
}

const FUNCTION_IDS = Object.keys(FUNCTION_KUBERNETES_GROUPS) as IpamFunctionId[];

/** The identity of every function without a Kubernetes group. */
const UNGROUPED = 'Ungrouped';

export function functionIdentities(account: string): readonly FunctionIdentity[] {
  return [...FUNCTION_IDS, UNGROUPED].map((functionId) => ({
    functionId,
    kubernetesToken: `k8s-aws-v1.local-${functionId}-${randomBytes(12).toString('hex')}`,
    kubernetes: {
      // The user name an EKS access entry gives an IAM role by default.
      user: `arn:aws:sts::${account}:assumed-role/${functionId}Role/${functionId}`,
      groups: functionId === UNGROUPED ? [] : [FUNCTION_KUBERNETES_GROUPS[functionId as IpamFunctionId].name],
    },
  }));
}

/** The user name of a person's identity (kubectl as a function's group): `local-person:sync`. */
export const PERSON_USER_PREFIX = 'local-person:';

/**
 * A person's identities beside the functions': one per function, with the function's group and
 * so its RBAC, but a user name of its own, so what a person tries with kubectl (`kubectl --context
 * sync auth can-i …`, a denied probe) answers as the function would be answered and is never
 * counted as the function's doing.
 */
export function personIdentities(): readonly FunctionIdentity[] {
  return FUNCTION_IDS.map((functionId) => ({
    functionId,
    kubernetesToken: `local-person-${functionId}-${randomBytes(12).toString('hex')}`,
    kubernetes: {
      user: `${PERSON_USER_PREFIX}${functionId.toLowerCase()}`,
      groups: [FUNCTION_KUBERNETES_GROUPS[functionId].name],
    },
  }));
}

/** The Kubernetes emulator's view: token → identity, plus the RBAC every group is granted. */
export function kubernetesAuthorization(identities: readonly FunctionIdentity[], adminToken: string) {
  return {
    identities: Object.fromEntries([
      [adminToken, { user: 'kubernetes-admin', groups: ['system:masters'] }],
      ...identities.map((identity) => [identity.kubernetesToken, identity.kubernetes]),
    ]) as Record<string, Identity>,
    rbac: rbacObjects(KUBERNETES_GROUPS),
  };
}

/**
 * The identity of a template function, by its logical id's prefix (the construct id). A function
 * the stack maps to no Kubernetes group (it never calls Kubernetes) is authenticated but granted
 * nothing: any Kubernetes request it made would be Forbidden.
 */
export function identityOfFunction(
  logicalId: string,
  identities: readonly FunctionIdentity[],
): FunctionIdentity {
  const grouped = identities.find(
    (candidate) => candidate.functionId !== UNGROUPED && logicalId.startsWith(candidate.functionId),
  );
  const identity = grouped ?? identities.find((candidate) => candidate.functionId === UNGROUPED);
  if (identity === undefined) throw new Error('functionIdentities always holds the ungrouped identity');
  return identity;
}

/**
 * The user cilium-operator runs as in a cluster (its service account), for the operator peer
 * (`peers/cilium-1.20`): the real server authenticates it by its own token and authorizes it by
 * cilium-operator's grants on CiliumNodes (`peers/cilium-1.20/operator-rbac.yaml`), nothing else.
 */
export const OPERATOR_PEER_USER = 'system:serviceaccount:kube-system:cilium-operator';

export function operatorPeerIdentity(): FunctionIdentity {
  return {
    functionId: 'CiliumOperatorPeer',
    kubernetesToken: `local-cilium-operator-${randomBytes(12).toString('hex')}`,
    kubernetes: { user: OPERATOR_PEER_USER, groups: [] },
  };
}
