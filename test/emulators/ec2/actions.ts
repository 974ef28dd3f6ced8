import { ec2Errors } from './errors.ts';
import { applyFilters, type FilterFields } from './filters.ts';
import type { InstanceTypeInfo } from './instance-types.ts';
import type { QueryParams } from './query.ts';
import {
  INSTANCE_STATE_CODES,
  type InstanceRecord,
  type NetworkInterfaceRecord,
  type RouteTableRecord,
  type SecurityGroupRecord,
  type SubnetRecord,
  type VpcRecord,
} from './records.ts';
import {
  renderInstance,
  renderInstanceType,
  renderNetworkInterface,
  renderRouteTable,
  renderSecurityGroup,
  renderSubnet,
  renderVpc,
} from './render.ts';
import type { Ec2State } from './state.ts';
import type { XmlObject } from './xml.ts';

/**
 * One handler per EC2 action: read the Query parameters into a typed request, run it against the
 * state model, render the response body (the children of `<ActionResponse>`). Handlers throw
 * Ec2ApiError for EC2 errors; they are synchronous, so each call applies atomically.
 */
export type ActionHandler = (state: Ec2State, params: QueryParams) => XmlObject;

const RETURN_TRUE: XmlObject = { return: true };

// ------------------------------------------------------------------ pagination

interface PageLimits {
  readonly min: number;
  readonly max: number;
}

/**
 * MaxResults / NextToken paging over items ordered by id (ids are allocated in increasing order,
 * so this is creation order and stays stable while items are added or removed between pages).
 */
function paginate<T>(
  action: string,
  params: QueryParams,
  items: readonly T[],
  idOf: (item: T) => string,
  limits: PageLimits,
): { page: T[]; nextToken: string | undefined } {
  const maxResults = params.integer('MaxResults');
  const token = params.get('NextToken');
  if (maxResults !== undefined && (maxResults < limits.min || maxResults > limits.max)) {
    throw ec2Errors.invalidParameterValue(
      `Value (${maxResults}) for parameter maxResults is invalid. Expecting a value between ${limits.min} and ${limits.max}.`,
    );
  }
  const sorted = [...items].sort((a, b) => compareIds(idOf(a), idOf(b)));
  const after = token === undefined ? undefined : decodeNextToken(action, token);
  const remaining = after === undefined ? sorted : sorted.filter((item) => compareIds(idOf(item), after) > 0);
  if (maxResults === undefined || remaining.length <= maxResults)
    return { page: remaining, nextToken: undefined };
  const page = remaining.slice(0, maxResults);
  const last = page[page.length - 1];
  return { page, nextToken: last === undefined ? undefined : encodeNextToken(action, idOf(last)) };
}

function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function encodeNextToken(action: string, afterId: string): string {
  return Buffer.from(JSON.stringify({ action, afterId })).toString('base64url');
}

function decodeNextToken(action: string, token: string): string {
  try {
    const decoded = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as {
      action?: unknown;
      afterId?: unknown;
    };
    if (decoded.action === action && typeof decoded.afterId === 'string') return decoded.afterId;
  } catch {
    // fall through: not a token of ours
  }
  throw ec2Errors.invalidNextToken(token);
}

/** EC2 refuses MaxResults together with an explicit id list on these actions. */
function rejectIdsWithPaging(params: QueryParams, idParameter: string): void {
  if (params.has(idParameter) && (params.has('MaxResults') || params.has('NextToken'))) {
    throw ec2Errors.invalidParameterCombination(
      `The parameter ${idParameter} cannot be used with MaxResults.`,
    );
  }
}

/** Resolves an explicit id list: every id must exist (the lookup throws the action's NotFound). */
function selectByIds<T>(ids: string[], lookup: (id: string) => T): T[] {
  return ids.map(lookup);
}

// ------------------------------------------------------------------ filter fields

