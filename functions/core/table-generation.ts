import { type CiliumNode, RECORD_TABLE_ANNOTATION, RECORD_VERSION_ANNOTATION } from './ciliumnode.ts';

/**
 * Node-table generations. A restored or re-created node table is a new table whose record versions
 * start over; the CiliumNode's record-version annotation therefore counts in one table generation,
 * named by the `serverless-eni-ipam.io/record-table` annotation, and every record carries the
 * generation its content was last reconciled with EC2 in (`NodeRecord.reconciledInTable`). Pure.
 *
 * A generation is `<table name>@<creation time>` (ISO 8601, UTC, from DynamoDB DescribeTable's
 * `CreationDateTime`), e.g. `eni-ipam-nodes@2026-11-30T12:00:00.000Z`. Why the creation time:
 * - it ORDERS generations. A table that replaces another is always created after it (a
 *   point-in-time restore creates its target table; a redeploy after `cdk destroy` creates a fresh
 *   one), so a sync of an older table (an invocation of the previous deployment still running after
 *   the switch) can tell that a CiliumNode was adopted by a newer table and must not be written;
 *   with names alone, each of the two deployments takes the other's annotation for foreign and
 *   claims the node back, republishing its own record over IPs pods got from the other;
 * - it tells apart a table deleted and re-created (or restored) under the SAME name, whose versions
 *   start over like any new table's;
 * - it needs no operator input (an explicit generation passed to the stack would have to be bumped
 *   by hand on every restore, and a forgotten bump is exactly the hazard above), and it costs one
 *   DescribeTable per function container.
 * Table names cannot contain `@` (DynamoDB allows `[a-zA-Z0-9_.-]`), so the split is unambiguous.
 *
 * Written by an earlier release, the annotation holds the bare table name. A bare name counts as
 * the generation of the table of that name (the earlier release's own rule) and as older than any
 * generation of another name: it was written before this release ran, hence before any table this
 * release switched to.
 *
 * `appliedRecordVersion` reads the record version a CiliumNode carries in a given generation: the
 * sync decides from it what to write, and the multi-pool release whether a withdrawal has reached
 * the CiliumNode (both reach it here, so there is one reading of the two annotations).
 */

export interface TableGeneration {
  readonly name: string;
  /** DescribeTable `CreationDateTime`, in ms since the epoch; absent for a bare name. */
  readonly createdAtEpochMs?: number;
}

/** `<name>@<ISO creation time>`: the annotation value and the record stamp. */
export function formatTableGeneration(generation: TableGeneration): string {
  return generation.createdAtEpochMs === undefined
    ? generation.name
    : `${generation.name}@${new Date(generation.createdAtEpochMs).toISOString()}`;
}

/** The generation a text names; `undefined` when it is empty or its time is not a valid time. */
export function parseTableGeneration(text: string | undefined): TableGeneration | undefined {
  if (text === undefined || text.length === 0) return undefined;
  const at = text.lastIndexOf('@');
  if (at < 0) return { name: text };
  const name = text.slice(0, at);
  const createdAtEpochMs = Date.parse(text.slice(at + 1));
  if (name.length === 0 || !Number.isFinite(createdAtEpochMs)) return undefined;
  return { name, createdAtEpochMs };
}

/**
 * How the generation `other` (from an annotation) relates to `own` (the sync's table): `same`,
 * `older` or `newer`. A total order: by creation time, a bare name before any time, and the name
 * breaking ties (two tables created in the same millisecond cannot both be this stack's, but the
 * answer must still be the same on both sides).
 */
export function compareTableGenerations(
  other: TableGeneration,
  own: TableGeneration,
): 'same' | 'older' | 'newer' {
  if (other.name === own.name) {
    if (other.createdAtEpochMs === undefined || own.createdAtEpochMs === undefined) return 'same';
    if (other.createdAtEpochMs === own.createdAtEpochMs) return 'same';
  }
  const otherTime = other.createdAtEpochMs ?? Number.NEGATIVE_INFINITY;
  const ownTime = own.createdAtEpochMs ?? Number.NEGATIVE_INFINITY;
  if (otherTime !== ownTime) return otherTime < ownTime ? 'older' : 'newer';
  return other.name < own.name ? 'older' : 'newer';
}

/**
 * Whether a record was reconciled with EC2 in the table generation `own`: its stamp names exactly
 * that generation. A record without a stamp (written by an earlier release, or restored from a
 * table it wrote) has not been, and neither has a restored item, which still carries the stamp of
 * the table it was copied from.
 */
export function isReconciledIn(stamp: string | undefined, own: string): boolean {
  const stamped = parseTableGeneration(stamp);
  const table = parseTableGeneration(own);
  return stamped !== undefined && table !== undefined && compareTableGenerations(stamped, table) === 'same';
}

/**
 * The record version whose spec the CiliumNode carries, from its annotation; `undefined` when the
 * annotation is absent or not a non-negative integer (agents replace all annotations on restart),
 * or when it counts in another table generation than `table` (see `RECORD_TABLE_ANNOTATION`).
 */
export function appliedRecordVersion(cn: CiliumNode, table?: string): number | undefined {
  const annotations = cn.metadata.annotations;
  const text = annotations?.[RECORD_VERSION_ANNOTATION];
  if (table !== undefined && tableOfAnnotation(cn, table) !== 'same') return undefined;
  return text !== undefined && /^(0|[1-9][0-9]*)$/.test(text) ? Number(text) : undefined;
}

/**
 * How the table generation the CiliumNode's record version counts in relates to `table`. No
 * record-table annotation (written before tables were named) counts as `table`'s own; one that
 * names no valid generation as older (it is replaced by the next claim, as any other table's is).
 */
export function tableOfAnnotation(cn: CiliumNode, table: string): 'same' | 'older' | 'newer' {
  const countedIn = cn.metadata.annotations?.[RECORD_TABLE_ANNOTATION];
  if (countedIn === undefined) return 'same';
  const other = parseTableGeneration(countedIn);
  const own = parseTableGeneration(table);
  if (other === undefined || own === undefined) return countedIn === table ? 'same' : 'older';
  return compareTableGenerations(other, own);
}
