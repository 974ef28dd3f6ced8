import * as z from 'zod/mini';
import { type Decoded, decodeWith, instanceIdSchema } from './input-schema.ts';

/**
 * The EventBridge events the allocate function acts on, as schemas. Pure. Bad input is answered
 * with a reason, never thrown: retrying cannot fix a malformed event (karpenter's statechange
 * parser does the same).
 */

export const EC2_STATE_CHANGE_DETAIL_TYPE = 'EC2 Instance State-change Notification';
export const EC2_SPOT_INTERRUPTION_DETAIL_TYPE = 'EC2 Spot Instance Interruption Warning';
const SCHEDULED_EVENT_DETAIL_TYPE = 'Scheduled Event';

const INSTANCE_STATES = ['pending', 'running', 'stopping', 'stopped', 'shutting-down', 'terminated'] as const;
type InstanceStateName = (typeof INSTANCE_STATES)[number];

/** Spot actions are `terminate`, `stop` and `hibernate`; a longer text is not one EC2 sends. */
const MAX_SPOT_ACTION_CHARS = 32;

export type Ec2Event =
  | { readonly kind: 'state-change'; readonly instanceId: string; readonly state: InstanceStateName }
  | { readonly kind: 'spot-interruption'; readonly instanceId: string; readonly action: string }
  | { readonly kind: 'scheduled' };

const stateChangeEvent = z.object({
  'detail-type': z.literal(EC2_STATE_CHANGE_DETAIL_TYPE),
  source: z.literal('aws.ec2'),
  detail: z.object({ 'instance-id': instanceIdSchema, state: z.enum(INSTANCE_STATES) }),
});

const spotInterruptionEvent = z.object({
  'detail-type': z.literal(EC2_SPOT_INTERRUPTION_DETAIL_TYPE),
  source: z.literal('aws.ec2'),
  detail: z.object({
    'instance-id': instanceIdSchema,
    'instance-action': z.optional(z.string().check(z.maxLength(MAX_SPOT_ACTION_CHARS))),
  }),
});

/** An EventBridge schedule's event (`source` `aws.events`); the sweep and the watcher run on these. */
export const scheduledEvent = z.object({
  'detail-type': z.literal(SCHEDULED_EVENT_DETAIL_TYPE),
  source: z.literal('aws.events'),
});

const ec2Event = z.discriminatedUnion('detail-type', [
  stateChangeEvent,
  spotInterruptionEvent,
  scheduledEvent,
]);

export function parseEc2Event(event: unknown): Decoded<Ec2Event> {
  const decoded = decodeWith(ec2Event, event);
  if (!decoded.ok) return decoded;
  const parsed = decoded.value;
  switch (parsed['detail-type']) {
    case SCHEDULED_EVENT_DETAIL_TYPE:
      return { ok: true, value: { kind: 'scheduled' } };
    case EC2_STATE_CHANGE_DETAIL_TYPE:
      return {
        ok: true,
        value: { kind: 'state-change', instanceId: parsed.detail['instance-id'], state: parsed.detail.state },
      };
    case EC2_SPOT_INTERRUPTION_DETAIL_TYPE:
      return {
        ok: true,
        value: {
          kind: 'spot-interruption',
          instanceId: parsed.detail['instance-id'],
          action: parsed.detail['instance-action'] ?? 'unknown',
        },
      };
  }
}
