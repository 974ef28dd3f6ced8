import { Annotations, CfnParameter, CfnRule, Fn, type Stack } from 'aws-cdk-lib';

/**
 * The cdk.json values that only stand in for a real cluster's. `npx cdk synth` with them keeps
 * working offline (tests and the local cloud synthesize exactly that), but a deploy of them must
 * fail before CloudFormation creates anything: with them, access entries name a cluster that is not
 * there (or worse, one that is), and IAM pins ENIs to a VPC that does not exist.
 */
const PLACEHOLDERS = {
  'eni-ipam:vpcId': {
    value: 'vpc-0123456789abcdef0',
    query: 'cluster.resourcesVpcConfig.vpcId',
  },
  'eni-ipam:eksEndpoint': {
    value: 'https://0123456789ABCDEF0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com',
    query: 'cluster.endpoint',
  },
  'eni-ipam:eksCertificateAuthorityData': {
    value: 'UkVQTEFDRS1XSVRILVlPVVItQ0xVU1RFUi1DQS1EQVRB',
    query: 'cluster.certificateAuthority.data',
  },
} as const;

export type PlaceholderKey = keyof typeof PLACEHOLDERS;

/** The keys whose configured value is still the cdk.json placeholder. */
export function placeholdersLeft(values: Readonly<Record<PlaceholderKey, string>>): PlaceholderKey[] {
  return (Object.keys(PLACEHOLDERS) as PlaceholderKey[]).filter(
    (key) => values[key] === PLACEHOLDERS[key].value,
  );
}

/** What to run to get each value, for the message of an unedited deploy. */
export function placeholderMessage(clusterName: string, keys: readonly PlaceholderKey[]): string {
  const lines = keys.map(
    (key) =>
      `${key} (aws eks describe-cluster --name ${clusterName} --query ${PLACEHOLDERS[key].query} --output text)`,
  );
  return `cdk.json still holds placeholder values; set ${lines.join('; ')}`;
}

/**
 * Makes a deploy of this template fail before anything is created while `problems` is not empty:
 * a parameter whose default lists the problems, and a template rule that asserts it is empty (the
 * way CDK refuses an old bootstrap stack; CloudFormation evaluates rules before creating or
 * updating any resource). `cdk synth` only warns, so offline synthesis keeps working.
 */
export function refuseDeployUnless(stack: Stack, problems: readonly string[]): void {
  if (problems.length === 0) return;
  const message = problems.join(' | ');
  Annotations.of(stack).addWarningV2(
    'serverless-eni-ipam:undeployable',
    `a deploy will be refused: ${message}`,
  );
  const parameter = new CfnParameter(stack, 'UndeployableConfiguration', {
    type: 'String',
    default: message,
    description: 'What must be fixed in the CDK context before this stack can be deployed (empty: nothing)',
  });
  new CfnRule(stack, 'CheckDeployableConfiguration', {
    assertions: [
      {
        assert: Fn.conditionEquals(parameter.valueAsString, ''),
        assertDescription: message,
      },
    ],
  });
}
