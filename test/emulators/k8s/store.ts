import { randomUUID } from 'node:crypto';
import { deepCopy, deepEqual, isJsonObject, type JsonObject } from './json.ts';
import { DEFAULT_SCHEMAS, loadCiliumNodeSchema, prune, type SchemaVersion, validate } from './schema.ts';
import type { Selector } from './selectors.ts';
import {
  API_VERSION,
  alreadyExists,
  badRequest,
  conflict,
  expired,
  type FieldError,
  fieldErrorText,
  invalid,
  KIND,
  notFound,
} from './status.ts';

/**
 * The emulator's state model: the CiliumNode objects, the global resourceVersion counter and the
 * log of every version ever written (what etcd plus the watch cache give the real server). It
 * applies the write semantics of kube-apiserver's generic registry and the custom-resource
 * strategies (apiextensions-apiserver `pkg/registry/customresource`); the HTTP layer only decodes
 * requests and encodes answers. Every object handed out is a deep copy.
 */

export interface ObjectMeta {
  name: string;
  generateName?: string;
  uid: string;
  resourceVersion: string;
  generation: number;
  creationTimestamp: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: unknown[];
}

export interface CiliumNodeObject {
  apiVersion: typeof API_VERSION;
  kind: typeof KIND;
  metadata: ObjectMeta;
  spec?: JsonObject;
  status?: JsonObject;
  [field: string]: unknown;
}

export type Subresource = 'main' | 'status';
export type WriteVerb = 'create' | 'update' | 'patch' | 'delete' | 'seed';
export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';
export type FieldValidation = 'Strict' | 'Warn' | 'Ignore';

/** One stored version. `subresource` says whether the write went to `/status` or the main resource. */
export interface HistoryEntry {
  resourceVersion: string;
  name: string;
  type: EventType;
  subresource: Subresource;
  verb: WriteVerb;
  /** The object at this version; for DELETED, the last state carrying the deletion's resourceVersion. */
  object: CiliumNodeObject;
}

/** A history entry plus the version it replaced (watchers need it to evaluate label selectors). */
export interface StoredEvent {
  entry: HistoryEntry;
  previous: CiliumNodeObject | undefined;
}

export interface WriteOptions {
  fieldValidation?: FieldValidation;
  dryRun?: boolean;
}

export interface WriteResult {
  object: CiliumNodeObject;
  /** `unknown field "…"` texts for the fields pruned from the request (the server's Warning headers). */
  warnings: string[];
}

export interface DeletePreconditions {
  uid?: string;
  resourceVersion?: string;
}

export interface StoreOptions {
  /** CRD generations every object must satisfy; the first one prunes. Default: DEFAULT_SCHEMAS. */
  schemas?: readonly SchemaVersion[];
  /** How many of the newest writes a watch can replay; older resourceVersions answer 410. Default: all. */
  historyWindow?: number;
  /** Clock for creationTimestamp and deletionTimestamp. */
  now?: () => Date;
}

/** ObjectMeta fields the server decodes; anything else under metadata is an unknown field. */
const OBJECT_META_FIELDS = new Set([
  'name',
  'generateName',
  'namespace',
  'selfLink',
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'labels',
  'annotations',
  'ownerReferences',
  'finalizers',
  'managedFields',
]);

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

const rfc3339 = (date: Date) => date.toISOString().replace(/\.\d{3}Z$/, 'Z');

/** Everything but metadata: what the custom-resource strategy compares to decide a generation bump. */
function withoutMetadata(object: CiliumNodeObject): JsonObject {
  const { metadata: _metadata, ...rest } = object;
  return rest;
}

export class CiliumNodeStore {
  readonly schemas: readonly SchemaVersion[];
  private readonly historyWindow: number;
  private readonly now: () => Date;
  private readonly objects = new Map<string, CiliumNodeObject>();
  private readonly events: StoredEvent[] = [];
  private readonly subscribers = new Set<(event: StoredEvent) => void>();
  private readonly writeListeners = new Set<(entry: HistoryEntry) => void>();
  private revision = 0;
  private compactedRevision = 0;

  constructor(options: StoreOptions = {}) {
    this.schemas = options.schemas ?? DEFAULT_SCHEMAS;
    if (this.schemas.length === 0) throw new Error('at least one CRD schema is required');
    this.historyWindow = options.historyWindow ?? Number.POSITIVE_INFINITY;
    this.now = options.now ?? (() => new Date());
  }

  // ---- reads -------------------------------------------------------------------------------

  /** The current global resourceVersion (that of the newest write). */
  get resourceVersion(): string {
    return String(this.revision);
  }

