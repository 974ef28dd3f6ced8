import { compareStrings, matchesAllTags } from './eni-selection.ts';
import type { InstanceView, NodeKnobs, SubnetView, Tags } from './model.ts';

/**
 * Where a new ENI goes. Pure; mirrors cilium `findSuitableSubnet`
 * (https://github.com/cilium/cilium/blob/507103c61f/pkg/aws/eni/node.go) but returns every usable subnet in preference order so the caller can fall back
 * to the next one when EC2 answers `InsufficientFreeAddressesInSubnet`.
 */

/** Which rule of the heuristic put a subnet on the list. */
type SubnetChoiceRule = 'subnet-ids' | 'subnet-tags' | 'node-subnet' | 'node-route-table' | 'vpc-and-zone';

export interface SubnetCandidate {
  readonly subnet: SubnetView;
  readonly rule: SubnetChoiceRule;
}

export interface SubnetChoiceInputs {
  readonly instance: Pick<InstanceView, 'vpcId' | 'availabilityZone' | 'subnetId'>;
  readonly subnets: readonly SubnetView[];
  readonly knobs: Pick<NodeKnobs, 'subnetIds' | 'subnetTags'>;
  /** `Ipv4AddressesPerInterface` of the instance type: the node subnet must have this many free. */
  readonly ipv4PerInterface: number;
  /** Subnets to skip: those that refused what the plan would ask for during this invocation. */
  readonly refusedSubnetIds?: readonly string[];
}

/**
 * The subnets a new ENI may be created in, best first. Only subnets in the instance's VPC and
 * availability zone with `availableAddresses > 0` and not in `refusedSubnetIds` are eligible. In
 * order, each subnet listed once at its first matching rule:
 * 1. `subnet-ids` (when set): the listed subnets, most free addresses first;
 * 2. `subnet-tags` (when set): subnets carrying all the tags, most free first;
 * 3. the node's own subnet (the instance's primary ENI subnet), if it has at least
 *    `ipv4PerInterface` free addresses;
 * 4. other subnets associated with the node subnet's route table, most free first;
 * 5. any other eligible subnet, most free first.
 * Ties on free addresses are broken by subnet id. An empty list means no subnet can take an ENI.
 *
 * Differences from cilium, on purpose: cilium returns one subnet and may return an exhausted one
 * from rule 1 or 2 (it never checks free addresses there); we never offer a subnet with 0 free.
 * Like cilium (since `eec7036ba0`), rules 1 and 2 fall through to 3-5 when their subnets are full
 * or match nothing, with one exception (`subnetIdsNameNothingHere`): when `subnet-ids` is set, no
 * listed subnet is in the instance's VPC and zone, and `subnet-tags` finds none there either, the
 * list is empty. Cilium then quietly puts the ENI in the node subnet; but whoever lists subnet ids
 * asks for pod addresses in THOSE subnets (their route tables, NACLs, address plan), and an id that
 * names a subnet of another VPC, or none at all, is a mistake to report, not a hint to ignore. The
 * planner reports it (`SubnetIdsUnusable`). A list that spans zones (the agent's cluster-wide
 * `--subnet-ids-filter`) is served wherever it names a subnet of the node's zone.
 * Cilium's rule 4 only looks at subnets listed in `subnet-ids`; ours looks at every eligible one.
 */
export function chooseSubnets(inputs: SubnetChoiceInputs): SubnetCandidate[] {
  if (subnetIdsNameNothingHere(inputs)) return [];
  const eligible = eligibleSubnets(inputs);
  const chosen: SubnetCandidate[] = [];
  const chosenIds = new Set<string>();
  const add = (subnets: readonly SubnetView[], rule: SubnetChoiceRule): void => {
    for (const subnet of sortByMostFree(subnets)) {
      if (chosenIds.has(subnet.id)) continue;
      chosenIds.add(subnet.id);
      chosen.push({ subnet, rule });
    }
  };

  const { subnetIds, subnetTags } = inputs.knobs;
  if (subnetIds.length > 0) {
    const listed = new Set(subnetIds);
    add(
      eligible.filter((subnet) => listed.has(subnet.id)),
      'subnet-ids',
    );
  }
  if (hasTags(subnetTags)) {
    add(
      eligible.filter((subnet) => matchesAllTags(subnet.tags, subnetTags)),
      'subnet-tags',
    );
  }
  const nodeSubnet = eligible.find((subnet) => subnet.id === inputs.instance.subnetId);
  if (nodeSubnet !== undefined && nodeSubnet.availableAddresses >= inputs.ipv4PerInterface) {
    add([nodeSubnet], 'node-subnet');
  }
  const nodeRouteTableId = inputs.subnets.find(
    (subnet) => subnet.id === inputs.instance.subnetId,
  )?.routeTableId;
  if (nodeRouteTableId !== undefined) {
    add(
      eligible.filter(
        (subnet) => subnet.id !== inputs.instance.subnetId && subnet.routeTableId === nodeRouteTableId,
      ),
      'node-route-table',
    );
  }
  add(eligible, 'vpc-and-zone');
  return chosen;
}

/**
 * Whether `subnet-ids` is set but names no subnet of the instance's VPC and zone (whatever its free
 * addresses), and `subnet-tags` matches none there either: a new ENI has nowhere it was allowed to
 * go. `inputs.subnets` must list every subnet of that VPC and zone (the EC2 adapter's listing does),
 * so an id missing from it is unknown, in another VPC, or in another zone.
 */
export function subnetIdsNameNothingHere(
  inputs: Pick<SubnetChoiceInputs, 'instance' | 'subnets' | 'knobs'>,
): boolean {
  const { subnetIds, subnetTags } = inputs.knobs;
  if (subnetIds.length === 0) return false;
  const here = inputs.subnets.filter(
    (subnet) =>
      subnet.vpcId === inputs.instance.vpcId && subnet.availabilityZone === inputs.instance.availabilityZone,
  );
  const listed = new Set(subnetIds);
  if (here.some((subnet) => listed.has(subnet.id))) return false;
  return !(hasTags(subnetTags) && here.some((subnet) => matchesAllTags(subnet.tags, subnetTags)));
}

/** The candidates' ids, in order: what the create-ENI plan carries. */
export function subnetIdsOf(candidates: readonly SubnetCandidate[]): string[] {
  return candidates.map((candidate) => candidate.subnet.id);
}

/** Subnets in the instance's VPC and zone that have free addresses and were not excluded. */
function eligibleSubnets(inputs: SubnetChoiceInputs): SubnetView[] {
  const excluded = new Set(inputs.refusedSubnetIds ?? []);
  return inputs.subnets.filter(
    (subnet) =>
      subnet.vpcId === inputs.instance.vpcId &&
      subnet.availabilityZone === inputs.instance.availabilityZone &&
      subnet.availableAddresses > 0 &&
      !excluded.has(subnet.id),
  );
}

/** Most free addresses first; ties by subnet id. */
function sortByMostFree(subnets: readonly SubnetView[]): SubnetView[] {
  return [...subnets].sort(
    (left, right) => right.availableAddresses - left.availableAddresses || compareStrings(left.id, right.id),
  );
}

function hasTags(tags: Tags): boolean {
  return Object.keys(tags).length > 0;
}
