import { describe, expect, it } from 'vitest';
import {
  decodeServeNodesRequest,
  isDirectInvoke,
  MAX_NODES_PER_REQUEST,
  nodeServiceResult,
  serveNodesRequest,
} from '../../../functions/core/serve-node-request.ts';

const TRIGGER = { instanceId: 'i-0123456789abcdef0', allocate: true, release: false };
const OTHER = { instanceId: 'i-0123456789abcdef1', allocate: false, release: true };

describe('the watcher’s serve-nodes request', () => {
  it('round-trips through JSON, as the invoke carries it', () => {
    const request = JSON.parse(JSON.stringify(serveNodesRequest([TRIGGER, OTHER])));
    expect(decodeServeNodesRequest(request)).toEqual({ ok: true, value: [TRIGGER, OTHER] });
  });

  it('still reads the one-node request an earlier watcher sends', () => {
    expect(decodeServeNodesRequest({ task: 'serve-node', ...TRIGGER })).toEqual({
      ok: true,
      value: [TRIGGER],
    });
  });

  it.each([
    { case: 'an EC2 event', event: { source: 'aws.ec2', detail: { 'instance-id': TRIGGER.instanceId } } },
    { case: 'a scheduled event', event: { 'detail-type': 'Scheduled Event' } },
    { case: 'no object', event: 'serve-nodes' },
  ])('leaves $case to the other parsers', ({ event }) => {
    expect(isDirectInvoke(event)).toBe(false);
  });

  it.each([
    {
      case: 'a malformed instance id',
      event: serveNodesRequest([TRIGGER, { ...OTHER, instanceId: 'node-a' }]),
      message: /nodes\[1\]\.instanceId: must be an instance id.*got "node-a"/,
    },
    {
      case: 'no release flag',
      event: { task: 'serve-nodes', nodes: [{ instanceId: TRIGGER.instanceId, allocate: true }] },
      message: /nodes\[0\]\.release: .*expected boolean/,
    },
    {
      case: 'no nodes',
      event: { task: 'serve-nodes', nodes: [] },
      message: /nodes: must list 1 to 50 nodes/,
    },
    {
      case: 'nodes not a list',
      event: { task: 'serve-nodes', nodes: TRIGGER },
      message: /nodes: must list 1 to 50 nodes/,
    },
    {
      case: 'too many nodes',
      event: serveNodesRequest(
        Array.from({ length: MAX_NODES_PER_REQUEST + 1 }, (_, index) => ({
          ...TRIGGER,
          instanceId: `i-${index.toString(16).padStart(17, '0')}`,
        })),
      ),
      message: /nodes: must list 1 to 50 nodes/,
    },
    {
      case: 'a node twice',
      event: serveNodesRequest([TRIGGER, TRIGGER]),
      message: /nodes: must name each instance once/,
    },
    {
      case: 'a node that is not an object',
      event: { task: 'serve-nodes', nodes: [null] },
      message: /nodes\[0\]: .*expected object/,
    },
    {
      case: 'a malformed one-node request',
      event: { task: 'serve-node', ...TRIGGER, instanceId: 'node-a' },
      message: /^instanceId: must be an instance id/,
    },
  ])('refuses $case, naming the field and what is wrong', ({ event, message }) => {
    const decoded = decodeServeNodesRequest(event);
    expect(decoded.ok).toBe(false);
    expect(decoded.ok ? '' : decoded.reason).toMatch(message);
  });
});

describe('the watcher’s reading of the allocate function’s answer', () => {
  it('names the failed nodes and those another invocation held, with its lease’s expiry', () => {
    const answer = JSON.parse(
      JSON.stringify([
        {
          instanceId: TRIGGER.instanceId,
          outcome: { kind: 'served', allocation: { kind: 'busy', leaseExpiresAtEpochMs: 1_700_000_015_000 } },
        },
        { instanceId: OTHER.instanceId, error: 'ThrottlingException: Rate exceeded' },
        { instanceId: 'i-0123456789abcdef2', outcome: { kind: 'served', allocation: { kind: 'allocated' } } },
      ]),
    ) as unknown[];
    expect(nodeServiceResult(answer)).toEqual({
      failures: [{ instanceId: OTHER.instanceId, error: 'ThrottlingException: Rate exceeded' }],
      held: [{ instanceId: TRIGGER.instanceId, leaseExpiresAtEpochMs: 1_700_000_015_000 }],
    });
  });

  it('a busy answer without an expiry (an earlier allocate function) is served as far as the watcher knows', () => {
    const answer = [
      { instanceId: TRIGGER.instanceId, outcome: { kind: 'served', allocation: { kind: 'busy' } } },
    ];
    expect(nodeServiceResult(answer)).toEqual({ failures: [], held: [] });
  });
});
