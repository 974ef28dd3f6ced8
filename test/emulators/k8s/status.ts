/**
 * `metav1.Status` bodies exactly as kube-apiserver builds them (k8s.io/apimachinery
 * `pkg/api/errors`), and the one error type the emulator throws to answer with one.
 *
 * Two spellings of the kind appear in `details.kind`, as on the real server: errors raised by the
 * storage layer (NotFound, AlreadyExists, Conflict, Expired) carry the resource (`ciliumnodes`),
 * validation errors (Invalid) carry the Kind (`CiliumNode`).
 */

export const GROUP = 'cilium.io';
export const VERSION = 'v2';
export const API_VERSION = `${GROUP}/${VERSION}`;
export const KIND = 'CiliumNode';
export const LIST_KIND = 'CiliumNodeList';
export const RESOURCE = 'ciliumnodes';
const QUALIFIED_RESOURCE = `${RESOURCE}.${GROUP}`;
const QUALIFIED_KIND = `${KIND}.${GROUP}`;

/** A `metav1.StatusCause`; Go serialises its `Type` as `reason`. */
export interface StatusCause {
  reason?: string;
  message: string;
  field?: string;
}

export interface KubeStatus {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Success' | 'Failure';
  message?: string;
  reason?: string;
  details?: {
    name?: string;
    group?: string;
    kind?: string;
    uid?: string;
    causes?: StatusCause[];
    retryAfterSeconds?: number;
  };
  code: number;
}

/** Thrown anywhere in the emulator; the server answers `status.code` with `status` as the body. */
export class ApiError extends Error {
  readonly status: KubeStatus;
  readonly headers: Record<string, string>;

  constructor(status: KubeStatus, headers: Record<string, string> = {}) {
    super(status.message ?? status.reason ?? `HTTP ${status.code}`);
    this.name = 'ApiError';
    this.status = status;
    this.headers = headers;
  }

  get code(): number {
    return this.status.code;
  }

  get reason(): string | undefined {
    return this.status.reason;
  }
}

function failure(code: number, reason: string, message: string, details?: KubeStatus['details']): ApiError {
  const status: KubeStatus = {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    code,
  };
  if (details !== undefined) status.details = details;
  return new ApiError(status);
}

const resourceDetails = (name: string) => ({ name, group: GROUP, kind: RESOURCE });

/** `errors.NewNotFound`: GET/PUT/PATCH/DELETE of a missing object. */
export function notFound(name: string): ApiError {
  return failure(404, 'NotFound', `${QUALIFIED_RESOURCE} "${name}" not found`, resourceDetails(name));
}

/** `errors.NewAlreadyExists`: POST of a name that is taken. */
export function alreadyExists(name: string): ApiError {
  return failure(
    409,
    'AlreadyExists',
    `${QUALIFIED_RESOURCE} "${name}" already exists`,
    resourceDetails(name),
  );
}

/**
 * `errors.NewConflict` with `storage.NewResourceVersionConflictsError`'s text: the write carried a
 * resourceVersion that is no longer the stored one (optimistic concurrency).
 */
