import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../../functions/core/errors.ts';
import { parseServeNodeRequest, serveNodeRequest } from '../../../functions/core/serve-node-request.ts';

const TRIGGER = { instanceId: 'i-0123456789abcdef0', allocate: true, release: false };

describe('the watcher’s serve-node request', () => {
  it('round-trips through JSON, as the invoke carries it', () => {
    expect(parseServeNodeRequest(JSON.parse(JSON.stringify(serveNodeRequest(TRIGGER))))).toEqual(TRIGGER);
  });

  it.each([
    { case: 'an EC2 event', event: { source: 'aws.ec2', detail: { 'instance-id': TRIGGER.instanceId } } },
    { case: 'a scheduled event', event: { 'detail-type': 'Scheduled Event' } },
    { case: 'no object', event: 'serve-node' },
  ])('leaves $case to the other parsers', ({ event }) => {
    expect(parseServeNodeRequest(event)).toBeUndefined();
  });

  it.each([
    { case: 'a malformed instance id', event: { ...serveNodeRequest(TRIGGER), instanceId: 'node-a' } },
    {
      case: 'no release flag',
      event: { task: 'serve-node', instanceId: TRIGGER.instanceId, allocate: true },
    },
  ])('refuses $case', ({ event }) => {
    expect(() => parseServeNodeRequest(event)).toThrow(InvalidInputError);
  });
});
