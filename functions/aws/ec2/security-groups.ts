import { paginateDescribeSecurityGroups } from '@aws-sdk/client-ec2';
import type { SecurityGroupView } from '../../core/model.ts';
import { allPages, type Ec2Calls, filter, tagsOf } from './call.ts';

/** The VPC's security groups (DescribeSecurityGroups, every page), read fresh each time. */
export async function describeSecurityGroups(calls: Ec2Calls, vpcId: string): Promise<SecurityGroupView[]> {
  const groups = await allPages(
    'DescribeSecurityGroups',
    paginateDescribeSecurityGroups(
      { client: calls.client, pageSize: calls.pageSize },
      { Filters: [filter('vpc-id', vpcId)] },
    ),
    (page) => page.SecurityGroups,
  );
  return groups.map((group) => ({
    id: group.GroupId ?? '',
    vpcId: group.VpcId ?? '',
    tags: tagsOf(group.Tags),
  }));
}
