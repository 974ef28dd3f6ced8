import type { IamIdentity, PolicyDocument } from '../emulators/ec2/authorization.ts';
import { LOCAL_ACCOUNT } from './local-account.ts';

/**
 * The person at the local cloud: an IAM user of the local account whose keys `npm start` prints,
 * so the aws CLI reaches the EC2 stand-in, DynamoDB Local and the Lambda Invoke API with what the
 * banner says. Its policy is what an operator of a deployed stack needs for the runbooks and no
 * more: EC2 read-only (the Describe calls the runbooks and a person's curiosity make), and invoking
 * the sync function (the resync runbook). The stand-ins enforce it as they enforce the functions'
 * roles; its refused calls are the person's, reported apart from the functions' denials.
 *
 * DynamoDB Local authenticates nobody: any keys read the node table there (in AWS the runbook's
 * `get-item` needs `dynamodb:GetItem` on the table, which the policy names for that reason).
 */

export const LOCAL_OPERATOR_CREDENTIALS = {
  accessKeyId: 'AKIALOCALOPERATOR000',
  secretAccessKey: 'local-operator-secret-access-key',
} as const;

export const LOCAL_OPERATOR_USER_ARN = `arn:aws:iam::${LOCAL_ACCOUNT}:user/local-operator`;

/** What the local operator may do: read EC2, read the node table, invoke the sync function. */
export function localOperatorPolicy(resources: {
  readonly nodeTableArn: string;
  readonly syncFunctionArn: string;
}): PolicyDocument {
  return {
    Version: '2012-10-17',
    Statement: [
      {
        Sid: 'ReadEc2',
        Effect: 'Allow',
        Action: [
          'ec2:DescribeInstances',
          'ec2:DescribeInstanceTypes',
          'ec2:DescribeNetworkInterfaces',
          'ec2:DescribeSubnets',
          'ec2:DescribeVpcs',
          'ec2:DescribeSecurityGroups',
          'ec2:DescribeRouteTables',
        ],
        Resource: '*',
      },
      {
        Sid: 'ReadNodeTable',
        Effect: 'Allow',
        Action: ['dynamodb:GetItem', 'dynamodb:Query'],
        Resource: resources.nodeTableArn,
      },
      {
        Sid: 'Resync',
        Effect: 'Allow',
        Action: 'lambda:InvokeFunction',
        Resource: resources.syncFunctionArn,
      },
    ],
  };
}

export function localOperatorIdentity(resources: Parameters<typeof localOperatorPolicy>[0]): IamIdentity {
  return { principalArn: LOCAL_OPERATOR_USER_ARN, policies: [localOperatorPolicy(resources)] };
}
