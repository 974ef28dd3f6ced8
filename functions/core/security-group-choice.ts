import { compareStrings, matchesAllTags } from './eni-selection.ts';
import type { EniState, NodeKnobs, SecurityGroupView } from './model.ts';

/**
 * Which security groups a new ENI gets. Pure; mirrors cilium `getSecurityGroupIDs`
 * (https://github.com/cilium/cilium/blob/507103c61f/pkg/aws/eni/node.go).
 */

/** Which rule produced the groups. */
type SecurityGroupSource = 'spec-ids' | 'spec-tags' | 'primary-eni';

export type SecurityGroupChoice =
  | {
      readonly kind: 'chosen';
      readonly securityGroupIds: readonly string[];
      readonly source: SecurityGroupSource;
    }
  | { readonly kind: 'blocked'; readonly code: 'NoSecurityGroups'; readonly message: string };

export interface SecurityGroupChoiceInputs {
  readonly vpcId: string;
  readonly knobs: Pick<NodeKnobs, 'securityGroups' | 'securityGroupTags'>;
  /** Security groups known in the account (any VPC); filtered to `vpcId` here. */
  readonly securityGroups: readonly SecurityGroupView[];
  /** ENIs attached to the instance; the one at device index 0 is the primary ENI (eth0). */
  readonly enis: readonly EniState[];
}

/**
 * The groups for a new ENI, first rule that yields any:
 * 1. `spec.eni.security-groups`, verbatim (order kept, duplicates dropped);
 * 2. `spec.eni.security-group-tags`: every group in the instance's VPC carrying all the tags,
 *    sorted by id (when none match, fall through, as cilium does after a warning);
 * 3. the groups of the primary ENI (device index 0), sorted by id.
 * Nothing from all three is `blocked` (cilium: "failed to get security group ids"). Unlike cilium,
 * a primary ENI with an empty group list also blocks rather than creating an ENI with EC2's default
 * group.
 */
export function chooseSecurityGroups(inputs: SecurityGroupChoiceInputs): SecurityGroupChoice {
  const { securityGroups: explicitIds, securityGroupTags } = inputs.knobs;
  if (explicitIds.length > 0) {
    return { kind: 'chosen', securityGroupIds: [...new Set(explicitIds)], source: 'spec-ids' };
  }
  if (Object.keys(securityGroupTags).length > 0) {
    const tagged = inputs.securityGroups
      .filter((group) => group.vpcId === inputs.vpcId && matchesAllTags(group.tags, securityGroupTags))
      .map((group) => group.id);
    if (tagged.length > 0) {
      return { kind: 'chosen', securityGroupIds: sortedUnique(tagged), source: 'spec-tags' };
    }
  }
  const primaryEniGroups = inputs.enis.find((eni) => eni.deviceIndex === 0)?.securityGroupIds ?? [];
  if (primaryEniGroups.length > 0) {
    return { kind: 'chosen', securityGroupIds: sortedUnique(primaryEniGroups), source: 'primary-eni' };
  }
  return {
    kind: 'blocked',
    code: 'NoSecurityGroups',
    message:
      `failed to get security group ids: none configured, none in ${inputs.vpcId} matching ` +
      `SecurityGroupTags=${formatTags(securityGroupTags)}, and the primary ENI has none`,
  };
}

function sortedUnique(ids: readonly string[]): string[] {
  return [...new Set(ids)].sort(compareStrings);
}

/** Renders tags the way cilium's messages show a Go map: `map[k1:v1 k2:v2]`, keys sorted. */
export function formatTags(tags: Readonly<Record<string, string>>): string {
  const pairs = Object.keys(tags)
    .sort(compareStrings)
    .map((key) => `${key}:${tags[key]}`);
  return `map[${pairs.join(' ')}]`;
}
