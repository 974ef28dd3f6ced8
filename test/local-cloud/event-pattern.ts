/**
 * EventBridge event-pattern matching, as the default event bus applies a rule's `EventPattern`
 * (https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-event-patterns.html):
 *
 * - every field named in the pattern must match; fields the pattern does not name are ignored;
 * - a nested object in the pattern matches the event's object at that field, recursively;
 * - an array in the pattern lists alternatives: the field matches if it matches ANY of them;
 * - when the event's value is an array, it matches if ANY of its elements matches;
 * - literal alternatives compare exactly (strings case-sensitively, numbers numerically, `null`
 *   only a JSON null, never a missing field);
 * - content filters: `prefix`, `suffix`, `equals-ignore-case`, `anything-but` (a value, a list, or
 *   `{prefix}`), `exists`, and `numeric` comparisons. `anything-but` and every filter but
 *   `exists: false` need the field to be present, as in EventBridge.
 *
 * An operator EventBridge has but this matcher lacks (`cidr`, `wildcard`, `$or`) throws
 * `UnsupportedPatternError` when the pattern is compiled, so a rule is never silently mis-routed.
 */

export type EventPattern = { readonly [field: string]: EventPattern | readonly PatternAlternative[] };
export type PatternLiteral = string | number | boolean | null;
export type PatternAlternative = PatternLiteral | { readonly [operator: string]: unknown };

export class UnsupportedPatternError extends Error {
  override readonly name = 'UnsupportedPatternError';
}

type FieldTest = (value: unknown, present: boolean) => boolean;
type Matcher = (event: unknown) => boolean;

/** Compiles `pattern` once (validating every operator) into a predicate over events. */
export function compileEventPattern(pattern: unknown): Matcher {
  if (!isPlainObject(pattern)) throw new UnsupportedPatternError('an event pattern must be a JSON object');
  return compileObject(pattern, '');
}

/** One-shot convenience: does `event` match `pattern`? */
export function matchesEventPattern(pattern: unknown, event: unknown): boolean {
  return compileEventPattern(pattern)(event);
}

function compileObject(pattern: Record<string, unknown>, path: string): Matcher {
  const fieldMatchers = Object.entries(pattern).map(([field, sub]): Matcher => {
    const fieldPath = path === '' ? field : `${path}.${field}`;
    if (field.startsWith('$')) throw new UnsupportedPatternError(`operator ${field} at ${fieldPath}`);
    if (Array.isArray(sub)) {
      const test = compileAlternatives(sub, fieldPath);
      return (event) => {
        const present = isPlainObject(event) && Object.hasOwn(event, field);
        return test(present ? event[field] : undefined, present);
      };
    }
    if (isPlainObject(sub)) {
      const nested = compileObject(sub, fieldPath);
      return (event) => isPlainObject(event) && nested(event[field] ?? {});
    }
    throw new UnsupportedPatternError(
      `${fieldPath}: expected an array or an object, got ${JSON.stringify(sub)}`,
    );
  });
  return (event) => fieldMatchers.every((matcher) => matcher(event));
}

function compileAlternatives(alternatives: readonly unknown[], path: string): FieldTest {
  const tests = alternatives.map((alternative) => compileAlternative(alternative, path));
  return (value, present) => {
    if (Array.isArray(value)) {
      return value.some((element) => tests.some((test) => test(element, true)));
    }
    return tests.some((test) => test(value, present));
  };
}

function compileAlternative(alternative: unknown, path: string): FieldTest {
  if (!isPlainObject(alternative)) {
    if (!isLiteral(alternative)) {
      throw new UnsupportedPatternError(`${path}: ${JSON.stringify(alternative)} is not a value or a filter`);
    }
    return (value, present) => present && literalEquals(alternative, value);
  }
  const entries = Object.entries(alternative);
  const [operator, operand] = entries[0] ?? [];
  if (entries.length !== 1 || operator === undefined) {
    throw new UnsupportedPatternError(`${path}: a filter object has exactly one operator`);
  }
  switch (operator) {
    case 'prefix': {
      const prefix = requireString(operand, path, operator);
      return (value, present) => present && typeof value === 'string' && value.startsWith(prefix);
    }
    case 'suffix': {
      const suffix = requireString(operand, path, operator);
      return (value, present) => present && typeof value === 'string' && value.endsWith(suffix);
    }
    case 'equals-ignore-case': {
      const expected = requireString(operand, path, operator).toLowerCase();
      return (value, present) => present && typeof value === 'string' && value.toLowerCase() === expected;
    }
    case 'exists': {
      if (typeof operand !== 'boolean')
        throw new UnsupportedPatternError(`${path}: exists takes true or false`);
      return (_value, present) => present === operand;
    }
    case 'anything-but':
      return compileAnythingBut(operand, path);
    case 'numeric':
      return compileNumeric(operand, path);
    default:
      throw new UnsupportedPatternError(`${path}: filter ${operator} is not supported by the local cloud`);
  }
}

function compileAnythingBut(operand: unknown, path: string): FieldTest {
  if (isPlainObject(operand)) {
    const prefix = requireString(operand.prefix, path, 'anything-but prefix');
    return (value, present) => present && !(typeof value === 'string' && value.startsWith(prefix));
  }
  const excluded = Array.isArray(operand) ? operand : [operand];
  if (!excluded.every(isLiteral)) {
    throw new UnsupportedPatternError(`${path}: anything-but takes values or {prefix}`);
  }
  return (value, present) => present && !excluded.some((literal) => literalEquals(literal, value));
}

const NUMERIC_OPERATORS: Readonly<Record<string, (value: number, bound: number) => boolean>> = {
  '<': (value, bound) => value < bound,
  '<=': (value, bound) => value <= bound,
  '=': (value, bound) => value === bound,
  '>': (value, bound) => value > bound,
  '>=': (value, bound) => value >= bound,
};

function compileNumeric(operand: unknown, path: string): FieldTest {
  if (!Array.isArray(operand) || operand.length === 0 || operand.length % 2 !== 0) {
    throw new UnsupportedPatternError(`${path}: numeric takes [operator, number, ...] pairs`);
  }
  const comparisons: ((value: number) => boolean)[] = [];
  for (let index = 0; index < operand.length; index += 2) {
    const compare = NUMERIC_OPERATORS[String(operand[index])];
    const bound = operand[index + 1];
    if (compare === undefined || typeof bound !== 'number') {
      throw new UnsupportedPatternError(`${path}: bad numeric comparison ${JSON.stringify(operand)}`);
    }
    comparisons.push((value) => compare(value, bound));
  }
  return (value, present) =>
    present && typeof value === 'number' && comparisons.every((comparison) => comparison(value));
}

function literalEquals(literal: PatternLiteral, value: unknown): boolean {
  return literal === value;
}

function requireString(operand: unknown, path: string, operator: string): string {
  if (typeof operand !== 'string') throw new UnsupportedPatternError(`${path}: ${operator} takes a string`);
  return operand;
}

function isLiteral(value: unknown): value is PatternLiteral {
  return value === null || ['string', 'number', 'boolean'].includes(typeof value);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
