import type { Tags } from './model.ts';

/**
 * The tags on every ENI we create, set in CreateNetworkInterface's TagSpecifications so an ENI
 * never exists untagged (a crash between create and a separate CreateTags would leave an orphan
 * nobody can attribute). Each tag has a consumer:
 *
 * - `cluster.k8s.amazonaws.com/name`: the key AWS's scope-down IAM policy for ENI managers
 *   conditions on (`aws:RequestTag/...` on create, `aws:ResourceTag/...` on every later mutation),
 *   the same key amazon-vpc-cni uses.
 * - `io.cilium/cilium-managed`, `io.cilium/cluster-name`: cilium-operator's default ENI garbage
 *   collection tags, so a cluster that moves back to cilium-operator cleans up after us.
 * - `serverless-eni-ipam/instance-id`: the instance an ENI was made for; how a retry finds the
 *   ENI that a crashed attempt created but never attached (`findDetachedEnisCreatedFor`).
 * - `serverless-eni-ipam/owner`: marks the ENI as ours, apart from ENIs other tools create.
 */
export const ENI_TAG_KEYS = {
  clusterName: 'cluster.k8s.amazonaws.com/name',
  ciliumManaged: 'io.cilium/cilium-managed',
  ciliumClusterName: 'io.cilium/cluster-name',
  instanceId: 'serverless-eni-ipam/instance-id',
  owner: 'serverless-eni-ipam/owner',
  /** Creation time, epoch ms: ENI garbage collection leaves ENIs younger than its grace period alone. */
  createdAt: 'serverless-eni-ipam/created-at',
} as const;

export const OWNER_TAG_VALUE = 'serverless-eni-ipam';

const OWN_TAG_KEYS: ReadonlySet<string> = new Set(Object.values(ENI_TAG_KEYS));

/** The tags that identify an ENI as ours, made for `instanceId` in `clusterName`. */
export function ownershipTags(clusterName: string, instanceId: string): Tags {
  return {
    [ENI_TAG_KEYS.clusterName]: clusterName,
    [ENI_TAG_KEYS.ciliumManaged]: 'true',
    [ENI_TAG_KEYS.ciliumClusterName]: clusterName,
    [ENI_TAG_KEYS.instanceId]: instanceId,
    [ENI_TAG_KEYS.owner]: OWNER_TAG_VALUE,
  };
}

/**
 * Every tag a new ENI gets: the caller's `extraTags` (user-configured, then per-request ones, later
 * wins), and our ownership tags on top, which no extra tag may replace: IAM conditions, garbage
 * collection and crash recovery all depend on them. Use `validateExtraTags` at configuration time
 * so a conflicting configuration fails loudly instead of being overridden here.
 */
export function tagsForNewEni(
  clusterName: string,
  instanceId: string,
  ...extraTags: readonly (Tags | undefined)[]
): Tags {
  return Object.assign({}, ...extraTags, ownershipTags(clusterName, instanceId));
}

/**
 * Reasons a set of user-configured tags cannot go on our ENIs, empty when it can: keys we set
 * ourselves, keys in AWS's reserved `aws:` namespace (EC2 rejects them), and EC2's length limits
 * (keys 1..128, values up to 256 characters).
 */
export function validateExtraTags(tags: Tags): string[] {
  const problems: string[] = [];
  for (const [key, value] of Object.entries(tags)) {
    if (OWN_TAG_KEYS.has(key)) problems.push(`tag key "${key}" is set by serverless-eni-ipam itself`);
    if (key.toLowerCase().startsWith('aws:'))
      problems.push(`tag key "${key}" uses the reserved "aws:" prefix`);
    if (key.length === 0 || key.length > 128) problems.push(`tag key "${key}" must be 1 to 128 characters`);
    if (value.length > 256) problems.push(`tag value of "${key}" must be at most 256 characters`);
  }
  return problems;
}

/** Whether an ENI with these tags was created by us for `clusterName`. */
export function isOurs(tags: Tags, clusterName: string): boolean {
  return tags[ENI_TAG_KEYS.owner] === OWNER_TAG_VALUE && tags[ENI_TAG_KEYS.clusterName] === clusterName;
}
