/**
 * Structural equality of JSON-like values: key order does not matter, list order does, and a
 * member whose value is `undefined` counts as absent (as in JSON and in DynamoDB items written with
 * `removeUndefinedValues`).
 */
export function jsonEqual(left: unknown, right: unknown): boolean {
  if (left === right) return true;
  if (Array.isArray(left)) {
    return (
      Array.isArray(right) &&
      left.length === right.length &&
      left.every((item, index) => jsonEqual(item, right[index]))
    );
  }
  if (isObject(left) && isObject(right)) {
    const leftKeys = definedKeys(left);
    const rightKeys = definedKeys(right);
    return leftKeys.length === rightKeys.length && leftKeys.every((key) => jsonEqual(left[key], right[key]));
  }
  return false;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function definedKeys(value: Record<string, unknown>): string[] {
  return Object.keys(value).filter((key) => value[key] !== undefined);
}
