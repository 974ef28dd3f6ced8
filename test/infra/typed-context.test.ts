import { describe, expect, it } from 'vitest';
import { cdkJsonContext } from '../../infra/build-app.ts';
import { readStackConfig, StackConfigError } from '../../infra/config.ts';
import { REAL_CLUSTER } from '../fixtures/cluster-context.ts';

/** The configuration cdk.json and a real cluster give, with `typed` as a person types it after `-c`. */
const read = (typed: Record<string, unknown>) => {
  const context: Record<string, unknown> = { ...cdkJsonContext(), ...REAL_CLUSTER, ...typed };
  return readStackConfig((key) => context[key]);
};

/** The one line of the refusal that names `key` (every refusal is a line of its own). */
const refusalOf = (typed: Record<string, unknown>, key: string): string => {
  try {
    read(typed);
  } catch (error) {
    expect(error).toBeInstanceOf(StackConfigError);
    const line = (error as Error).message
      .split('\n')
      .find((text) => text.trim().startsWith(key.endsWith(' and') ? key : `${key}:`));
    if (line) return line.trim();
  }
  throw new Error(`no refusal of ${key}`);
};

const SUBNETS = ['subnet-0aaaaaaaaaaaaaaa1', 'subnet-0bbbbbbbbbbbbbbb2'];
const GROUP = 'sg-0ccccccccccccccc3';

describe('list-valued keys as a person types them', () => {
  it.each([
    { form: 'a comma-separated list', subnets: SUBNETS.join(',') },
    { form: 'a comma-separated list with spaces', subnets: ` ${SUBNETS.join(' , ')} ` },
    { form: 'a JSON array', subnets: JSON.stringify(SUBNETS) },
    { form: 'a JSON array with spaces', subnets: `[ "${SUBNETS[0]}", "${SUBNETS[1]}" ]` },
    { form: 'an array (cdk.json)', subnets: SUBNETS },
  ])('takes $form', ({ subnets }) => {
    const config = read({ 'eni-ipam:vpcSubnetIds': subnets, 'eni-ipam:vpcSecurityGroupIds': `["${GROUP}"]` });
    expect(config.vpcSubnetIds).toEqual(SUBNETS);
    expect(config.vpcSecurityGroupIds).toEqual([GROUP]);
  });

  it('takes the cluster tag values in both forms', () => {
    expect(read({ 'eni-ipam:clusterTagValues': 'owned' }).clusterTagValues).toEqual(['owned']);
    expect(read({ 'eni-ipam:clusterTagValues': '["owned","shared"]' }).clusterTagValues).toEqual([
      'owned',
      'shared',
    ]);
  });

  it.each([
    { case: 'a JSON array that does not parse', value: `["${SUBNETS[0]}",`, why: 'is not valid JSON' },
    { case: 'a JSON array of numbers', value: '[7]', why: 'of subnet ids, got "[7]"' },
    { case: 'an empty JSON array', value: '[]', why: 'of subnet ids, got "[]"' },
    { case: 'an empty item', value: `${SUBNETS[0]},,${SUBNETS[1]}`, why: 'of subnet ids, got' },
    { case: 'an id that is not a subnet', value: `${SUBNETS[0]},sg-x`, why: '(not "sg-x")' },
    { case: 'a JSON object', value: `{"a":"${SUBNETS[0]}"}`, why: 'of subnet ids (not "{' },
  ])('refuses $case, naming the key, the value and both accepted forms', ({ value, why }) => {
    const refusal = refusalOf(
      { 'eni-ipam:vpcSubnetIds': value, 'eni-ipam:vpcSecurityGroupIds': GROUP },
      'eni-ipam:vpcSubnetIds',
    );
    expect(refusal).toContain(why);
    expect(refusal).toContain(`got ${JSON.stringify(value)}`);
    expect(refusal).toContain(
      'for example -c eni-ipam:vpcSubnetIds=subnet-0123456789abcdef0,subnet-0fedcba9876543210 ' +
        `or -c 'eni-ipam:vpcSubnetIds=["subnet-0123456789abcdef0","subnet-0fedcba9876543210"]'`,
    );
  });

  it('shows an accepted example that is itself accepted', () => {
    const refusal = refusalOf(
      { 'eni-ipam:vpcSecurityGroupIds': 'sg-x', 'eni-ipam:vpcSubnetIds': SUBNETS },
      'eni-ipam:vpcSecurityGroupIds',
    );
    const example = /-c '?eni-ipam:vpcSecurityGroupIds=([^' ]+)'?$/.exec(refusal)?.[1];
    expect(example).toBe('["sg-0123456789abcdef0"]');
    expect(
      read({ 'eni-ipam:vpcSecurityGroupIds': example, 'eni-ipam:vpcSubnetIds': SUBNETS }).vpcSecurityGroupIds,
    ).toEqual(['sg-0123456789abcdef0']);
  });
});

