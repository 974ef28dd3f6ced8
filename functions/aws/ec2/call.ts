import type { EC2Client, Filter, Tag } from '@aws-sdk/client-ec2';
import type { Tags } from '../../core/model.ts';
import { toEc2Failure } from '../ec2-errors.ts';

/**
 * The call layer every EC2 resource module shares: one SDK call or one paginated describe, with
 * EC2's error answers turned into the domain's `Ec2Failure` (ec2-errors.ts) naming the action.
 * Retries of throttling and 5xx live in the client (ec2-retry.ts), not here.
 */

/** The client and the page size of the paginated describes, shared by every resource module. */
export interface Ec2Calls {
  readonly client: EC2Client;
  /** MaxResults of the paginated describes, 5..1000. */
  readonly pageSize: number;
}

/** Runs one SDK call of `action` and converts an EC2 error answer into an `Ec2Failure` naming it. */
export async function ec2<T>(action: string, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw toEc2Failure(error, action);
  }
}

/**
 * Every item of every page an SDK paginator yields (it follows NextToken until EC2 sends none);
 * a failed page's EC2 error becomes an `Ec2Failure` naming `action`.
 */
export async function allPages<Page, Item>(
  action: string,
  pages: AsyncIterable<Page>,
  itemsOf: (page: Page) => Item[] | undefined,
): Promise<Item[]> {
  const items: Item[] = [];
  try {
    for await (const page of pages) items.push(...(itemsOf(page) ?? []));
  } catch (error) {
    throw toEc2Failure(error, action);
  }
  return items;
}

export function filter(name: string, ...values: string[]): Filter {
  return { Name: name, Values: values };
}

export function tagsOf(tags: readonly Tag[] | undefined): Tags {
  const result: Record<string, string> = {};
  for (const tag of tags ?? []) if (tag.Key !== undefined) result[tag.Key] = tag.Value ?? '';
  return result;
}

export function definedStrings(values: readonly (string | undefined)[] | undefined): string[] {
  return (values ?? []).filter((value): value is string => value !== undefined && value !== '');
}
