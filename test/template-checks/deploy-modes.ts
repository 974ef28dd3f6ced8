import { REAL_CLUSTER } from '../fixtures/cluster-context.ts';
import { LOCAL_SYNTH_CONTEXT } from '../local-cloud/synthesize.ts';
import { SHARED_VPC_OWNER_ACCOUNT } from '../support/stack-policies.ts';

/**
 * Every deploy mode the tests synthesize (test/infra, the local cloud, the IAM fixtures, the bench),
 * as context on top of cdk.json: what `npm run templates` lints. A mode a test adds belongs here.
 */
export const DEPLOY_MODES: Readonly<Record<string, Readonly<Record<string, unknown>>>> = {
  // cdk.json as shipped: placeholders, so the template carries the rule that refuses a deploy.
  'cdk-json-defaults': {},
  'access-entry': REAL_CLUSTER,
  'aws-auth': { ...REAL_CLUSTER, 'eni-ipam:kubernetesAccess': 'aws-auth' },
  'local-cloud': LOCAL_SYNTH_CONTEXT,
  'explicit-account': { ...REAL_CLUSTER, 'eni-ipam:account': '210987654321' },
  'cluster-vpc': {
    ...REAL_CLUSTER,
    'eni-ipam:vpcSubnetIds': ['subnet-0aaaaaaaaaaaaaaa1', 'subnet-0bbbbbbbbbbbbbbb2'],
    'eni-ipam:vpcSecurityGroupIds': ['sg-0ccccccccccccccc3'],
  },
  'shared-vpc': { ...REAL_CLUSTER, 'eni-ipam:vpcOwnerAccountId': SHARED_VPC_OWNER_ACCOUNT },
  paused: { ...REAL_CLUSTER, 'eni-ipam:paused': true },
  'existing-table': {
    ...REAL_CLUSTER,
    'eni-ipam:existingTableName': 'prod-nodes-restored',
    'eni-ipam:existingTableStreamArn':
      'arn:aws:dynamodb:eu-west-1:210987654321:table/prod-nodes-restored/stream/2026-12-01T20:00:00.000',
  },
  'alarm-topic-and-reserved-concurrency': {
    ...REAL_CLUSTER,
    'eni-ipam:alarmTopicArn': 'arn:aws:sns:eu-west-1:210987654321:platform-pager',
    'eni-ipam:sweepReservedConcurrency': 2,
    'eni-ipam:allocateReservedConcurrency': 50,
  },
  'prefix-delegation-and-excess-release': {
    ...REAL_CLUSTER,
    'eni-ipam:prefixDelegation': true,
    'eni-ipam:firstInterfaceIndex': 1,
    'eni-ipam:releaseExcessIps': true,
    'eni-ipam:eniTags': { team: 'platform' },
  },
  'own-cilium-config': {
    ...REAL_CLUSTER,
    'eni-ipam:ciliumConfigNamespace': 'cilium',
    'eni-ipam:ciliumConfigName': 'cilium-agent-config',
  },
};
