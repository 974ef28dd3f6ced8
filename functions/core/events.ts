/**
 * Parsing the EventBridge events the allocator acts on. Pure. Bad input is answered with a reason,
 * never thrown: retrying cannot fix a malformed event (karpenter's statechange parser does the same).
 */

export const EC2_STATE_CHANGE_DETAIL_TYPE = 'EC2 Instance State-change Notification';
export const EC2_SPOT_INTERRUPTION_DETAIL_TYPE = 'EC2 Spot Instance Interruption Warning';
export const SCHEDULED_EVENT_DETAIL_TYPE = 'Scheduled Event';

const INSTANCE_ID = /^i-[0-9a-f]{8,17}$/;
const INSTANCE_STATES = ['pending', 'running', 'stopping', 'stopped', 'shutting-down', 'terminated'] as const;
export type InstanceStateName = (typeof INSTANCE_STATES)[number];

export type Ec2Event =
  | { readonly kind: 'state-change'; readonly instanceId: string; readonly state: InstanceStateName }
  | { readonly kind: 'spot-interruption'; readonly instanceId: string; readonly action: string }
  | { readonly kind: 'scheduled' }
  | { readonly kind: 'invalid'; readonly reason: string };

export function parseEc2Event(event: unknown): Ec2Event {
  if (!isObject(event)) return invalid(`expected an EventBridge event object, got ${describe(event)}`);
  const detailType = event['detail-type'];
  if (detailType === SCHEDULED_EVENT_DETAIL_TYPE && event.source === 'aws.events')
    return { kind: 'scheduled' };
  if (event.source !== 'aws.ec2') return invalid(`expected source aws.ec2, got ${describe(event.source)}`);
  const detail = event.detail;
  if (!isObject(detail)) return invalid('the event has no detail object');
  const instanceId = detail['instance-id'];
  if (typeof instanceId !== 'string' || !INSTANCE_ID.test(instanceId)) {
    return invalid(`detail.instance-id is not an instance id: ${describe(instanceId)}`);
  }
  if (detailType === EC2_STATE_CHANGE_DETAIL_TYPE) {
    const state = detail.state;
    if (!INSTANCE_STATES.includes(state as InstanceStateName)) {
      return invalid(`detail.state is not an EC2 instance state: ${describe(state)}`);
    }
    return { kind: 'state-change', instanceId, state: state as InstanceStateName };
  }
  if (detailType === EC2_SPOT_INTERRUPTION_DETAIL_TYPE) {
    const action = detail['instance-action'];
    return { kind: 'spot-interruption', instanceId, action: typeof action === 'string' ? action : 'unknown' };
  }
  return invalid(`unexpected detail-type ${describe(detailType)}`);
}

function invalid(reason: string): Ec2Event {
  return { kind: 'invalid', reason };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  const text = JSON.stringify(value);
  return text === undefined ? String(value) : text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
