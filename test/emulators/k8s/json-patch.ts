import { deepCopy, deepEqual, isJsonObject, type JsonObject } from './json.ts';

/**
 * JSON Patch (RFC 6902) with JSON Pointers (RFC 6901), what the API server applies for
 * `application/json-patch+json`. Atomic: the operations run on a copy, so a failing one (a `test`
 * that does not hold, a path that does not exist) leaves the caller's document untouched.
 * Error texts follow evanphx/json-patch, the library kube-apiserver uses.
 */

export type JsonPatchOperation =
  | { op: 'add' | 'replace' | 'test'; path: string; value: unknown }
  | { op: 'remove'; path: string }
  | { op: 'move' | 'copy'; from: string; path: string };

/**
 * `malformed`: the body is not a valid patch document (the server answers 400 BadRequest).
 * `not-applicable`: a valid patch that does not apply to this document (422 since kubernetes#68838).
 */
export class JsonPatchError extends Error {
  readonly kind: 'malformed' | 'not-applicable';

  constructor(kind: 'malformed' | 'not-applicable', message: string) {
    super(message);
    this.name = 'JsonPatchError';
    this.kind = kind;
  }
}

/** Checks the shape of a decoded patch body. */
export function parseJsonPatch(body: unknown): JsonPatchOperation[] {
  if (!Array.isArray(body)) {
    throw new JsonPatchError(
      'malformed',
      'json: cannot unmarshal object into Go value of type jsonpatch.Patch',
    );
  }
  return body.map((operation, index) => {
    if (!isJsonObject(operation) || typeof operation.op !== 'string' || typeof operation.path !== 'string') {
      throw new JsonPatchError('malformed', `operation ${index} needs string "op" and "path"`);
    }
    switch (operation.op) {
      case 'add':
      case 'replace':
      case 'test':
        if (!Object.hasOwn(operation, 'value')) {
          throw new JsonPatchError('malformed', `operation ${index} (${operation.op}) is missing "value"`);
        }
        return { op: operation.op, path: operation.path, value: operation.value };
      case 'remove':
        return { op: 'remove', path: operation.path };
      case 'move':
      case 'copy':
        if (typeof operation.from !== 'string') {
          throw new JsonPatchError('malformed', `operation ${index} (${operation.op}) is missing "from"`);
        }
        return { op: operation.op, from: operation.from, path: operation.path };
      default:
        throw new JsonPatchError('malformed', `Unexpected kind: ${operation.op}`);
    }
  });
}

/** RFC 6901: "" is the whole document, otherwise "/"-separated tokens with ~1 = "/" and ~0 = "~". */
export function parsePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/'))
    throw new JsonPatchError('malformed', `JSON pointer must start with "/": "${pointer}"`);
  return pointer
    .slice(1)
    .split('/')
    .map((token) => {
      if (/~[^01]|~$/.test(token))
        throw new JsonPatchError('malformed', `invalid escape in JSON pointer "${pointer}"`);
      return token.replaceAll('~1', '/').replaceAll('~0', '~');
    });
}

type Container = JsonObject | unknown[];

function arrayIndex(token: string, length: number, allowEnd: boolean, pointer: string): number {
  if (allowEnd && token === '-') return length;
  if (!/^(0|[1-9][0-9]*)$/.test(token)) {
    throw new JsonPatchError('not-applicable', `Unable to access invalid index: ${token} in "${pointer}"`);
  }
  const index = Number(token);
  if (index > length || (!allowEnd && index === length)) {
    throw new JsonPatchError('not-applicable', `Unable to access invalid index: ${index} in "${pointer}"`);
  }
  return index;
}

function childOf(container: Container, token: string): unknown {
  if (Array.isArray(container)) {
    return /^(0|[1-9][0-9]*)$/.test(token) ? container[Number(token)] : undefined;
  }
  return Object.hasOwn(container, token) ? container[token] : undefined;
}

