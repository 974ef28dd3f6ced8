import { describe, expect, it } from 'vitest';
import { agentReadsNodeKeys, preAgentKnobs } from '../../../functions/core/cilium-config.ts';
import { CiliumConfigError } from '../../../functions/core/errors.ts';
import { UNCONFIGURED_KNOBS } from '../../../functions/core/knobs.ts';

const STACK = { ...UNCONFIGURED_KNOBS, preAllocate: 8, firstInterfaceIndex: 0 };
const options = { configMap: 'kube-system/cilium-config', agentReadsNodeKeys: true };

describe('the knobs an agent will register, from cilium-config', () => {
  it('keeps the stack defaults without a ConfigMap, and for keys it does not set', () => {
    expect(preAgentKnobs(undefined, STACK, options)).toEqual({ knobs: STACK, fromCiliumConfig: [] });
    expect(preAgentKnobs({ ipam: 'eni', 'eni-tags': '{}' }, STACK, options)).toEqual({
      knobs: STACK,
      fromCiliumConfig: [],
    });
  });

  it('takes every node-level key as Helm renders it', () => {
    const { knobs, fromCiliumConfig } = preAgentKnobs(
      {
        ipam: 'eni',
        'ipam-pre-allocate': '16',
        'ipam-min-allocate': '4',
        'ipam-max-allocate': '64',
        'eni-first-interface-index': '1',
        'eni-subnet-ids': 'subnet-0a,subnet-0b',
        'eni-subnet-tags': 'kubernetes.io/role/pods=1,tier=pods',
        'eni-security-groups': 'sg-01 sg-02',
        'eni-security-group-tags': '{"purpose":"pods"}',
        'eni-exclude-interface-tags': 'legacy=true',
        'eni-use-primary-address': 'true',
        'eni-disable-prefix-delegation': 'True',
        'eni-delete-on-termination': 'false',
      },
      STACK,
      options,
    );
    expect(knobs).toEqual({
      ...STACK,
      preAllocate: 16,
      minAllocate: 4,
      maxAllocate: 64,
      firstInterfaceIndex: 1,
      subnetIds: ['subnet-0a', 'subnet-0b'],
      subnetTags: { 'kubernetes.io/role/pods': '1', tier: 'pods' },
      securityGroups: ['sg-01', 'sg-02'],
      securityGroupTags: { purpose: 'pods' },
      excludeInterfaceTags: { legacy: 'true' },
      usePrimaryAddress: true,
      disablePrefixDelegation: true,
      deleteOnTermination: false,
    });
    expect(fromCiliumConfig).toHaveLength(12);
  });

  it('reads a value with commas of a key=value map, and empty values as empty', () => {
    expect(
      preAgentKnobs(
        { 'eni-subnet-tags': 'zones=a,b,tier=pods', 'eni-subnet-ids': '', 'eni-exclude-interface-tags': '' },
        STACK,
        options,
      ).knobs,
    ).toMatchObject({ subnetTags: { zones: 'a,b', tier: 'pods' }, subnetIds: [], excludeInterfaceTags: {} });
  });

  it.each([
    { key: 'eni-first-interface-index', value: 'one' },
    { key: 'eni-first-interface-index', value: '-1' },
    { key: 'ipam-pre-allocate', value: '8.5' },
    { key: 'eni-use-primary-address', value: 'yes' },
    { key: 'eni-subnet-tags', value: 'no-equals-sign' },
    { key: 'eni-security-group-tags', value: '{"a":1}' },
    { key: 'eni-exclude-interface-tags', value: '{broken' },
  ])('refuses $key: $value, naming the key and the ConfigMap', ({ key, value }) => {
    const read = () => preAgentKnobs({ [key]: value }, STACK, options);
    expect(read).toThrow(CiliumConfigError);
    expect(read).toThrow(`ConfigMap kube-system/cilium-config, key ${key}: ${JSON.stringify(value)} is not`);
  });

  it('refuses a cluster whose agents do not run ENI mode', () => {
    expect(() => preAgentKnobs({ ipam: 'cluster-pool' }, STACK, options)).toThrow(
      /key ipam: cilium runs IPAM mode "cluster-pool"/,
    );
  });

  it('ignores the node-level keys for agents that do not read them (cilium 1.18)', () => {
    expect(agentReadsNodeKeys('1.18')).toBe(false);
    expect(agentReadsNodeKeys('1.19')).toBe(true);
    expect(agentReadsNodeKeys('2.0')).toBe(true);
    expect(agentReadsNodeKeys('set-me')).toBe(true);
    expect(
      preAgentKnobs({ 'eni-first-interface-index': '1' }, STACK, { ...options, agentReadsNodeKeys: false })
        .knobs,
    ).toEqual(STACK);
  });
});
