import { describe, expect, it } from 'vitest';
import { compileEventPattern, matchesEventPattern, UnsupportedPatternError } from './event-pattern.ts';

const stateChange = (state: string, extra: Record<string, unknown> = {}) => ({
  version: '0',
  id: '7bf73129-1428-4cd3-a780-95db273d1602',
  'detail-type': 'EC2 Instance State-change Notification',
  source: 'aws.ec2',
  account: '123456789012',
  time: '2021-11-11T21:29:54Z',
  region: 'us-east-1',
  resources: ['arn:aws:ec2:us-east-1:123456789012:instance/i-1234567890abcdef0'],
  detail: { 'instance-id': 'i-1234567890abcdef0', state, ...extra },
});

/** The stack's InstanceStateChanges rule, as synthesized. */
const instanceStateChanges = {
  source: ['aws.ec2'],
  'detail-type': ['EC2 Instance State-change Notification'],
  detail: { state: ['running', 'shutting-down', 'terminated'] },
};

describe('matchesEventPattern', () => {
  it.each([
    {
      case: 'state listed in the rule',
      pattern: instanceStateChanges,
      event: stateChange('running'),
      matches: true,
    },
    {
      case: 'state the rule omits',
      pattern: instanceStateChanges,
      event: stateChange('pending'),
      matches: false,
    },
    {
      case: 'another detail-type',
      pattern: instanceStateChanges,
      event: { ...stateChange('running'), 'detail-type': 'EC2 Spot Instance Interruption Warning' },
      matches: false,
    },
    {
      case: 'another source',
      pattern: instanceStateChanges,
      event: { ...stateChange('running'), source: 'aws.autoscaling' },
      matches: false,
    },
    {
      case: 'fields the pattern does not name are ignored',
      pattern: { source: ['aws.ec2'] },
      event: stateChange('stopped'),
      matches: true,
    },
    {
      case: 'nested field missing from the event',
      pattern: { detail: { 'instance-action': ['terminate'] } },
      event: stateChange('running'),
      matches: false,
    },
    {
      case: 'event array value: any element matches',
      pattern: { resources: ['arn:aws:ec2:us-east-1:123456789012:instance/i-1234567890abcdef0'] },
      event: stateChange('running'),
      matches: true,
    },
    {
      case: 'prefix',
      pattern: { detail: { state: [{ prefix: 'shut' }] } },
      event: stateChange('shutting-down'),
      matches: true,
    },
    {
      case: 'prefix, no match',
      pattern: { detail: { state: [{ prefix: 'run' }] } },
      event: stateChange('terminated'),
      matches: false,
    },
    {
      case: 'suffix',
      pattern: { detail: { state: [{ suffix: 'ped' }] } },
      event: stateChange('stopped'),
      matches: true,
    },
    {
      case: 'equals-ignore-case',
      pattern: { detail: { state: [{ 'equals-ignore-case': 'RUNNING' }] } },
      event: stateChange('running'),
      matches: true,
    },
    {
      case: 'anything-but a list',
      pattern: { detail: { state: [{ 'anything-but': ['pending', 'stopping'] }] } },
      event: stateChange('running'),
      matches: true,
    },
    {
      case: 'anything-but a listed value',
      pattern: { detail: { state: [{ 'anything-but': ['pending', 'running'] }] } },
      event: stateChange('running'),
      matches: false,
    },
    {
      case: 'anything-but needs the field',
      pattern: { detail: { reason: [{ 'anything-but': 'x' }] } },
      event: stateChange('running'),
      matches: false,
    },
    {
      case: 'anything-but a prefix',
      pattern: { detail: { state: [{ 'anything-but': { prefix: 'stop' } }] } },
      event: stateChange('stopping'),
      matches: false,
    },
    {
      case: 'exists true',
      pattern: { detail: { 'instance-id': [{ exists: true }] } },
      event: stateChange('running'),
      matches: true,
    },
    {
      case: 'exists false',
      pattern: { detail: { reason: [{ exists: false }] } },
      event: stateChange('running'),
      matches: true,
    },
    {
      case: 'exists false on a present field',
      pattern: { detail: { state: [{ exists: false }] } },
      event: stateChange('running'),
      matches: false,
    },
    {
      case: 'numeric range',
      pattern: { detail: { code: [{ numeric: ['>', 0, '<=', 16] }] } },
      event: stateChange('running', { code: 16 }),
      matches: true,
    },
    {
      case: 'numeric out of range',
      pattern: { detail: { code: [{ numeric: ['<', 16] }] } },
      event: stateChange('running', { code: 16 }),
      matches: false,
    },
    {
      case: 'null matches JSON null only',
      pattern: { detail: { reason: [null] } },
      event: stateChange('running', { reason: null }),
      matches: true,
    },
    {
      case: 'null does not match a missing field',
      pattern: { detail: { reason: [null] } },
      event: stateChange('running'),
      matches: false,
    },
    {
      case: 'literals compare with their type',
      pattern: { detail: { code: ['16'] } },
      event: stateChange('running', { code: 16 }),
      matches: false,
    },
    { case: 'a non-object event', pattern: { source: ['aws.ec2'] }, event: 'aws.ec2', matches: false },
  ])('$case', ({ pattern, event, matches }) => {
    expect(matchesEventPattern(pattern, event)).toBe(matches);
  });

  it.each([
    { case: 'an unsupported operator', pattern: { source: [{ wildcard: 'aws.*' }] } },
    { case: '$or', pattern: { $or: [{ source: ['aws.ec2'] }] } },
    { case: 'a scalar instead of a list', pattern: { source: 'aws.ec2' } },
    { case: 'two operators in one filter', pattern: { source: [{ prefix: 'a', suffix: 'b' }] } },
    { case: 'a malformed numeric filter', pattern: { detail: { code: [{ numeric: ['>'] }] } } },
    { case: 'a pattern that is not an object', pattern: ['aws.ec2'] },
  ])('refuses $case when compiling, instead of mis-routing', ({ pattern }) => {
    expect(() => compileEventPattern(pattern)).toThrow(UnsupportedPatternError);
  });
});