/** Resolves every token but the last; the parent must exist and be a container. */
function resolveParent(document: unknown, tokens: string[], pointer: string, op: string): Container {
  let current = document;
  for (const token of tokens.slice(0, -1)) {
    current = Array.isArray(current) || isJsonObject(current) ? childOf(current, token) : undefined;
    if (current === undefined) break;
  }
  if (!Array.isArray(current) && !isJsonObject(current)) {
    throw new JsonPatchError(
      'not-applicable',
      `${op} operation does not apply: doc is missing path: "${pointer}"`,
    );
  }
  return current;
}

function getValue(document: unknown, pointer: string, op: string): unknown {
  const tokens = parsePointer(pointer);
  if (tokens.length === 0) return document;
  const value = childOf(resolveParent(document, tokens, pointer, op), tokens.at(-1)!);
  if (value === undefined) {
    throw new JsonPatchError(
      'not-applicable',
      `${op} operation does not apply: doc is missing key: ${pointer}`,
    );
  }
  return value;
}

/** Returns the new document (only a whole-document `add`/`replace` changes its identity). */
function addValue(document: unknown, pointer: string, value: unknown): unknown {
  const tokens = parsePointer(pointer);
  if (tokens.length === 0) return value;
  const parent = resolveParent(document, tokens, pointer, 'add');
  const last = tokens.at(-1)!;
  if (Array.isArray(parent)) {
    parent.splice(arrayIndex(last, parent.length, true, pointer), 0, value);
  } else {
    parent[last] = value;
  }
  return document;
}

function removeValue(document: unknown, pointer: string, op: string): unknown {
  const tokens = parsePointer(pointer);
  if (tokens.length === 0)
    throw new JsonPatchError('not-applicable', `${op}: cannot remove the whole document`);
  const parent = resolveParent(document, tokens, pointer, op);
  const last = tokens.at(-1)!;
  if (Array.isArray(parent)) {
    const [removed] = parent.splice(arrayIndex(last, parent.length, false, pointer), 1);
    return removed;
  }
  if (!Object.hasOwn(parent, last)) {
    throw new JsonPatchError('not-applicable', `Unable to ${op} nonexistent key: ${last}: missing value`);
  }
  const removed = parent[last];
  delete parent[last];
  return removed;
}

/** Applies `patch` to a copy of `document` and returns the copy; throws JsonPatchError. */
export function applyJsonPatch(document: unknown, patch: readonly JsonPatchOperation[]): unknown {
  let result = deepCopy(document);
  for (const operation of patch) {
    switch (operation.op) {
      case 'add':
        result = addValue(result, operation.path, deepCopy(operation.value));
        break;
      case 'remove':
        removeValue(result, operation.path, 'remove');
        break;
      case 'replace':
        getValue(result, operation.path, 'replace');
        if (operation.path === '') {
          result = deepCopy(operation.value);
        } else {
          removeValue(result, operation.path, 'replace');
          result = addValue(result, operation.path, deepCopy(operation.value));
        }
        break;
      case 'move': {
        if (operation.path.startsWith(`${operation.from}/`)) {
          throw new JsonPatchError('not-applicable', `move: "from" ${operation.from} is a prefix of "path"`);
        }
        getValue(result, operation.from, 'move');
        const moved = removeValue(result, operation.from, 'move');
        result = addValue(result, operation.path, moved);
        break;
      }
      case 'copy':
        result = addValue(result, operation.path, deepCopy(getValue(result, operation.from, 'copy')));
        break;
      case 'test':
        if (!deepEqual(getValueOrUndefined(result, operation.path), operation.value)) {
          throw new JsonPatchError('not-applicable', `testing value ${operation.path} failed: test failed`);
        }
        break;
    }
  }
  return result;
}

function getValueOrUndefined(document: unknown, pointer: string): unknown {
  try {
    return getValue(document, pointer, 'test');
  } catch (error) {
    if (error instanceof JsonPatchError && error.kind === 'not-applicable') return undefined;
    throw error;
  }
}