  get(name: string): CiliumNodeObject | undefined {
    const object = this.objects.get(name);
    return object === undefined ? undefined : deepCopy(object);
  }

  /** The current objects matching `selector`, in name order (etcd key order). */
  list(selector: Selector = () => true): CiliumNodeObject[] {
    return [...this.objects.values()]
      .filter(selector)
      .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))
      .map(deepCopy);
  }

  /** The objects as they were at `resourceVersion` (a consistent snapshot for `continue` tokens). */
  listAt(resourceVersion: number, selector: Selector = () => true): CiliumNodeObject[] {
    if (resourceVersion < this.oldestReplayableFrom()) {
      throw expired(
        'The provided continue parameter is too old to display a consistent list result. ' +
          'You can start a new list without the continue parameter.',
      );
    }
    const snapshot = new Map<string, CiliumNodeObject>();
    for (const { entry } of this.events) {
      if (Number(entry.resourceVersion) > resourceVersion) break;
      if (entry.type === 'DELETED') snapshot.delete(entry.name);
      else snapshot.set(entry.name, entry.object);
    }
    return [...snapshot.values()]
      .filter(selector)
      .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))
      .map(deepCopy);
  }

  /** Every stored version (of one object, or of all) in resourceVersion order, as copies. */
  history(name?: string): HistoryEntry[] {
    return this.events
      .filter(({ entry }) => name === undefined || entry.name === name)
      .map(({ entry }) => deepCopy(entry));
  }

  // ---- watch support -----------------------------------------------------------------------

  /**
   * The writes after `resourceVersion`, for a watch to replay. Like the watch cache, only the
   * newest `historyWindow` writes are kept for this; an older start answers 410 Expired.
   */
  eventsAfter(resourceVersion: number): StoredEvent[] {
    const oldest = this.oldestReplayableFrom();
    if (resourceVersion < oldest) {
      throw expired(`too old resource version: ${resourceVersion} (${oldest})`);
    }
    return this.events.filter(({ entry }) => Number(entry.resourceVersion) > resourceVersion);
  }

  /** Every later write, synchronously as it is committed. Returns the unsubscribe function. */
  subscribe(listener: (event: StoredEvent) => void): () => void {
    this.subscribers.add(listener);
    return () => this.subscribers.delete(listener);
  }

  /** Forget the replayable history up to now (what etcd compaction does): older watches get 410. */
  compact(): void {
    this.compactedRevision = this.revision;
  }

  /** The smallest resourceVersion a watch may start from. */
  private oldestReplayableFrom(): number {
    return Math.max(this.compactedRevision, this.revision - this.historyWindow, 0);
  }

  // ---- test helpers ------------------------------------------------------------------------

  /** Calls `listener` with a copy of every committed version (HTTP writes and seeds alike). */
  onWrite(listener: (entry: HistoryEntry) => void): () => void {
    this.writeListeners.add(listener);
    return () => this.writeListeners.delete(listener);
  }

  /**
   * Seeds or overwrites an object directly, status included (no subresource split, no
   * resourceVersion check). It is still pruned strictly (an unknown field throws) and validated,
   * gets server-set metadata, and is recorded and watched like any write (verb `seed`,
   * subresource `main`).
   */
  put(object: unknown): CiliumNodeObject {
    const { object: candidate } = this.decode(object, 'Strict');
    const name = candidate.metadata.name;
    if (!name) throw invalid('', [requiredName()]);
    const current = this.objects.get(name);
    const next: CiliumNodeObject = {
      ...candidate,
      metadata: {
        name,
        uid: current?.metadata.uid ?? randomUUID(),
        resourceVersion: '',
        generation: current?.metadata.generation ?? 1,
        creationTimestamp: current?.metadata.creationTimestamp ?? rfc3339(this.now()),
        ...this.userMetadata(candidate.metadata),
      },
    };
    if (current !== undefined && !deepEqual(specOf(next), specOf(current))) next.metadata.generation++;
    this.admit(next, current === undefined);
    return this.commit(current === undefined ? 'ADDED' : 'MODIFIED', next, current, 'main', 'seed');
  }

  // ---- API semantics ----------------------------------------------------------------------

  /**
   * POST. Mirrors `rest.BeforeCreate` and the custom-resource strategy: a resourceVersion in the
   * body is rejected, generateName is honoured, uid/creationTimestamp/generation=1 are set, and
   * `status` is dropped because the CRD has the status subresource.
   */
  create(body: unknown, options: WriteOptions = {}): WriteResult {
    const { object: candidate, warnings } = this.decode(body, options.fieldValidation);
    const userMeta = candidate.metadata;
    if (userMeta.resourceVersion)
      throw badRequest('resourceVersion should not be set on objects to be created');
    let name = userMeta.name;
    if (!name && userMeta.generateName) name = `${userMeta.generateName}${randomSuffix()}`;
    if (!name) throw invalid('', [requiredName()]);
    if (this.objects.has(name)) throw alreadyExists(name);
    const { status: _ignored, ...withoutStatus } = candidate;
    const next: CiliumNodeObject = {
      ...withoutStatus,
      apiVersion: API_VERSION,
      kind: KIND,
      metadata: {
        name,
        ...(userMeta.generateName ? { generateName: userMeta.generateName } : {}),
        uid: randomUUID(),
        resourceVersion: '',
        generation: 1,
        creationTimestamp: rfc3339(this.now()),
        ...this.userMetadata(userMeta),
      },
    };
    this.admit(next, true);
    if (options.dryRun) return { object: deepCopy(next), warnings };
    return { object: this.commit('ADDED', next, undefined, 'main', 'create'), warnings };
  }

  /**
   * PUT, and PATCH after the patch was applied to the current object. Mirrors the generic
   * registry's Update plus the custom-resource strategies:
   *  - no resourceVersion -> 422 (CRs do not allow unconditional update); a stale one -> 409;
   *  - main resource: `status` is reset to the stored one, any non-metadata change bumps
   *    `metadata.generation`;
   *  - `/status`: only `status` is taken from the request (metadata, labels and annotations
   *    included, stay as stored), and generation never changes;
   *  - a write that changes nothing is not stored: no new resourceVersion, no watch event;
   *  - once `deletionTimestamp` is set, removing the last finalizer deletes the object.
   */
  update(
    name: string,
    body: unknown,
    subresource: Subresource,
    verb: 'update' | 'patch',
    options: WriteOptions = {},
  ): WriteResult {
    const { object: candidate, warnings } = this.decode(body, options.fieldValidation);
    // checkName in the update and patch handlers: the body must name the object of the URL.
    if (candidate.metadata.name !== name) {
      throw badRequest(
        `the name of the object (${candidate.metadata.name ?? ''}) does not match the name on the URL (${name})`,
      );
    }
    const current = this.objects.get(name);
    if (current === undefined) throw notFound(name);
    const requested = candidate.metadata.resourceVersion;
    if (!requested) {
      throw invalid(name, [
        {
          reason: 'FieldValueInvalid',
          field: 'metadata.resourceVersion',
          message: 'Invalid value: 0x0: must be specified for an update',
        },
      ]);
    }
    if (requested !== current.metadata.resourceVersion) throw conflict(name);
    if (candidate.metadata.uid && candidate.metadata.uid !== current.metadata.uid) {
      throw conflict(
        name,
        `Precondition failed: UID in precondition: ${candidate.metadata.uid}, UID in object meta: ${current.metadata.uid}`,
      );
    }
    const next =
      subresource === 'status' ? statusUpdate(current, candidate) : this.mainUpdate(current, candidate);
    if (deepEqual(next, current)) return { object: deepCopy(current), warnings };
    this.admit(next, false);
    if (options.dryRun) return { object: deepCopy(next), warnings };
    const finalized = next.metadata.deletionTimestamp !== undefined && !next.metadata.finalizers?.length;
    const type = finalized ? 'DELETED' : 'MODIFIED';
    return { object: this.commit(type, next, current, subresource, verb), warnings };
  }

  /**
   * DELETE. Preconditions mismatch -> 409. With finalizers the object only gets a
   * deletionTimestamp (a MODIFIED event) and stays until an update removes the last finalizer.
   * Returns whether it is gone and its last state.
   */
  delete(
    name: string,
    preconditions: DeletePreconditions = {},
    options: WriteOptions = {},
  ): { deleted: boolean; object: CiliumNodeObject } {
    const current = this.objects.get(name);
    if (current === undefined) throw notFound(name);
    const meta = current.metadata;
    if (preconditions.uid !== undefined && preconditions.uid !== meta.uid) {
      throw conflict(
        name,
        `Precondition failed: UID in precondition: ${preconditions.uid}, UID in object meta: ${meta.uid}`,
      );
    }
    if (
      preconditions.resourceVersion !== undefined &&
      preconditions.resourceVersion !== meta.resourceVersion
    ) {
      throw conflict(
        name,
        `Precondition failed: ResourceVersion in precondition: ${preconditions.resourceVersion}, ` +
          `ResourceVersion in object meta: ${meta.resourceVersion}`,
      );
    }
    if (meta.finalizers?.length) {
      if (meta.deletionTimestamp !== undefined || options.dryRun)
        return { deleted: false, object: deepCopy(current) };
      const next = deepCopy(current);
      next.metadata.deletionTimestamp = rfc3339(this.now());
      next.metadata.deletionGracePeriodSeconds = 0;
      return { deleted: false, object: this.commit('MODIFIED', next, current, 'main', 'delete') };
    }
    if (options.dryRun) return { deleted: true, object: deepCopy(current) };
    return { deleted: true, object: this.commit('DELETED', deepCopy(current), current, 'main', 'delete') };
  }

  // ---- internals ---------------------------------------------------------------------------

  /**
   * Request decoding: kind/apiVersion checks (400), ObjectMeta decoding, and pruning of unknown
   * fields by the first schema. `fieldValidation=Strict` turns pruned fields into a 400, `Warn`
   * (the default) into warnings, `Ignore` drops them silently.
   */
  private decode(
    body: unknown,
    fieldValidation: FieldValidation = 'Warn',
  ): { object: CiliumNodeObject; warnings: string[] } {
    if (!isJsonObject(body) || typeof body.kind !== 'string' || body.kind === '') {
      throw badRequest(`Object 'Kind' is missing in '${JSON.stringify(body)}'`);
    }
    if (body.apiVersion !== API_VERSION) {
      throw badRequest(
        `the API version in the data (${String(body.apiVersion)}) does not match the expected API version (${API_VERSION})`,
      );
    }
    if (body.kind !== KIND) {
      throw badRequest(`the kind in the data (${body.kind}) does not match the expected kind (${KIND})`);
    }
    const object = deepCopy(body);
    const metadata = object.metadata ?? {};
    if (!isJsonObject(metadata))
      throw badRequest('json: cannot unmarshal metadata into Go value of type v1.ObjectMeta');
    const pruned: string[] = [];
    for (const key of Object.keys(metadata)) {
      if (!OBJECT_META_FIELDS.has(key)) {
        delete metadata[key];
        pruned.push(`metadata.${key}`);
      }
    }
    for (const field of ['labels', 'annotations'] as const) {
      const map = metadata[field];
      if (
        map !== undefined &&
        map !== null &&
        (!isJsonObject(map) || Object.values(map).some((v) => typeof v !== 'string'))
      ) {
        throw badRequest(
          `json: cannot unmarshal metadata.${field} into Go struct field of type map[string]string`,
        );
      }
    }
    object.metadata = metadata;
    pruned.push(...prune(object, loadCiliumNodeSchema(this.schemas[0]!)));
    if (fieldValidation === 'Strict' && pruned.length > 0) {
      throw badRequest(`strict decoding error: ${pruned.map((p) => `unknown field "${p}"`).join(', ')}`);
    }
    const warnings = fieldValidation === 'Ignore' ? [] : pruned.map((p) => `unknown field "${p}"`);
    return { object: object as CiliumNodeObject, warnings };
  }

  /** The metadata a client may set; the rest is the server's. */
  private userMetadata(metadata: Partial<ObjectMeta>): Partial<ObjectMeta> {
    const user: Partial<ObjectMeta> = {};
    if (metadata.labels) user.labels = metadata.labels;
    if (metadata.annotations) user.annotations = metadata.annotations;
    if (metadata.finalizers?.length) user.finalizers = metadata.finalizers;
    if (metadata.ownerReferences?.length) user.ownerReferences = metadata.ownerReferences;
    return user;
  }

  /** customResourceStrategy.PrepareForUpdate with the status subresource enabled. */
  private mainUpdate(current: CiliumNodeObject, candidate: CiliumNodeObject): CiliumNodeObject {
    const { status: _ignored, ...withoutStatus } = candidate;
    const kept = current.metadata;
    const next: CiliumNodeObject = {
      ...withoutStatus,
      metadata: {
        name: kept.name,
        ...(kept.generateName ? { generateName: kept.generateName } : {}),
        uid: kept.uid,
        resourceVersion: kept.resourceVersion,
        generation: kept.generation,
        creationTimestamp: kept.creationTimestamp,
        ...(kept.deletionTimestamp ? { deletionTimestamp: kept.deletionTimestamp } : {}),
        ...(kept.deletionGracePeriodSeconds !== undefined
          ? { deletionGracePeriodSeconds: kept.deletionGracePeriodSeconds }
          : {}),
        ...this.userMetadata(candidate.metadata),
      },
    };
    if (current.status !== undefined) next.status = deepCopy(current.status);
    if (!deepEqual(withoutMetadata(next), withoutMetadata(current))) next.metadata.generation++;
    return next;
  }

  /** Metadata rules plus every selected CRD schema; any error -> 422 and nothing stored. */
  private admit(next: CiliumNodeObject, isCreate: boolean): void {
    const errors = validateMetadata(next.metadata, isCreate);
    const bySchema = new Map<string, { error: FieldError; versions: SchemaVersion[] }>();
    this.schemas.forEach((version, index) => {
      const copy = deepCopy(next) as JsonObject;
      // What a server with this CRD would store: the first schema already pruned the request.
      if (index > 0) prune(copy, loadCiliumNodeSchema(version));
      for (const error of validate(copy, loadCiliumNodeSchema(version))) {
        const key = fieldErrorText(error);
        const seen = bySchema.get(key);
        if (seen === undefined) bySchema.set(key, { error, versions: [version] });
        else seen.versions.push(version);
      }
    });
    for (const { error, versions } of bySchema.values()) {
      // Same text as the real server; say which generation objects when not all of them do.
      const note = versions.length === this.schemas.length ? '' : ` (CiliumNode CRD ${versions.join(', ')})`;
      errors.push({ ...error, message: `${error.message}${note}` });
    }
    if (errors.length > 0) throw invalid(next.metadata.name, errors);
  }

  private commit(
    type: EventType,
    next: CiliumNodeObject,
    previous: CiliumNodeObject | undefined,
    subresource: Subresource,
    verb: WriteVerb,
  ): CiliumNodeObject {
    this.revision++;
    next.metadata.resourceVersion = String(this.revision);
    const name = next.metadata.name;
    if (type === 'DELETED') this.objects.delete(name);
    else this.objects.set(name, next);
    const event: StoredEvent = {
      entry: { resourceVersion: next.metadata.resourceVersion, name, type, subresource, verb, object: next },
      previous,
    };
    this.events.push(event);
    for (const subscriber of this.subscribers) subscriber(event);
    for (const listener of this.writeListeners) listener(deepCopy(event.entry));
    return deepCopy(next);
  }
}

