import { Stack, Token, Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import { ENI_TAG_KEYS, OWNER_TAG_VALUE } from '../functions/core/eni-ownership.ts';

/**
 * The EC2 permissions of the allocating functions, least privilege after AWS's scope-down policy for
 * VPC CNI (https://github.com/aws/amazon-vpc-cni-k8s/blob/b52188387/docs/iam-policy.md): named actions only (no wildcards); every ENI mutation conditioned on
 * our ownership tag AND our cluster tag, which we put on every ENI at creation (the cluster tag
 * alone is shared with VPC CNI, whose ENIs are not ours to touch); creation only in the cluster's
 * VPC and only with both tags in the request; tagging only as part of creation, so the role can
 * never make an ENI "ours" by tagging it (an untagged eth0 is simply not ours).
 */
export interface EniPermissionScope {
  readonly clusterName: string;
  readonly vpcId: string;
  readonly clusterTagValues: readonly string[];
  /** The account owning the VPC: this stack's, or the owner of a VPC shared through RAM. */
  readonly vpcOwnerAccountId?: string;
}

/** Describe calls cannot be scoped to resources in IAM: they need `Resource: *`. */
const EC2_DESCRIBE_ACTIONS = [
  'ec2:DescribeInstances',
  'ec2:DescribeInstanceTypes',
  'ec2:DescribeNetworkInterfaces',
  'ec2:DescribeRouteTables',
  'ec2:DescribeSecurityGroups',
  'ec2:DescribeSubnets',
  'ec2:DescribeVpcs',
] as const;

export function grantEniManagement(role: iam.IRole, scope: EniPermissionScope): void {
  const stack = Stack.of(role);
  const ec2Arn = (resource: string, account?: string) =>
    stack.formatArn({ service: 'ec2', resource, resourceName: '*', ...(account ? { account } : {}) });
  const owner = scope.vpcOwnerAccountId;
  const vpcArn = stack.formatArn({
    service: 'ec2',
    resource: 'vpc',
    resourceName: scope.vpcId,
    ...(owner ? { account: owner } : {}),
  });
  // Security groups of a shared VPC may be the participant's own or shared by the owner.
  const securityGroupArns = owner
    ? [ec2Arn('security-group'), ec2Arn('security-group', owner)]
    : [ec2Arn('security-group')];
  const clusterTag = ENI_TAG_KEYS.clusterName;
  const ownTags = { [clusterTag]: scope.clusterName, [ENI_TAG_KEYS.owner]: OWNER_TAG_VALUE };
  const tagConditions = (prefix: string) =>
    Object.fromEntries(Object.entries(ownTags).map(([key, value]) => [`${prefix}${key}`, value]));
  const instanceClusterTag = `kubernetes.io/cluster/${scope.clusterName}`;

  const statements = [
    new iam.PolicyStatement({
      sid: 'DescribeNetworking',
      actions: [...EC2_DESCRIBE_ACTIONS],
      resources: ['*'],
    }),
    new iam.PolicyStatement({
      sid: 'CreateTaggedEni',
      actions: ['ec2:CreateNetworkInterface'],
      resources: [ec2Arn('network-interface')],
      conditions: { StringEquals: tagConditions('aws:RequestTag/') },
    }),
    new iam.PolicyStatement({
      sid: 'CreateEniInClusterVpc',
      actions: ['ec2:CreateNetworkInterface'],
      resources: [ec2Arn('subnet', owner), ...securityGroupArns],
      conditions: { ArnEquals: { 'ec2:Vpc': vpcArn } },
    }),
    new iam.PolicyStatement({
      sid: 'TagOnlyOnCreate',
      actions: ['ec2:CreateTags'],
      resources: [ec2Arn('network-interface')],
      conditions: { StringEquals: { 'ec2:CreateAction': 'CreateNetworkInterface' } },
    }),
    new iam.PolicyStatement({
      sid: 'MutateOwnEnis',
      actions: [
        // AssignIpv6Addresses: the one /80 a 1.20 agent with IPv6 asks for (never released).
        'ec2:AssignIpv6Addresses',
        'ec2:AssignPrivateIpAddresses',
        'ec2:AttachNetworkInterface',
        'ec2:DeleteNetworkInterface',
        'ec2:DetachNetworkInterface',
        'ec2:ModifyNetworkInterfaceAttribute',
        'ec2:UnassignPrivateIpAddresses',
      ],
      resources: [ec2Arn('network-interface')],
      conditions: { StringEquals: tagConditions('aws:ResourceTag/') },
    }),
    new iam.PolicyStatement({
      sid: 'AttachToClusterInstances',
      actions: [
        'ec2:AttachNetworkInterface',
        'ec2:DetachNetworkInterface',
        'ec2:ModifyNetworkInterfaceAttribute',
      ],
      resources: [ec2Arn('instance')],
      conditions: {
        StringEquals: { [`aws:ResourceTag/${instanceClusterTag}`]: [...scope.clusterTagValues] },
      },
    }),
  ];
  for (const statement of statements) role.addToPrincipalPolicy(statement);

  // cdk-nag names the ARN as synthesized: pseudo parameters, or the literals of an explicit env.
  const region = Token.isUnresolved(stack.region) ? '<AWS::Region>' : stack.region;
  const account = Token.isUnresolved(stack.account) ? '<AWS::AccountId>' : stack.account;
  const arnPattern = (resource: string, resourceAccount = account) =>
    `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:ec2:${region}:${resourceAccount}:${resource}/*]`;
  const acknowledgements: [string, string][] = [
    [
      'network-interface',
      'ENIs are created at run time with generated ids; every action on them is conditioned on our ownership and cluster tags (aws:RequestTag on create, aws:ResourceTag otherwise)',
    ],
    [
      'subnet',
      'CreateNetworkInterface needs the subnet resource; conditioned on ec2:Vpc being the cluster VPC',
    ],
    [
      'security-group',
      'CreateNetworkInterface needs the security-group resource; conditioned on ec2:Vpc being the cluster VPC',
    ],
    [
      'instance',
      'instances join the cluster at run time; attach/detach/modify are conditioned on the kubernetes.io/cluster/<name> instance tag',
    ],
  ];
  for (const [resource, reason] of acknowledgements) {
    Validations.of(role).acknowledge({ id: arnPattern(resource), reason });
    if (owner && (resource === 'subnet' || resource === 'security-group')) {
      Validations.of(role).acknowledge({ id: arnPattern(resource, owner), reason: `${reason} (shared VPC)` });
    }
  }
}
