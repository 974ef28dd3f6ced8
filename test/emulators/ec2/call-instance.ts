import { ENI_TAG_KEYS } from '../../../functions/core/eni-ownership.ts';
import type { Ec2State } from './state.ts';

/**
 * The instance an EC2 call works for: its InstanceId, the instance tag of a create, or the ENI's
 * attachment (else its instance tag). What a `before-apply` hook uses to kill the function that
 * serves that instance.
 */
export function instanceOfEc2Call(
  state: Pick<Ec2State, 'networkInterface'>,
  action: string,
  params: Readonly<Record<string, string>>,
): string | undefined {
  if (action === 'AttachNetworkInterface') return params.InstanceId;
  if (action === 'CreateNetworkInterface') {
    for (const [key, value] of Object.entries(params)) {
      const match = /^(TagSpecification\.\d+\.Tag\.\d+)\.Key$/.exec(key);
      if (match && value === ENI_TAG_KEYS.instanceId) return params[`${match[1]}.Value`];
    }
    return undefined;
  }
  const eniId = params.NetworkInterfaceId;
  if (eniId === undefined) return undefined;
  const eni = state.networkInterface(eniId);
  return eni?.attachment?.instanceId ?? eni?.tags[ENI_TAG_KEYS.instanceId];
}
