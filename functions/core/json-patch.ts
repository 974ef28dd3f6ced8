import { type JsonPatchOperation, jsonPointerToken } from './ciliumnode.ts';
import { jsonEqual } from './json-equal.ts';

type JsonObject = Record<string, unknown>;

function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Builds a JSON Patch (RFC 6902) against a private copy of a document, applying each operation to
 * the copy as it goes, so later operations see the parents earlier ones created (two writes under a
 * missing `/status` must not both `add /status`). Starts with a `test` of the resourceVersion the
 * document was read at, when it has one, so a patch of a document changed since fails whole.
 */
export class PatchBuilder {
  readonly operations: JsonPatchOperation[] = [];
  private readonly document: JsonObject;

  constructor(document: object, resourceVersion: string | undefined) {
    this.document = structuredClone(document) as JsonObject;
    if (resourceVersion !== undefined) {
      this.operations.push({ op: 'test', path: '/metadata/resourceVersion', value: resourceVersion });
    }
  }

  /** Sets the value at `path`, adding the missing parent objects in the same operation. */
  set(path: readonly string[], value: unknown): void {
    let parent = this.document;
    for (const [depth, token] of path.slice(0, -1).entries()) {
      const child = parent[token];
      if (!isJsonObject(child)) {
        const nested = path.slice(depth + 1).reduceRight<unknown>((inner, key) => ({ [key]: inner }), value);
        this.add(parent, path.slice(0, depth + 1), nested);
        return;
      }
      parent = child;
    }
    this.add(parent, path, value);
  }

  /**
   * Makes the map at `path` equal `target`: entry by entry when few entries change, else whole
   * (a large pool gains or loses only a few entries per sync; a first fill replaces it at once).
   */
  setMap(path: readonly string[], target: JsonObject): void {
    const current = this.valueAt(path);
    if (!isJsonObject(current)) {
      this.set(path, target);
      return;
    }
    const changed = Object.keys(target).filter((key) => !jsonEqual(current[key], target[key]));
    const removed = Object.keys(current).filter((key) => !Object.hasOwn(target, key));
    if (changed.length + removed.length > Math.max(16, Object.keys(target).length / 2)) {
      this.set(path, target);
      return;
    }
    for (const key of removed) {
      this.operations.push({ op: 'remove', path: pointer([...path, key]) });
      delete current[key];
    }
    for (const key of changed) this.add(current, [...path, key], target[key]);
  }

  private add(parent: JsonObject, path: readonly string[], value: unknown): void {
    this.operations.push({ op: 'add', path: pointer(path), value: structuredClone(value) });
    parent[path[path.length - 1] as string] = structuredClone(value);
  }

  private valueAt(path: readonly string[]): unknown {
    let node: unknown = this.document;
    for (const token of path) {
      if (!isJsonObject(node)) return undefined;
      node = node[token];
    }
    return node;
  }
}

function pointer(path: readonly string[]): string {
  return `/${path.map(jsonPointerToken).join('/')}`;
}
