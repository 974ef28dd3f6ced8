import { CfnOutput, Fn, type Stack } from 'aws-cdk-lib';
import type * as iam from 'aws-cdk-lib/aws-iam';
import type { StackConfig } from './config.ts';

/** A function role that must become a Kubernetes identity, with the groups it is bound to. */
export interface KubernetesIdentity {
  /** `Allocate`, `Sweep`, `Sync`: names the access entry, the outputs and the Kubernetes user. */
  readonly name: string;
  readonly role: iam.IRole;
  readonly groups: readonly string[];
}

/**
 * The `aws-auth` mode (a cluster in CONFIG_MAP authentication, where `AWS::EKS::AccessEntry`
 * fails): no access entries; the stack outputs each role ARN and the `mapRoles` entries to add to
 * the `aws-auth` ConfigMap. (In `access-entry` mode the stack creates an access entry per role.)
 * Either way the functions authenticate the same: an IAM token for their role (EKS_* variables).
 */
export function outputAwsAuthMappings(
  stack: Stack,
  config: StackConfig,
  identities: readonly KubernetesIdentity[],
): void {
  const entries = identities.map((identity) =>
    Fn.join('', [
      '- rolearn: ',
      identity.role.roleArn,
      `\n  username: serverless-eni-ipam-${identity.name.toLowerCase()}\n  groups:\n`,
      identity.groups.map((group) => `    - ${group}\n`).join(''),
    ]),
  );
  for (const identity of identities) {
    new CfnOutput(stack, `${identity.name}RoleArn`, {
      value: identity.role.roleArn,
      description: `The ${identity.name} function's role, to map in aws-auth (groups ${identity.groups.join(', ')})`,
    });
  }
  new CfnOutput(stack, 'AwsAuthMapRoles', {
    value: Fn.join('', entries),
    description: `Append to data.mapRoles of ConfigMap kube-system/aws-auth of cluster ${config.clusterName} (kubectl -n kube-system edit configmap aws-auth)`,
  });
}
