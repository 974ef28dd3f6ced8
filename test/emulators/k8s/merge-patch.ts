import { deepCopy, isJsonObject } from './json.ts';

/**
 * JSON Merge Patch (RFC 7386), what the API server applies for `application/merge-patch+json`:
 * objects merge key by key, `null` deletes a key, and anything else (lists included) replaces the
 * target value whole. Neither argument is modified.
 */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isJsonObject(patch)) return deepCopy(patch);
  const result = isJsonObject(target) ? deepCopy(target) : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) {
      delete result[key];
    } else {
      result[key] = applyMergePatch(result[key], value);
    }
  }
  return result;
}
