import { describe, expect, it } from 'vitest';
import {
  ENI_TAG_KEYS,
  isOurs,
  ownershipTags,
  tagsForNewEni,
  validateExtraTags,
} from '../../../functions/core/eni-ownership.ts';

describe('ENI tags', () => {
  it('ownership tags carry the IAM scope-down key, cilium GC tags, our instance and owner tags', () => {
    expect(ownershipTags('prod', 'i-0abc')).toEqual({
      'cluster.k8s.amazonaws.com/name': 'prod',
      'io.cilium/cilium-managed': 'true',
      'io.cilium/cluster-name': 'prod',
      'serverless-eni-ipam/instance-id': 'i-0abc',
      'serverless-eni-ipam/owner': 'serverless-eni-ipam',
    });
  });

  it('a new ENI gets configured and per-request tags, with our tags winning every clash', () => {
    const tags = tagsForNewEni(
      'prod',
      'i-0abc',
      { team: 'net', env: 'configured' },
      { env: 'request', [ENI_TAG_KEYS.owner]: 'someone-else' },
    );
    expect(tags).toEqual({ ...ownershipTags('prod', 'i-0abc'), team: 'net', env: 'request' });
  });

  it.each([
    { case: 'ours, this cluster', tags: ownershipTags('prod', 'i-1'), cluster: 'prod', expected: true },
    { case: 'ours, another cluster', tags: ownershipTags('dev', 'i-1'), cluster: 'prod', expected: false },
    {
      case: 'cluster tag only (e.g. the VPC CNI)',
      tags: { [ENI_TAG_KEYS.clusterName]: 'prod' },
      cluster: 'prod',
      expected: false,
    },
    {
      case: 'cilium-operator ENI',
      tags: { 'io.cilium/cilium-managed': 'true', 'io.cilium/cluster-name': 'prod' },
      cluster: 'prod',
      expected: false,
    },
    { case: 'untagged', tags: {}, cluster: 'prod', expected: false },
  ])('isOurs: $case', ({ tags, cluster, expected }) => {
    expect(isOurs(tags, cluster)).toBe(expected);
  });

  it('names the instance an ENI was made for', () => {
    expect(ownershipTags('prod', 'i-0abc')[ENI_TAG_KEYS.instanceId]).toBe('i-0abc');
  });

  it.each<{ case: string; tags: Record<string, string>; problems: number }>([
    { case: 'plain tags', tags: { team: 'net', 'cost-center': '42' }, problems: 0 },
    { case: 'one of our keys', tags: { [ENI_TAG_KEYS.instanceId]: 'i-1' }, problems: 1 },
    { case: 'reserved aws: prefix', tags: { 'aws:cloudformation:stack': 'x' }, problems: 1 },
    { case: 'key too long', tags: { ['k'.repeat(129)]: 'x' }, problems: 1 },
    { case: 'value too long', tags: { team: 'v'.repeat(257) }, problems: 1 },
  ])('validateExtraTags: $case', ({ tags, problems }) => {
    expect(validateExtraTags(tags)).toHaveLength(problems);
  });
});