const networkInterfaceFilterFields: FilterFields<NetworkInterfaceRecord> = {
  'network-interface-id': (eni) => [eni.networkInterfaceId],
  'attachment.instance-id': (eni) => [eni.attachment?.instanceId],
  'attachment.attachment-id': (eni) => [eni.attachment?.attachmentId],
  'attachment.device-index': (eni) => [eni.attachment?.deviceIndex],
  'attachment.status': (eni) => [eni.attachment?.status],
  'attachment.delete-on-termination': (eni) => [eni.attachment?.deleteOnTermination],
  'attachment.network-card-index': (eni) => [eni.attachment?.networkCardIndex],
  status: (eni) => [eni.status],
  'vpc-id': (eni) => [eni.vpcId],
  'subnet-id': (eni) => [eni.subnetId],
  'availability-zone': (eni) => [eni.availabilityZone],
  description: (eni) => [eni.description],
  'private-ip-address': (eni) => [eni.privateIpAddress],
  'addresses.private-ip-address': (eni) => [eni.privateIpAddress, ...eni.secondaryPrivateIpAddresses],
  'ipv4-prefix': (eni) => eni.ipv4Prefixes,
  'ipv6-prefix': (eni) => eni.ipv6Prefixes,
  'group-id': (eni) => eni.securityGroupIds,
  'mac-address': (eni) => [eni.macAddress],
  'interface-type': (eni) => [eni.interfaceType],
  'requester-managed': (eni) => [eni.requesterManaged],
  'private-dns-name': (eni) => [eni.privateDnsName],
};

function instanceFilterFields(state: Ec2State): FilterFields<InstanceRecord> {
  return {
    'instance-id': (instance) => [instance.instanceId],
    'instance-state-name': (instance) => [instance.state],
    'instance-state-code': (instance) => [INSTANCE_STATE_CODES[instance.state]],
    'instance-type': (instance) => [instance.instanceType],
    'private-dns-name': (instance) => [instance.state === 'terminated' ? undefined : instance.privateDnsName],
    'private-ip-address': (instance) => [
      instance.state === 'terminated' ? undefined : instance.privateIpAddress,
    ],
    'subnet-id': (instance) => [instance.subnetId],
    'vpc-id': (instance) => [instance.vpcId],
    'availability-zone': (instance) => [instance.availabilityZone],
    'network-interface.network-interface-id': (instance) =>
      state.instanceNetworkInterfaces(instance.instanceId).map((eni) => eni.networkInterfaceId),
  };
}

const subnetFilterFields: FilterFields<SubnetRecord> = {
  'subnet-id': (subnet) => [subnet.subnetId],
  'vpc-id': (subnet) => [subnet.vpcId],
  'availability-zone': (subnet) => [subnet.availabilityZone],
  'cidr-block': (subnet) => [subnet.cidrBlock],
  'ipv6-cidr-block-association.ipv6-cidr-block': (subnet) => [subnet.ipv6CidrBlock],
  state: () => ['available'],
};

const vpcFilterFields: FilterFields<VpcRecord> = {
  'vpc-id': (vpc) => [vpc.vpcId],
  'cidr-block': (vpc) => [vpc.cidrBlock],
  'cidr-block-association.cidr-block': (vpc) =>
    vpc.cidrBlockAssociations.map((association) => association.cidrBlock),
  'ipv6-cidr-block-association.ipv6-cidr-block': (vpc) =>
    vpc.ipv6CidrBlockAssociations.map((association) => association.ipv6CidrBlock),
  'is-default': (vpc) => [vpc.isDefault],
  state: () => ['available'],
};

const securityGroupFilterFields: FilterFields<SecurityGroupRecord> = {
  'group-id': (group) => [group.groupId],
  'group-name': (group) => [group.groupName],
  'vpc-id': (group) => [group.vpcId],
  description: (group) => [group.description],
};

function routeTableFilterFields(state: Ec2State): FilterFields<RouteTableRecord> {
  return {
    'route-table-id': (table) => [table.routeTableId],
    'vpc-id': (table) => [table.vpcId],
    'association.main': (table) => [table.main],
    // Only explicit associations match, as in EC2: a subnet on the main table is not found this way.
    'association.subnet-id': (table) =>
      state.explicitSubnetAssociations(table.routeTableId).map((subnet) => subnet.subnetId),
  };
}

const instanceTypeFilterFields: FilterFields<InstanceTypeInfo & { tags: Record<string, string> }> = {
  'instance-type': (info) => [info.instanceType],
  hypervisor: (info) => [info.hypervisor],
  'bare-metal': (info) => [info.bareMetal],
};

// ------------------------------------------------------------------ describe actions

