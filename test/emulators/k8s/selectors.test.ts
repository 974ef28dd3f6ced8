import { describe, expect, it } from 'vitest';
import { parseFieldSelector, parseLabelSelector } from './selectors.ts';

const object = (name: string, labels?: Record<string, string>) => ({
  metadata: { name, ...(labels ? { labels } : {}) },
});
const labelled = object('n1', { pool: 'blue', 'topology.kubernetes.io/zone': 'a' });
const bare = object('n2');

describe('parseLabelSelector', () => {
  it.each([
    { case: 'empty', selector: '', matches: [true, true] },
    { case: 'equality', selector: 'pool=blue', matches: [true, false] },
    { case: 'double equals', selector: 'pool==blue', matches: [true, false] },
    { case: 'inequality matches a missing label', selector: 'pool!=blue', matches: [false, true] },
    { case: 'exists', selector: 'pool', matches: [true, false] },
    { case: 'does not exist', selector: '!pool', matches: [false, true] },
    { case: 'in', selector: 'pool in (red, blue)', matches: [true, false] },
    { case: 'notin matches a missing label', selector: 'pool notin (blue)', matches: [false, true] },
    {
      case: 'prefixed key, several requirements',
      selector: 'topology.kubernetes.io/zone=a,pool in (blue)',
      matches: [true, false],
    },
  ])('$case', ({ selector, matches }) => {
    const select = parseLabelSelector(selector);
    expect([select(labelled), select(bare)]).toEqual(matches);
  });

  it('answers 400 for a selector it cannot parse', () => {
    expect(() => parseLabelSelector('pool in blue')).toThrow(expect.objectContaining({ code: 400 }));
  });
});

describe('parseFieldSelector', () => {
  it.each([
    { case: 'metadata.name=', selector: 'metadata.name=n1', matches: [true, false] },
    { case: 'metadata.name==', selector: 'metadata.name==n2', matches: [false, true] },
    { case: 'metadata.name!=', selector: 'metadata.name!=n1', matches: [false, true] },
    { case: 'cluster-scoped namespace is empty', selector: 'metadata.namespace=', matches: [true, true] },
  ])('$case', ({ selector, matches }) => {
    const select = parseFieldSelector(selector);
    expect([select(labelled), select(bare)]).toEqual(matches);
  });

  it('answers 400 for a field custom resources cannot select on', () => {
    expect(() => parseFieldSelector('spec.instance-id=i-1')).toThrow(
      '"spec.instance-id" is not a known field selector: only "metadata.name", "metadata.namespace"',
    );
  });
});
