import * as z from 'zod/mini';

/**
 * How every entry point reads what it is given: a zod schema (`zod/mini`, about 14 KB bundled where
 * classic zod adds about 440 KB to every function's cold start) checked against the payload, and
 * the first problems named by their field path (`detail.instance-id`, `nodes[2].allocate`) with the
 * value found there. A schema builds a new object from the fields it declares, so unknown keys,
 * `__proto__` among them, never reach the code behind it. Pure.
 */

export type Decoded<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly reason: string };

/** Problems named in one reason: enough to fix the payload, short enough for one log line. */
const MAX_ISSUES_NAMED = 3;
const PREVIEW_CHARS = 80;

/** EC2 instance ids: `i-` and 8 (older instances) or 17 hexadecimal digits. */
const INSTANCE_ID_PATTERN = /^i-[0-9a-f]{8,17}$/;

export const instanceIdSchema = z
  .string()
  .check(z.regex(INSTANCE_ID_PATTERN, 'must be an instance id (i- and 8 to 17 hex digits)'));

export function decodeWith<T>(schema: z.ZodMiniType<T>, payload: unknown): Decoded<T> {
  const result = z.safeParse(schema, payload);
  if (result.success) return { ok: true, value: result.data };
  return { ok: false, reason: reasonOf(result.error.issues, payload) };
}

/** What zod reports of one problem (`$ZodIssue`): the fields its readers use. */
export interface SchemaIssue {
  readonly code: string;
  readonly path: readonly PropertyKey[];
  readonly message: string;
  readonly expected?: string;
  readonly values?: readonly unknown[];
  readonly keys?: readonly string[];
  readonly minimum?: number | bigint;
  readonly maximum?: number | bigint;
}

/** zod/mini's text when a schema gives none (it ships no locale, to stay small). */
export const GENERIC_MESSAGE = 'Invalid input';

function reasonOf(issues: readonly SchemaIssue[], payload: unknown): string {
  const named = issues
    .slice(0, MAX_ISSUES_NAMED)
    .map(
      (issue) => `${pathText(issue.path)}: ${messageOf(issue)}, got ${preview(valueAt(payload, issue.path))}`,
    );
  const more = issues.length - named.length;
  return more > 0 ? `${named.join('; ')}; and ${more} more` : named.join('; ');
}

/** The schema's own message, or one written from the issue's kind. */
function messageOf(issue: SchemaIssue): string {
  if (issue.message !== GENERIC_MESSAGE) return issue.message;
  switch (issue.code) {
    case 'invalid_type':
      return `expected ${issue.expected}`;
    case 'invalid_value':
      return `expected ${(issue.values ?? []).map((value) => preview(value)).join(' or ')}`;
    case 'unrecognized_keys':
      return `unexpected ${(issue.keys ?? []).map((key) => preview(key)).join(', ')}`;
    case 'too_small':
      return `expected at least ${issue.minimum}`;
    case 'too_big':
      return `expected at most ${issue.maximum}`;
    case 'invalid_union':
      return 'matches none of the accepted forms';
    default:
      return issue.message;
  }
}

/** `["nodes", 2, "allocate"]` → `nodes[2].allocate`; the empty path is the payload itself. */
export function pathText(path: readonly PropertyKey[]): string {
  if (path.length === 0) return 'the payload';
  return path
    .map((key, index) => (typeof key === 'number' ? `[${key}]` : `${index === 0 ? '' : '.'}${String(key)}`))
    .join('');
}

export type FieldFound = { readonly present: true; readonly value: unknown } | { readonly present: false };

/**
 * The field at `path`, read through own properties only (a hostile payload's prototype is never
 * followed): an absent field is told apart from one set to a value.
 */
export function fieldAt(payload: unknown, path: readonly PropertyKey[]): FieldFound {
  let value = payload;
  for (const key of path) {
    if (typeof value !== 'object' || value === null || !Object.hasOwn(value, key)) return { present: false };
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return { present: true, value };
}

function valueAt(payload: unknown, path: readonly PropertyKey[]): unknown {
  const found = fieldAt(payload, path);
  return found.present ? found.value : undefined;
}

/** A short, safe rendering for a reason: JSON when it can be written (cycles and depth can stop it), cut at 80 characters. */
export function preview(value: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = Object.prototype.toString.call(value);
  }
  return text.length > PREVIEW_CHARS ? `${text.slice(0, PREVIEW_CHARS - 1)}…` : text;
}