export function conflict(
  name: string,
  detail = 'the object has been modified; please apply your changes to the latest version and try again',
): ApiError {
  return failure(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${QUALIFIED_RESOURCE} "${name}": ${detail}`,
    resourceDetails(name),
  );
}

/** One field error, as `field.Error` renders it (`<field>: <message>`). */
export interface FieldError {
  reason: 'FieldValueInvalid' | 'FieldValueRequired' | 'FieldValueNotSupported' | 'FieldValueTypeInvalid';
  field: string;
  message: string;
}

export const fieldErrorText = (error: FieldError): string =>
  error.field === '' ? error.message : `${error.field}: ${error.message}`;

/** `errors.NewInvalid`: 422 with one cause per field error; a single error is not bracketed. */
export function invalid(name: string, errors: readonly FieldError[]): ApiError {
  const texts = errors.map(fieldErrorText);
  const summary = texts.length === 1 ? texts[0] : `[${texts.join(', ')}]`;
  return failure(422, 'Invalid', `${QUALIFIED_KIND} "${name}" is invalid: ${summary}`, {
    name,
    group: GROUP,
    kind: KIND,
    causes: errors.map((e) => ({ reason: e.reason, message: e.message, field: e.field })),
  });
}

/**
 * How the patch handler reports a JSON patch that cannot be applied (a failed `test`, a missing
 * path): 422 Invalid with the generic message and no cause naming what failed, as kube-apiserver
 * v1.36.3 answers (the differential suite holds this to the real server). `detail` is the
 * emulator's own reason, kept for its tests' messages only.
 */
export function patchNotApplicable(_detail: string): ApiError {
  return failure(422, 'Invalid', 'the server rejected our request due to an error in our request', {});
}

export function badRequest(message: string): ApiError {
  return failure(400, 'BadRequest', message);
}

export function unauthorized(): ApiError {
  return failure(401, 'Unauthorized', 'Unauthorized');
}

/** kube-apiserver's RBAC denial, e.g. `ciliumnodes.cilium.io "n" is forbidden: User "u" cannot patch resource "ciliumnodes/status" in API group "cilium.io" at the cluster scope`. */
export function forbidden(user: string, verb: string, resource: string, name: string | undefined): ApiError {
  const subject =
    name === undefined ? `${RESOURCE}.${GROUP}` : `${RESOURCE}.${GROUP} ${JSON.stringify(name)}`;
  return failure(
    403,
    'Forbidden',
    `${subject} is forbidden: User ${JSON.stringify(user)} cannot ${verb} resource ${JSON.stringify(resource)} in API group ${JSON.stringify(GROUP)} at the cluster scope`,
    { ...(name === undefined ? {} : { name }), group: GROUP, kind: RESOURCE },
  );
}

/**
 * A refused impersonation, as kube-apiserver v1.36 words it (its constrained-impersonation check,
 * `impersonate-on:user-info:<verb>` on the resource the request is for, reports the denial).
 */
export function forbiddenToImpersonate(
  user: string,
  verb: string,
  resource: string,
  name: string | undefined,
): ApiError {
  return forbidden(user, `impersonate-on:user-info:${verb}`, resource, name);
}

export function routeNotFound(): ApiError {
  return failure(404, 'NotFound', 'the server could not find the requested resource', {});
}

export function methodNotAllowed(method: string): ApiError {
  return failure(405, 'MethodNotAllowed', `the server does not allow this method on the requested resource`, {
    causes: [{ message: `method ${method} is not supported` }],
  });
}

/** `errors.NewGone`-style Expired: a watch or continue token older than the kept history. */
export function expired(message: string): ApiError {
  return failure(410, 'Expired', message);
}

export function requestEntityTooLarge(limitBytes: number): ApiError {
  return failure(413, 'RequestEntityTooLarge', `Request entity too large: limit is ${limitBytes}`);
}

/** What the patch handler answers for a media type it has no patcher for (strategic merge on a CR). */
export function unsupportedMediaType(contentType: string, accepted: readonly string[]): ApiError {
  return failure(
    415,
    'UnsupportedMediaType',
    `the body of the request was in an unknown format - accepted media types include: ${accepted.join(', ')}`,
    { causes: [{ message: `unsupported media type "${contentType}"` }] },
  );
}

export function tooManyRequests(retryAfterSeconds: number): ApiError {
  const error = failure(429, 'TooManyRequests', 'Too many requests, please try again later.', {
    retryAfterSeconds,
  });
  return new ApiError(error.status, { 'Retry-After': String(retryAfterSeconds) });
}

export function internalError(detail: string): ApiError {
  return failure(500, 'InternalError', `Internal error occurred: ${detail}`, {
    causes: [{ message: detail }],
  });
}

/** The body of a successful DELETE of a custom resource (the CRD store does not return the object). */
export function deleted(name: string, uid: string): KubeStatus {
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Success',
    details: { name, group: GROUP, kind: RESOURCE, uid },
    code: 200,
  };
}

/** 404 for a missing core-group object, e.g. `configmaps "cilium-config" not found`. */
export function coreNotFound(resource: string, name: string): ApiError {
  return failure(404, 'NotFound', `${resource} "${name}" not found`, { name, kind: resource });
}

/** 403 for a namespaced core-group request outside the caller's rules, worded as kube-apiserver does. */
export function forbiddenInNamespace(
  user: string,
  verb: string,
  resource: string,
  namespace: string,
  name: string | undefined,
): ApiError {
  const subject = name === undefined ? resource : `${resource} ${JSON.stringify(name)}`;
  return failure(
    403,
    'Forbidden',
    `${subject} is forbidden: User ${JSON.stringify(user)} cannot ${verb} resource ${JSON.stringify(resource)} in API group "" in the namespace ${JSON.stringify(namespace)}`,
    { ...(name === undefined ? {} : { name }), kind: resource },
  );
}

/**
 * A dryRun value other than `All` in the options of a write, as kube-apiserver validates them:
 * 422 Invalid of the options kind (`CreateOptions`, `UpdateOptions`, `PatchOptions`,
 * `DeleteOptions`) in `meta.k8s.io`, the cause on field `dryRun`.
 */
export function invalidDryRun(optionsKind: string, values: readonly string[]): ApiError {
  const message = `Unsupported value: ${JSON.stringify(values)}: supported values: "All"`;
  return failure(422, 'Invalid', `${optionsKind}.meta.k8s.io "" is invalid: dryRun: ${message}`, {
    group: 'meta.k8s.io',
    kind: optionsKind,
    causes: [{ reason: 'FieldValueNotSupported', message, field: 'dryRun' }],
  });
}
