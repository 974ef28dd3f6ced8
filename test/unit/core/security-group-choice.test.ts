import { describe, expect, it } from 'vitest';
import type { Tags } from '../../../functions/core/model.ts';
import { chooseSecurityGroups, formatTags } from '../../../functions/core/security-group-choice.ts';
import { eni, knobs, securityGroup, VPC_ID } from './fixtures.ts';

const groups = [
  securityGroup('sg-pods-2', { role: 'pods', env: 'prod' }),
  securityGroup('sg-pods-1', { role: 'pods', env: 'prod' }),
  securityGroup('sg-pods-dev', { role: 'pods', env: 'dev' }),
  securityGroup('sg-pods-elsewhere', { role: 'pods', env: 'prod' }, 'vpc-elsewhere'),
];

describe('chooseSecurityGroups', () => {
  it.each([
    {
      case: 'explicit ids win, order kept, duplicates dropped',
      knobSet: knobs({ securityGroups: ['sg-z', 'sg-a', 'sg-z'], securityGroupTags: { role: 'pods' } }),
      enis: [eni({ deviceIndex: 0 })],
      expected: { kind: 'chosen', securityGroupIds: ['sg-z', 'sg-a'], source: 'spec-ids' },
    },
    {
      case: 'tags: every matching group in the VPC, sorted',
      knobSet: knobs({ securityGroupTags: { role: 'pods', env: 'prod' } }),
      enis: [eni({ deviceIndex: 0 })],
      expected: { kind: 'chosen', securityGroupIds: ['sg-pods-1', 'sg-pods-2'], source: 'spec-tags' },
    },
    {
      case: 'tags matching nothing fall through to the primary ENI',
      knobSet: knobs({ securityGroupTags: { role: 'nothing' } }),
      enis: [eni({ deviceIndex: 1, securityGroupIds: ['sg-x'] }), eni({ deviceIndex: 0 })],
      expected: { kind: 'chosen', securityGroupIds: ['sg-node-a', 'sg-node-b'], source: 'primary-eni' },
    },
    {
      case: 'primary ENI groups, sorted (device 0 only)',
      knobSet: knobs(),
      enis: [eni({ deviceIndex: 1, securityGroupIds: ['sg-x'] }), eni({ deviceIndex: 0 })],
      expected: { kind: 'chosen', securityGroupIds: ['sg-node-a', 'sg-node-b'], source: 'primary-eni' },
    },
  ])('$case', ({ knobSet, enis, expected }) => {
    expect(chooseSecurityGroups({ vpcId: VPC_ID, knobs: knobSet, securityGroups: groups, enis })).toEqual(
      expected,
    );
  });

  it.each([
    { case: 'no primary ENI observed', enis: [eni({ deviceIndex: 1 })] },
    { case: 'primary ENI without groups', enis: [eni({ deviceIndex: 0, securityGroupIds: [] })] },
  ])('blocked: $case', ({ enis }) => {
    const choice = chooseSecurityGroups({
      vpcId: VPC_ID,
      knobs: knobs({ securityGroupTags: { role: 'nothing' } }),
      securityGroups: groups,
      enis,
    });
    expect(choice).toEqual({
      kind: 'blocked',
      code: 'NoSecurityGroups',
      message: `failed to get security group ids: none configured, none in ${VPC_ID} matching SecurityGroupTags=map[role:nothing], and the primary ENI has none`,
    });
  });
});

describe('formatTags', () => {
  it.each<{ case: string; tags: Tags; text: string }>([
    { case: 'empty', tags: {}, text: 'map[]' },
    { case: 'keys sorted', tags: { b: '2', a: '1' }, text: 'map[a:1 b:2]' },
  ])('$case', ({ tags, text }) => {
    expect(formatTags(tags)).toBe(text);
  });
});