const describeNetworkInterfaces: ActionHandler = (state, params) => {
  rejectIdsWithPaging(params, 'NetworkInterfaceId');
  const ids = params.list('NetworkInterfaceId');
  const candidates =
    ids.length > 0
      ? selectByIds(ids, (id) => state.requireVisibleNetworkInterface(id))
      : state.listVisibleNetworkInterfaces();
  const filtered = applyFilters(candidates, params.filters(), networkInterfaceFilterFields);
  const { page, nextToken } = paginate(
    'DescribeNetworkInterfaces',
    params,
    filtered,
    (eni) => eni.networkInterfaceId,
    {
      min: 5,
      max: 1000,
    },
  );
  return { networkInterfaceSet: page.map((eni) => renderNetworkInterface(state, eni)), nextToken };
};

/** One reservation per launch; a page holds whole instances grouped back into their reservations. */
const describeInstances: ActionHandler = (state, params) => {
  rejectIdsWithPaging(params, 'InstanceId');
  const ids = params.list('InstanceId');
  const candidates =
    ids.length > 0 ? selectByIds(ids, (id) => state.requireInstance(id)) : state.listInstances();
  const filtered = applyFilters(candidates, params.filters(), instanceFilterFields(state));
  const { page, nextToken } = paginate(
    'DescribeInstances',
    params,
    filtered,
    (instance) => instance.instanceId,
    {
      min: 5,
      max: 1000,
    },
  );
  const reservations = new Map<string, InstanceRecord[]>();
  for (const instance of page) {
    reservations.set(instance.reservationId, [...(reservations.get(instance.reservationId) ?? []), instance]);
  }
  return {
    reservationSet: [...reservations].map(([reservationId, instances]) => ({
      reservationId,
      ownerId: state.accountId,
      groupSet: [],
      instancesSet: instances.map((instance) => renderInstance(state, instance)),
    })),
    nextToken,
  };
};

const describeInstanceTypes: ActionHandler = (state, params) => {
  const names = params.list('InstanceType');
  let candidates = state.allInstanceTypes();
  if (names.length > 0) {
    const unknown = names.filter((name) => !state.instanceTypeInfo(name));
    if (unknown.length > 0) throw ec2Errors.invalidInstanceType(unknown);
    candidates = candidates.filter((info) => names.includes(info.instanceType));
  }
  const filtered = applyFilters(
    candidates.map((info) => ({ ...info, tags: {} })),
    params.filters(),
    instanceTypeFilterFields,
  );
  const { page, nextToken } = paginate(
    'DescribeInstanceTypes',
    params,
    filtered,
    (info) => info.instanceType,
    {
      min: 5,
      max: 100,
    },
  );
  return { instanceTypeSet: page.map(renderInstanceType), nextToken };
};

const describeSubnets: ActionHandler = (state, params) => {
  const ids = params.list('SubnetId');
  const candidates = ids.length > 0 ? selectByIds(ids, (id) => state.requireSubnet(id)) : state.listSubnets();
  const filtered = applyFilters(candidates, params.filters(), subnetFilterFields);
  const { page, nextToken } = paginate('DescribeSubnets', params, filtered, (subnet) => subnet.subnetId, {
    min: 5,
    max: 1000,
  });
  return { subnetSet: page.map((subnet) => renderSubnet(state, subnet)), nextToken };
};

const describeVpcs: ActionHandler = (state, params) => {
  const ids = params.list('VpcId');
  const candidates = ids.length > 0 ? selectByIds(ids, (id) => state.requireVpc(id)) : state.listVpcs();
  const filtered = applyFilters(candidates, params.filters(), vpcFilterFields);
  const { page, nextToken } = paginate('DescribeVpcs', params, filtered, (vpc) => vpc.vpcId, {
    min: 5,
    max: 1000,
  });
  return { vpcSet: page.map((vpc) => renderVpc(state, vpc)), nextToken };
};

const describeSecurityGroups: ActionHandler = (state, params) => {
  const ids = params.list('GroupId');
  const names = params.list('GroupName');
  let candidates =
    ids.length > 0 ? selectByIds(ids, (id) => state.requireSecurityGroup(id)) : state.listSecurityGroups();
  if (names.length > 0) {
    const missing = names.find((name) => !candidates.some((group) => group.groupName === name));
    if (missing !== undefined) throw ec2Errors.securityGroupNotFound(missing);
    candidates = candidates.filter((group) => names.includes(group.groupName));
  }
  const filtered = applyFilters(candidates, params.filters(), securityGroupFilterFields);
  const { page, nextToken } = paginate('DescribeSecurityGroups', params, filtered, (group) => group.groupId, {
    min: 5,
    max: 1000,
  });
  return { securityGroupInfo: page.map((group) => renderSecurityGroup(state, group)), nextToken };
};

