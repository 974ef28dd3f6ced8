import type { InstanceView } from './model.ts';

/** The tag that names an instance's cluster (EKS and the Kubernetes cloud provider use it). */
export function clusterTagKey(clusterName: string): string {
  return `kubernetes.io/cluster/${clusterName}`;
}

/**
 * Whether an instance belongs to the cluster: its `kubernetes.io/cluster/<name>` tag carries one of
 * the accepted values (`owned` and `shared` by default). EventBridge events carry no tags, so this
 * is decided on DescribeInstances' answer, never on the event.
 */
export function isClusterMember(
  instance: Pick<InstanceView, 'tags'>,
  clusterName: string,
  acceptedTagValues: readonly string[],
): boolean {
  const value = instance.tags[clusterTagKey(clusterName)];
  return value !== undefined && acceptedTagValues.includes(value);
}

/** The CiliumNode name for an instance: EKS names nodes after the PrivateDnsName. */
export function nodeNameFor(
  instance: Pick<InstanceView, 'id' | 'privateDnsName'>,
  naming: 'private-dns-name' | 'instance-id',
): string {
  if (naming === 'instance-id' || instance.privateDnsName === '') return instance.id;
  return instance.privateDnsName;
}
