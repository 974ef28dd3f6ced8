import { ec2Errors } from './errors.ts';
import type { Filter } from './query.ts';

/**
 * EC2 `Filter.N.Name` / `Filter.N.Value.M` semantics: values of one filter are ORed, filters are
 * ANDed, values may use the `*` and `?` wildcards, `tag:<key>` matches a tag's value and
 * `tag-key` a tag's key. A filter name the action does not know is rejected with
 * InvalidParameterValue, as EC2 does, so a typo in our code cannot silently match everything.
 */
export type FilterFields<T> = Record<
  string,
  (item: T) => ReadonlyArray<string | number | boolean | undefined>
>;

export function applyFilters<T extends { readonly tags: Readonly<Record<string, string>> }>(
  items: readonly T[],
  filters: readonly Filter[],
  fields: FilterFields<T>,
): T[] {
  const predicates = filters.map((filter) => filterPredicate(filter, fields));
  return items.filter((item) => predicates.every((matches) => matches(item)));
}

function filterPredicate<T extends { readonly tags: Readonly<Record<string, string>> }>(
  filter: Filter,
  fields: FilterFields<T>,
): (item: T) => boolean {
  const patterns = filter.values.map(wildcardPattern);
  const anyValueMatches = (candidates: ReadonlyArray<string | number | boolean | undefined>): boolean =>
    candidates.some(
      (candidate) => candidate !== undefined && patterns.some((pattern) => pattern.test(String(candidate))),
    );

  if (filter.name.startsWith('tag:')) {
    const key = filter.name.slice('tag:'.length);
    return (item) => anyValueMatches([item.tags[key]]);
  }
  if (filter.name === 'tag-key') return (item) => anyValueMatches(Object.keys(item.tags));
  if (filter.name === 'tag-value') return (item) => anyValueMatches(Object.values(item.tags));
  const field = fields[filter.name];
  if (!field) throw ec2Errors.invalidFilter(filter.name);
  return (item) => anyValueMatches(field(item));
}

function wildcardPattern(value: string): RegExp {
  const escaped = value
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${escaped}$`, 's');
}