const describeRouteTables: ActionHandler = (state, params) => {
  const ids = params.list('RouteTableId');
  const candidates =
    ids.length > 0 ? selectByIds(ids, (id) => state.requireRouteTable(id)) : state.listRouteTables();
  const filtered = applyFilters(candidates, params.filters(), routeTableFilterFields(state));
  const { page, nextToken } = paginate(
    'DescribeRouteTables',
    params,
    filtered,
    (table) => table.routeTableId,
    {
      min: 5,
      max: 100,
    },
  );
  return { routeTableSet: page.map((table) => renderRouteTable(state, table)), nextToken };
};

// ------------------------------------------------------------------ mutating actions

/** TagSpecification on create: only `network-interface` tags apply to an ENI. */
function networkInterfaceTags(params: QueryParams): Record<string, string> {
  const tags: Record<string, string> = {};
  for (const spec of params.tagSpecifications()) {
    if (spec.resourceType !== 'network-interface') {
      throw ec2Errors.invalidParameterValue(
        `'${spec.resourceType ?? ''}' is not a valid taggable resource type for this operation.`,
      );
    }
    Object.assign(tags, spec.tags);
  }
  return tags;
}

const createNetworkInterface: ActionHandler = (state, params) => {
  const clientToken = params.get('ClientToken');
  const { networkInterface } = state.createNetworkInterface({
    subnetId: params.required('SubnetId'),
    securityGroupIds: params.list('SecurityGroupId'),
    description: params.get('Description'),
    privateIpAddress: params.get('PrivateIpAddress'),
    privateIpAddresses: params.members('PrivateIpAddresses').map((entry) => ({
      privateIpAddress: entry.required('PrivateIpAddress'),
      primary: entry.boolean('Primary') ?? false,
    })),
    secondaryPrivateIpAddressCount: params.integer('SecondaryPrivateIpAddressCount'),
    ipv4PrefixCount: params.integer('Ipv4PrefixCount'),
    ipv4Prefixes: params.members('Ipv4Prefix').map((entry) => entry.required('Ipv4Prefix')),
    ipv6PrefixCount: params.integer('Ipv6PrefixCount'),
    ipv6Prefixes: params.members('Ipv6Prefix').map((entry) => entry.required('Ipv6Prefix')),
    ipv6AddressCount: params.integer('Ipv6AddressCount'),
    interfaceType: params.get('InterfaceType'),
    tags: networkInterfaceTags(params),
    clientToken,
  });
  return { networkInterface: renderNetworkInterface(state, networkInterface), clientToken };
};

const attachNetworkInterface: ActionHandler = (state, params) => {
  const attachment = state.attachNetworkInterface({
    networkInterfaceId: params.required('NetworkInterfaceId'),
    instanceId: params.required('InstanceId'),
    deviceIndex: params.requiredInteger('DeviceIndex'),
    networkCardIndex: params.integer('NetworkCardIndex'),
  });
  return { attachmentId: attachment.attachmentId, networkCardIndex: attachment.networkCardIndex };
};

const modifyNetworkInterfaceAttribute: ActionHandler = (state, params) => {
  const attachment = params.has('Attachment') ? params.struct('Attachment') : undefined;
  state.modifyNetworkInterfaceAttribute({
    networkInterfaceId: params.required('NetworkInterfaceId'),
    attachment: attachment && {
      attachmentId: attachment.required('AttachmentId'),
      deleteOnTermination: attachment.boolean('DeleteOnTermination'),
    },
    description: params.has('Description') ? (params.get('Description.Value') ?? '') : undefined,
    securityGroupIds: params.has('SecurityGroupId') ? params.list('SecurityGroupId') : undefined,
  });
  return RETURN_TRUE;
};

