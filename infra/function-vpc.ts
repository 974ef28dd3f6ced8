import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type { IpamFunction } from './ipam-function.ts';

export interface FunctionVpcPlacement {
  readonly subnetIds: readonly string[];
  readonly securityGroupIds: readonly string[];
}

/**
 * Puts a function in the cluster VPC (`eni-ipam:vpcSubnetIds`, `eni-ipam:vpcSecurityGroupIds`),
 * for a private or CIDR-restricted API endpoint. Lambda then creates and deletes its own
 * (Hyperplane) ENIs in those subnets with the function's role, unconditioned and before any tag
 * exists, so those rights are a statement of their own: the allocator's tag-conditioned ENI
 * statements would refuse them and the function would fail to create. The same actions as the
 * AWS-managed AWSLambdaVPCAccessExecutionRole.
 *
 * What the subnets need (infra/README.md, Reachability): EC2 through a NAT or the
 * `com.amazonaws.<region>.ec2` interface endpoint, DynamoDB through the gateway endpoint or NAT,
 * and 443 from these security groups to the cluster security group (the private API endpoint).
 * No STS egress: the EKS token is a presigned URL the API server itself calls STS with, and Lambda
 * hands the role's credentials to the function.
 */
export function placeInVpc(ipamFunction: IpamFunction, placement: FunctionVpcPlacement): void {
  const cfnFunction = ipamFunction.function.node.defaultChild as lambda.CfnFunction;
  cfnFunction.vpcConfig = {
    subnetIds: [...placement.subnetIds],
    securityGroupIds: [...placement.securityGroupIds],
  };
  const statement = new iam.PolicyStatement({
    sid: 'LambdaVpcNetworkInterfaces',
    actions: [
      'ec2:CreateNetworkInterface',
      'ec2:DescribeNetworkInterfaces',
      'ec2:DescribeSubnets',
      'ec2:DeleteNetworkInterface',
      'ec2:AssignPrivateIpAddresses',
      'ec2:UnassignPrivateIpAddresses',
    ],
    resources: ['*'],
  });
  // The function already depends on its role and the role's default policy (CDK orders them), so
  // Lambda's check of the role at function creation sees this statement.
  ipamFunction.role.addToPrincipalPolicy(statement);
}
