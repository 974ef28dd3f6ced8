import { describe, expect, it } from 'vitest';
import { decodeSyncRequest, type SyncRequest } from '../../../functions/sync/request.ts';

/** The request, or the reason it was refused, thrown (so a test can match it like a failure). */
function parseSyncRequest(event: unknown): SyncRequest {
  const decoded = decodeSyncRequest(event);
  if (!decoded.ok) throw new Error(decoded.reason);
  return decoded.value;
}

const streamArn = 'arn:aws:dynamodb:us-east-1:123456789012:table/nodes/stream/2024-01-01T00:00:00.000';

function streamRecord(eventName: string, sequenceNumber: string, keys: unknown) {
  return {
    eventID: sequenceNumber,
    eventName,
    eventSource: 'aws:dynamodb',
    eventSourceARN: streamArn,
    dynamodb: { Keys: keys, SequenceNumber: sequenceNumber, StreamViewType: 'NEW_IMAGE' },
  };
}

describe('parseSyncRequest: direct invokes', () => {
  it.each([
    {
      case: 'one node',
      event: { instanceId: 'i-0123456789abcdef0' },
      expected: { kind: 'one', instanceId: 'i-0123456789abcdef0' },
    },
    {
      case: 'short legacy id',
      event: { instanceId: 'i-0123abcd' },
      expected: { kind: 'one', instanceId: 'i-0123abcd' },
    },
    { case: 'all nodes', event: { all: true }, expected: { kind: 'all' } },
  ])('$case', ({ event, expected }) => {
    expect(parseSyncRequest(event)).toEqual(expected);
  });

  it.each([
    { case: 'empty object', event: {} },
    { case: 'null', event: null },
    { case: 'a string', event: 'i-0123456789abcdef0' },
    { case: 'upper-case id', event: { instanceId: 'i-0123456789ABCDEF0' } },
    { case: 'too short id', event: { instanceId: 'i-0123' } },
    { case: 'not an instance id', event: { instanceId: 'eni-0123456789abcdef0' } },
    { case: 'all: false', event: { all: false } },
    { case: 'all: "true"', event: { all: 'true' } },
    { case: 'both keys', event: { all: true, instanceId: 'i-0123456789abcdef0' } },
    { case: 'extra key', event: { instanceId: 'i-0123456789abcdef0', force: true } },
  ])('rejects $case with a message naming both accepted payloads', ({ event }) => {
    expect(() => parseSyncRequest(event)).toThrow(
      /^expected \{"instanceId":"i-…"\} or \{"all":true\}; .*, got /,
    );
  });

  it.each([
    { case: 'empty Records', event: { Records: [] }, field: /Records: must hold at least one record/ },
    {
      case: 'records from another source',
      event: { Records: [{ eventSourceARN: 'arn:aws:sqs:us-east-1:1:q' }] },
      field: /Records\[0\]\.eventSourceARN: must be a DynamoDB stream, got "arn:aws:sqs/,
    },
  ])('rejects a stream batch with $case, naming the field', ({ event, field }) => {
    expect(() => parseSyncRequest(event)).toThrow(/^a DynamoDB stream batch: /);
    expect(() => parseSyncRequest(event)).toThrow(field);
  });

  it('shows a bounded preview of a huge payload', () => {
    const error = (() => {
      try {
        parseSyncRequest({ junk: 'x'.repeat(10_000) });
      } catch (caught) {
        return caught as Error;
      }
      throw new Error('expected a throw');
    })();
    expect(error.message.length).toBeLessThan(300);
  });
});

describe('parseSyncRequest: DynamoDB stream batches', () => {
  it('keeps every record with its sequence number and action', () => {
    const request = parseSyncRequest({
      Records: [
        streamRecord('INSERT', '100', { instanceId: { S: 'i-0123456789abcdef0' } }),
        streamRecord('MODIFY', '101', { instanceId: { S: 'i-0123456789abcdef0' } }),
        streamRecord('REMOVE', '102', { instanceId: { S: 'i-0fedcba9876543210' } }),
        streamRecord('MODIFY', '103', { instanceId: { S: 'not-an-instance' } }),
        streamRecord('MODIFY', '104', {}),
      ],
    });
    expect(request).toEqual({
      kind: 'stream',
      records: [
        { sequenceNumber: '100', action: 'sync', instanceId: 'i-0123456789abcdef0' },
        { sequenceNumber: '101', action: 'sync', instanceId: 'i-0123456789abcdef0' },
        { sequenceNumber: '102', action: 'ignore-remove' },
        { sequenceNumber: '103', action: 'reject', reason: expect.stringContaining('not-an-instance') },
        { sequenceNumber: '104', action: 'reject', reason: expect.stringContaining('instanceId') },
      ],
    });
  });
});