const assignPrivateIpAddresses: ActionHandler = (state, params) => {
  const networkInterfaceId = params.required('NetworkInterfaceId');
  const assigned = state.assignPrivateIpAddresses({
    networkInterfaceId,
    secondaryPrivateIpAddressCount: params.integer('SecondaryPrivateIpAddressCount'),
    privateIpAddresses: params.list('PrivateIpAddress'),
    ipv4PrefixCount: params.integer('Ipv4PrefixCount'),
    ipv4Prefixes: params.list('Ipv4Prefix'),
  });
  return {
    networkInterfaceId,
    assignedPrivateIpAddressesSet: assigned.addresses.map((privateIpAddress) => ({ privateIpAddress })),
    assignedIpv4PrefixSet: assigned.prefixes.map((ipv4Prefix) => ({ ipv4Prefix })),
    return: true,
  };
};

const assignIpv6Addresses: ActionHandler = (state, params) => {
  const networkInterfaceId = params.required('NetworkInterfaceId');
  const assigned = state.assignIpv6Addresses({
    networkInterfaceId,
    ipv6PrefixCount: params.integer('Ipv6PrefixCount'),
    ipv6Prefixes: params.list('Ipv6Prefix'),
    ipv6AddressCount: params.integer('Ipv6AddressCount'),
    ipv6Addresses: params.list('Ipv6Addresses'),
  });
  return {
    networkInterfaceId,
    assignedIpv6Addresses: [],
    assignedIpv6PrefixSet: assigned.prefixes,
  };
};

const unassignIpv6Addresses: ActionHandler = (state, params) => {
  const networkInterfaceId = params.required('NetworkInterfaceId');
  const unassigned = state.unassignIpv6Addresses({
    networkInterfaceId,
    ipv6Prefixes: params.list('Ipv6Prefix'),
    ipv6Addresses: params.list('Ipv6Addresses'),
  });
  return { networkInterfaceId, unassignedIpv6Addresses: [], unassignedIpv6PrefixSet: unassigned.prefixes };
};

const unassignPrivateIpAddresses: ActionHandler = (state, params) => {
  state.unassignPrivateIpAddresses({
    networkInterfaceId: params.required('NetworkInterfaceId'),
    privateIpAddresses: params.list('PrivateIpAddress'),
    ipv4Prefixes: params.list('Ipv4Prefix'),
  });
  return RETURN_TRUE;
};

const detachNetworkInterface: ActionHandler = (state, params) => {
  params.boolean('Force');
  state.detachNetworkInterface(params.required('AttachmentId'));
  return RETURN_TRUE;
};

const deleteNetworkInterface: ActionHandler = (state, params) => {
  state.deleteNetworkInterface(params.required('NetworkInterfaceId'));
  return RETURN_TRUE;
};

function requiredResourceIds(params: QueryParams): string[] {
  const resourceIds = params.list('ResourceId');
  if (resourceIds.length === 0) throw ec2Errors.missingParameter('ResourceId');
  return resourceIds;
}

const createTags: ActionHandler = (state, params) => {
  const resourceIds = requiredResourceIds(params);
  const tags = params.tags('Tag');
  if (Object.keys(tags).length === 0) throw ec2Errors.missingParameter('Tag');
  state.createTags(resourceIds, tags);
  return RETURN_TRUE;
};

const deleteTags: ActionHandler = (state, params) => {
  state.deleteTags(requiredResourceIds(params), params.tagKeys('Tag'));
  return RETURN_TRUE;
};

/** Every action the emulator speaks; anything else answers InvalidAction. */
export const ACTION_HANDLERS: Readonly<Record<string, ActionHandler>> = {
  DescribeInstances: describeInstances,
  DescribeInstanceTypes: describeInstanceTypes,
  DescribeSubnets: describeSubnets,
  DescribeVpcs: describeVpcs,
  DescribeSecurityGroups: describeSecurityGroups,
  DescribeRouteTables: describeRouteTables,
  DescribeNetworkInterfaces: describeNetworkInterfaces,
  CreateNetworkInterface: createNetworkInterface,
  AttachNetworkInterface: attachNetworkInterface,
  ModifyNetworkInterfaceAttribute: modifyNetworkInterfaceAttribute,
  AssignPrivateIpAddresses: assignPrivateIpAddresses,
  UnassignPrivateIpAddresses: unassignPrivateIpAddresses,
  AssignIpv6Addresses: assignIpv6Addresses,
  UnassignIpv6Addresses: unassignIpv6Addresses,
  DetachNetworkInterface: detachNetworkInterface,
  DeleteNetworkInterface: deleteNetworkInterface,
  CreateTags: createTags,
  DeleteTags: deleteTags,
};
