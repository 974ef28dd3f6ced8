import { CfnOutput, Fn, type Stack } from 'aws-cdk-lib';
import * as eks from 'aws-cdk-lib/aws-eks';
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
 * Makes each function role a Kubernetes identity, in the cluster's authentication mode:
 * - `access-entry` (API, API_AND_CONFIG_MAP): an EKS access entry per role with its groups;
 * - `aws-auth` (CONFIG_MAP, where `AWS::EKS::AccessEntry` fails): no access entries; the stack
 *   outputs each role ARN and the `mapRoles` entries to add to the `aws-auth` ConfigMap;
 * - `none` (the local cloud): nothing.
 * Either way the functions authenticate the same: an IAM token for their role (EKS_* variables).
 */
export function grantKubernetesIdentities(
  stack: Stack,
  config: StackConfig,
  identities: readonly KubernetesIdentity[],
): void {
  if (config.kubernetesAccess === 'access-entry') {
    for (const identity of identities) {
      new eks.CfnAccessEntry(stack, `${identity.name}Access`, {
        clusterName: config.clusterName,
        principalArn: identity.role.roleArn,
        type: 'STANDARD',
        kubernetesGroups: [...identity.groups],
      });
    }
  }
  if (config.kubernetesAccess !== 'aws-auth') return;
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