/** statusStrategy.PrepareForUpdate: the stored object with only `status` taken from the request. */
function statusUpdate(current: CiliumNodeObject, candidate: CiliumNodeObject): CiliumNodeObject {
  const next = deepCopy(current);
  if (candidate.status !== undefined) next.status = deepCopy(candidate.status);
  else delete next.status;
  return next;
}

function specOf(object: CiliumNodeObject): JsonObject {
  const { metadata: _metadata, status: _status, ...rest } = object;
  return rest;
}

function requiredName(): FieldError {
  return {
    reason: 'FieldValueRequired',
    field: 'metadata.name',
    message: 'Required value: name or generateName is required',
  };
}

/** `names.SimpleNameGenerator`: five characters from a consonant-and-digit alphabet. */
function randomSuffix(): string {
  const alphabet = 'bcdfghjklmnpqrstvwxz2456789';
  return Array.from({ length: 5 }, () => alphabet[Math.floor(Math.random() * alphabet.length)]).join('');
}

/** ObjectMeta validation (`ValidateObjectMetaAccessor`): the name on create, label keys and values. */
function validateMetadata(metadata: ObjectMeta, isCreate: boolean): FieldError[] {
  const errors: FieldError[] = [];
  const name = metadata.name;
  if (isCreate && (name.length > 253 || !DNS_SUBDOMAIN.test(name))) {
    errors.push({
      reason: 'FieldValueInvalid',
      field: 'metadata.name',
      message:
        `Invalid value: ${JSON.stringify(name)}: a lowercase RFC 1123 subdomain must consist of lower case ` +
        `alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`,
    });
  }
  for (const [key, value] of Object.entries(metadata.labels ?? {})) {
    const slash = key.lastIndexOf('/');
    const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
    const namePart = slash >= 0 ? key.slice(slash + 1) : key;
    const keyOk =
      namePart.length <= 63 &&
      QUALIFIED_NAME_PART.test(namePart) &&
      (prefix === undefined || (prefix.length <= 253 && DNS_SUBDOMAIN.test(prefix)));
    if (!keyOk) {
      errors.push({
        reason: 'FieldValueInvalid',
        field: 'metadata.labels',
        message: `Invalid value: ${JSON.stringify(key)}: name part must consist of alphanumeric characters, '-', '_' or '.'`,
      });
    }
    if (value.length > 63 || (value !== '' && !QUALIFIED_NAME_PART.test(value))) {
      errors.push({
        reason: 'FieldValueInvalid',
        field: `metadata.labels`,
        message: `Invalid value: ${JSON.stringify(value)}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.'`,
      });
    }
  }
  return errors;
}
