import { ec2Errors } from './errors.ts';

/**
 * The EC2 Query protocol's request parameters: a form-encoded body of flat keys where lists are
 * `Name.N` (1-based) and structures are `Name.Member`, nested freely, e.g. `Filter.1.Value.2`,
 * `TagSpecification.1.Tag.1.Key`, `Attachment.AttachmentId`. This class reads them back into
 * lists and structures; the parse helpers raise the EC2 errors for missing or malformed values.
 */
export interface Filter {
  readonly name: string;
  readonly values: readonly string[];
}

export interface TagSpecification {
  readonly resourceType: string | undefined;
  readonly tags: Record<string, string>;
}

export class QueryParams {
  private readonly values: ReadonlyMap<string, string>;

  constructor(entries: Iterable<readonly [string, string]>) {
    this.values = new Map(entries);
  }

  static fromFormBody(body: string): QueryParams {
    return new QueryParams(new URLSearchParams(body).entries());
  }

  get(name: string): string | undefined {
    return this.values.get(name);
  }

  /** True when the parameter itself or any member of it (`name.*`) was sent. */
  has(name: string): boolean {
    if (this.values.has(name)) return true;
    for (const key of this.values.keys()) if (key.startsWith(`${name}.`)) return true;
    return false;
  }

  required(name: string): string {
    const value = this.values.get(name);
    if (value === undefined || value === '') throw ec2Errors.missingParameter(name);
    return value;
  }

  integer(name: string): number | undefined {
    const value = this.values.get(name);
    if (value === undefined) return undefined;
    if (!/^-?\d+$/.test(value))
      throw ec2Errors.invalidParameterValue(`Value (${value}) for parameter ${name} is invalid.`);
    return Number(value);
  }

  requiredInteger(name: string): number {
    const value = this.integer(name);
    if (value === undefined) throw ec2Errors.missingParameter(name);
    return value;
  }

  boolean(name: string): boolean | undefined {
    const value = this.values.get(name);
    if (value === undefined) return undefined;
    if (value !== 'true' && value !== 'false') {
      throw ec2Errors.invalidParameterValue(`Value (${value}) for parameter ${name} is invalid.`);
    }
    return value === 'true';
  }

  /** A list of scalars sent as `name.1`, `name.2`, ... in index order. */
  list(name: string): string[] {
    return this.indexedKeys(name)
      .filter((index) => this.values.has(`${name}.${index}`))
      .map((index) => this.values.get(`${name}.${index}`) ?? '');
  }

  /** A list of structures sent as `name.1.Member`, `name.2.Member`, ...; each as its own view. */
  members(name: string): QueryParams[] {
    return this.indexedKeys(name).map((index) => this.struct(`${name}.${index}`));
  }

  /** One structure sent as `name.Member...`, as a view whose keys are the members. */
  struct(name: string): QueryParams {
    const prefix = `${name}.`;
    const entries: [string, string][] = [];
    for (const [key, value] of this.values) {
      if (key.startsWith(prefix)) entries.push([key.slice(prefix.length), value]);
    }
    return new QueryParams(entries);
  }

  /** `Filter.N.Name` + `Filter.N.Value.M`. */
  filters(): Filter[] {
    return this.members('Filter').map((filter) => ({
      name: filter.required('Name'),
      values: filter.list('Value'),
    }));
  }

  /** `name.N.Key` + `name.N.Value` as a tag map (a missing value is the empty string, as in EC2). */
  tags(name = 'Tag'): Record<string, string> {
    const tags: Record<string, string> = {};
    for (const tag of this.members(name)) tags[tag.required('Key')] = tag.get('Value') ?? '';
    return tags;
  }

  /** `name.N.Key` with the optional `name.N.Value`, as DeleteTags sends them. */
  tagKeys(name = 'Tag'): { key: string; value: string | undefined }[] {
    return this.members(name).map((tag) => ({ key: tag.required('Key'), value: tag.get('Value') }));
  }

  /** `TagSpecification.N.ResourceType` + `TagSpecification.N.Tag.M.Key/Value`. */
  tagSpecifications(): TagSpecification[] {
    return this.members('TagSpecification').map((spec) => ({
      resourceType: spec.get('ResourceType'),
      tags: spec.tags('Tag'),
    }));
  }

  /** A plain object of every parameter, for hooks and fault matchers. */
  toRecord(): Record<string, string> {
    return Object.fromEntries(this.values);
  }

  private indexedKeys(name: string): number[] {
    const prefix = `${name}.`;
    const indexes = new Set<number>();
    for (const key of this.values.keys()) {
      if (!key.startsWith(prefix)) continue;
      const match = /^(\d+)(?:\.|$)/.exec(key.slice(prefix.length));
      if (match) indexes.add(Number(match[1]));
    }
    return [...indexes].sort((a, b) => a - b);
  }
}
