import * as z from 'zod/mini';
import {
  type FieldFound,
  fieldAt,
  GENERIC_MESSAGE,
  pathText,
  preview,
  type SchemaIssue,
} from '../core/input-schema.ts';
import type { NodeRecord } from '../core/model.ts';

/**
 * The node record as the node table must hold it: every field of `NodeRecord` (functions/core/
 * model.ts) and of the types it nests, with its type, optional exactly where the model says so.
 * The adapter parses every item it reads through it (`decodeNodeRecord`), so no reader acts on an
 * item a hand edit or a foreign writer gave the wrong shape. Pure.
 *
 * Unknown attributes are DROPPED, not refused. A field that an older release must not lose comes
 * with a new record layout (`nodeTableSchema.schemaVersionAttribute`), and such an item is refused
 * before this schema sees it. A field added within a layout is, by that contract, one an older
 * release may drop: its writer documents what an item without it means (`withdrawnInVersion`,
 * `reconciledInTable`, `agentProtocol` were added so). Refusing it instead would make every record
 * the newer release wrote unreadable to the release rolled back to; keeping it (a loose object)
 * would write it back stale, next to fields this release changed without knowing what it ties to.
 * Dropping also means keys such as `__proto__` never reach the code behind the adapter.
 */

const tagsSchema = z.record(z.string(), z.string());
const stringList = z.array(z.string());

const vpcSchema = z.object({
  id: z.string(),
  primaryCidr: z.string(),
  secondaryCidrs: stringList,
});

const eniSchema = z.object({
  id: z.string(),
  mac: z.string(),
  deviceIndex: z.number(),
  attachmentId: z.string(),
  deleteOnTermination: z.boolean(),
  primaryIp: z.string(),
  secondaryIps: stringList,
  prefixes: stringList,
  ipv6Prefixes: z.optional(stringList),
  subnetId: z.string(),
  subnetCidr: z.string(),
  securityGroupIds: stringList,
  tags: tagsSchema,
  description: z.string(),
  foreign: z.optional(z.boolean()),
  lastMutatedAtEpochMs: z.optional(z.number()),
});

const knobsSchema = z.object({
  preAllocate: z.number(),
  minAllocate: z.number(),
  maxAllocate: z.number(),
  maxAboveWatermark: z.number(),
  firstInterfaceIndex: z.number(),
  subnetIds: stringList,
  subnetTags: tagsSchema,
  securityGroups: stringList,
  securityGroupTags: tagsSchema,
  excludeInterfaceTags: tagsSchema,
  usePrimaryAddress: z.boolean(),
  disablePrefixDelegation: z.boolean(),
  deleteOnTermination: z.boolean(),
  malformed: z.optional(stringList),
});

const recordedErrorSchema = z.object({
  code: z.string(),
  message: z.string(),
  atEpochMs: z.number(),
});

const leaseSchema = z.object({
  holder: z.string(),
  expiresAtEpochMs: z.number(),
});

const excessMarkSchema = z.object({
  sinceEpochMs: z.number(),
  state: z.optional(z.enum(['marked-for-release', 'ready-for-release', 'do-not-release', 'released'])),
  cause: z.optional(z.enum(['excluded-eni'])),
});

const cidrReleaseSchema = z.object({
  eniId: z.string(),
  state: z.enum(['pending', 'withdrawing', 'released']),
  sinceEpochMs: z.number(),
  releasedAtEpochMs: z.optional(z.number()),
  withdrawnInVersion: z.optional(z.number()),
});

/**
 * The whole record. Fields are declared in the order a refusal should name them, since only the
 * first problem names the field: the key, the version and the node name every reader relies on
 * first, then the ENI list (what the record is about), then the rest in the model's order. The
 * version and the node name keep the checks the adapter always made: a positive integer, not empty.
 */