describe('every refusal names the key, the value and an accepted example', () => {
  it.each([
    {
      key: 'eni-ipam:vpcId',
      value: 'vpc-nope',
      message:
        'expected a VPC id (vpc-…), got "vpc-nope"; for example -c eni-ipam:vpcId=vpc-0123456789abcdef0',
    },
    {
      key: 'eni-ipam:preAllocate',
      value: 'lots',
      message: 'expected an integer from 0 to 10000, got "lots"; for example -c eni-ipam:preAllocate=1',
    },
    {
      key: 'eni-ipam:prefixDelegation',
      value: 'yes',
      message: 'expected true or false, got "yes"; for example -c eni-ipam:prefixDelegation=true',
    },
    {
      key: 'eni-ipam:nodeNaming',
      value: 'hostname',
      message:
        'expected one of private-dns-name, instance-id, got "hostname"; for example -c eni-ipam:nodeNaming=private-dns-name',
    },
    {
      key: 'eni-ipam:eniTags',
      value: 'team=platform',
      message: `expected a JSON map of tag names to string values, got "team=platform"; for example -c 'eni-ipam:eniTags={"team":"platform"}'`,
    },
    {
      key: 'eni-ipam:clusterTagValues',
      value: 'owned,',
      message: `expected a comma-separated list or a JSON array of non-empty strings, got "owned,"; for example -c eni-ipam:clusterTagValues=owned,shared or -c 'eni-ipam:clusterTagValues=["owned","shared"]'`,
    },
    {
      key: 'eni-ipam:ciliumVersion',
      value: 'v1.18.2',
      message:
        'expected the cilium version as major.minor, got "v1.18.2"; for example -c eni-ipam:ciliumVersion=1.18',
    },
    {
      key: 'eni-ipam:region',
      value: 'mars',
      message: 'expected an AWS region, got "mars"; for example -c eni-ipam:region=eu-west-1',
    },
  ])('$key', ({ key, value, message }) => {
    expect(refusalOf({ [key]: value }, key)).toBe(`${key}: ${message}`);
  });

  it('keys set together: both keys, both values and an example of the pair', () => {
    expect(refusalOf({ 'eni-ipam:vpcSubnetIds': SUBNETS.join(',') }, 'eni-ipam:vpcSubnetIds and')).toBe(
      `eni-ipam:vpcSubnetIds and eni-ipam:vpcSecurityGroupIds: set both or neither, got ${JSON.stringify(SUBNETS)} and nothing; ` +
        'for example -c eni-ipam:vpcSubnetIds=subnet-0123456789abcdef0,subnet-0fedcba9876543210 -c eni-ipam:vpcSecurityGroupIds=sg-0123456789abcdef0',
    );
  });

  it('a region refused on its own is not also compared with the endpoint’s', () => {
    expect(() => read({ 'eni-ipam:region': 'mars' })).toThrow(/^invalid stack configuration:\n {2}[^\n]+$/);
  });
});