export const nodeRecordSchema = z.object({
  instanceId: z.string(),
  version: z.int().check(z.positive('must be positive')),
  nodeName: z.string().check(z.minLength(1, 'must not be empty')),
  enis: z.array(eniSchema),
  instanceType: z.string(),
  availabilityZone: z.string(),
  nodeSubnetId: z.string(),
  vpc: vpcSchema,
  knobs: knobsSchema,
  prefixDelegation: z.boolean(),
  lastError: z.optional(recordedErrorSchema),
  lease: z.optional(leaseSchema),
  excessMarks: z.optional(z.record(z.string(), excessMarkSchema)),
  cidrReleases: z.optional(z.record(z.string(), cidrReleaseSchema)),
  agentProtocol: z.optional(z.enum(['crd', 'multi-pool'])),
  agentProtocolSinceEpochMs: z.optional(z.number()),
  reconciledInTable: z.optional(z.string()),
  lifecycle: z.enum(['active', 'draining', 'retired']),
  createdAtEpochMs: z.number(),
  updatedAtEpochMs: z.number(),
  expiresAtEpochSeconds: z.optional(z.number()),
});

/** `T` without `readonly`, at every depth: the model is readonly, zod's output is not, and that is no drift. */
type Mutable<T> = T extends readonly (infer Item)[]
  ? Mutable<Item>[]
  : T extends object
    ? { -readonly [Key in keyof T]: Mutable<T[Key]> }
    : T;

/** `true` only when `A` and `B` are the same type: the same fields, each as optional and of the same type. */
type Equals<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

/**
 * Whether a schema's output and a model type agree field for field, at every depth, readonly aside.
 * Plain assignability in both directions would not do: an optional field missing on either side
 * is assignable both ways, and a schema without it would drop it on read and lose it on the next write.
 */
export type SchemaMatchesModel<SchemaOutput, Model> = Equals<Mutable<SchemaOutput>, Mutable<Model>>;

/**
 * Fails `tsc` when `NodeRecord` (or a type it nests) and `nodeRecordSchema` differ by one field,
 * one optional mark or one type. A field added to the model goes into the schema above with it.
 */
type _SchemaMatchesNodeRecord = Assert<SchemaMatchesModel<z.infer<typeof nodeRecordSchema>, NodeRecord>>;

type Assert<Holds extends true> = Holds;

/** How many of the problems after the first are named by their path, to fix a hand edit in one go. */
const FURTHER_PATHS_NAMED = 3;

export type DecodedNodeRecord =
  | { readonly ok: true; readonly record: NodeRecord }
  | { readonly ok: false; readonly field: string; readonly problem: string };

/**
 * An item's attributes (the schema stamp already taken off) as a record, or the first field that
 * is wrong (`enis[2].secondaryIps`) and what was expected there and found instead. The record is a
 * new object built from the declared fields only (see the module comment on unknown attributes).
 */
export function decodeNodeRecord(attributes: Record<string, unknown>): DecodedNodeRecord {
  const result = z.safeParse(nodeRecordSchema, attributes);
  if (result.success) return { ok: true, record: result.data };
  const [first, ...further] = result.error.issues as readonly SchemaIssue[];
  if (first === undefined) return { ok: false, field: 'the item', problem: 'is no node record' };
  return {
    ok: false,
    field: pathText(first.path),
    problem: `${problemOf(first, fieldAt(attributes, first.path))}${furtherText(further)}`,
  };
}

/** `has the wrong type: expected array, found "garbage"`, `is missing (expected string)`. */
function problemOf(issue: SchemaIssue, found: FieldFound): string {
  const foundText = found.present ? preview(found.value) : 'nothing';
  if (issue.message !== GENERIC_MESSAGE) return `${issue.message}, found ${foundText}`;
  const expected = expectedOf(issue);
  if (expected === undefined) return `is invalid (${issue.code}), found ${foundText}`;
  if (!found.present) return `is missing (expected ${expected})`;
  const kind = issue.code === 'invalid_type' ? 'type' : 'value';
  return `has the wrong ${kind}: expected ${expected}, found ${foundText}`;
}

/** What the schema wanted where the problem is: a type (`array`) or the values allowed (`"crd" or "multi-pool"`). */
function expectedOf(issue: SchemaIssue): string | undefined {
  switch (issue.code) {
    case 'invalid_type':
      return issue.expected;
    case 'invalid_value':
      return (issue.values ?? []).map((value) => preview(value)).join(' or ');
    default:
      return undefined;
  }
}

function furtherText(further: readonly SchemaIssue[]): string {
  if (further.length === 0) return '';
  const named = further.slice(0, FURTHER_PATHS_NAMED).map((issue) => pathText(issue.path));
  const rest = further.length > named.length ? ', …' : '';
  return ` (and ${further.length} more: ${named.join(', ')}${rest})`;
}
