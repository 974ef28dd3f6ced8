import type { KubernetesUnderTest } from '../../support/kubernetes.ts';
import { type HttpsJsonClient, type HttpsJsonResponse, httpsJsonClient } from './https-json.ts';

/**
 * Support for the differential suite: one backend (the real kube-apiserver or the emulator) as the
 * raw JSON clients a case sends its requests through, and the comparison of two observations.
 *
 * An observation is a flat record of what the functions depend on (`status`, `reason`, whether a
 * resourceVersion is there, the content of a field after a write); the suite builds one per backend
 * from the same requests and compares them key by key.
 */

export const CILIUMNODES = '/apis/cilium.io/v2/ciliumnodes';

export interface Backend {
  readonly name: KubernetesUnderTest['backend'];
  readonly admin: HttpsJsonClient;
  /** The client of a function identity (`Allocate`, `Sweep`, `Sync`, `Watch`, `Ungrouped`). */
  as(functionId: string): HttpsJsonClient;
  /** A client presenting `token`, known to the server or not. */
  withToken(token: string): HttpsJsonClient;
  /** The user name and groups the server knows a function identity by. */
  identityOf(functionId: string): { readonly user: string; readonly groups: readonly string[] };
}

export function backendOf(kubernetes: KubernetesUnderTest): Backend {
  const clientFor = (token: string): HttpsJsonClient =>
    kubernetes.controlPlane === undefined
      ? httpsJsonClient({ url: kubernetes.url, token })
      : kubernetes.controlPlane.clientFor(token);
  const admin = clientFor(kubernetes.token);
  return {
    name: kubernetes.backend,
    admin,
    as: (functionId) => clientFor(kubernetes.tokenOf(functionId)),
    withToken: clientFor,
    identityOf: (functionId) => {
      const identity = kubernetes.identities.find((candidate) => candidate.functionId === functionId);
      if (identity === undefined) throw new Error(`no function identity ${functionId}`);
      return identity.kubernetes;
    },
  };
}

export type Observation = Readonly<Record<string, unknown>>;

export interface Difference {
  readonly real: unknown;
  readonly emulator: unknown;
}

/** JSON with every object's keys sorted: the two servers order an object's fields differently. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_key, field: unknown) =>
    field !== null && typeof field === 'object' && !Array.isArray(field)
      ? Object.fromEntries(Object.entries(field).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : field,
  );
}

/** Every key whose value (compared as JSON, keys in any order) is not the same in the two observations. */
export function differences(real: Observation, emulator: Observation): Record<string, Difference> {
  const keys = [...new Set([...Object.keys(real), ...Object.keys(emulator)])].sort();
  return Object.fromEntries(
    keys
      .filter((key) => canonical(real[key]) !== canonical(emulator[key]))
      .map((key) => [key, { real: real[key], emulator: emulator[key] }]),
  );
}

interface StatusBody {
  reason?: string;
  details?: { causes?: { field?: string }[] };
}

/** What the functions read of an error answer: the code, the reason, and the fields its causes name. */
export function errorShape(response: HttpsJsonResponse, prefix = ''): Observation {
  const body = (response.body ?? {}) as StatusBody;
  return {
    [`${prefix}status`]: response.status,
    [`${prefix}reason`]: body.reason,
    [`${prefix}hasCauses`]: body.details?.causes !== undefined,
    [`${prefix}causeFields`]: (body.details?.causes ?? []).map((cause) => cause.field).sort(),
  };
}

/** The `Warning` header's texts (`299 - "text"`), without the agent part. */
export function warningsOf(response: HttpsJsonResponse): string[] {
  const header = response.headers.warning;
  const values = header === undefined ? [] : Array.isArray(header) ? header : [header];
  return values
    .flatMap((value) => value.split(/,(?=\s*299 )/))
    .map((value) => /^\s*299 \S+ "(.*)"\s*$/.exec(value)?.[1]?.replace(/\\"/g, '"') ?? value.trim())
    .sort();
}

/** Resolves with the first `count` watch events (not bookmarks); rejects after `timeoutMs`. */
export async function watchEvents(
  client: HttpsJsonClient,
  path: string,
  count: number,
  timeoutMs = 15_000,
): Promise<{ events: Promise<{ type: string; object: WatchedObject }[]>; close(): void }> {
  const events: { type: string; object: WatchedObject }[] = [];
  let resolveEvents: (value: typeof events) => void = () => {};
  let timer: ReturnType<typeof setTimeout> | undefined;
  const done = new Promise<typeof events>((resolve, reject) => {
    resolveEvents = resolve;
    timer = setTimeout(
      () => reject(new Error(`watch ${path}: ${events.length} of ${count} events`)),
      timeoutMs,
    );
  }).finally(() => clearTimeout(timer));
  const watch = await client.watch(path, (event) => {
    const { type, object } = event as { type: string; object: WatchedObject };
    if (type === 'BOOKMARK') return;
    events.push({ type, object });
    if (events.length === count) resolveEvents(events);
  });
  return { events: done, close: watch.close };
}

export interface WatchedObject {
  metadata: { name: string; resourceVersion: string };
  spec?: { ipam?: { 'pre-allocate'?: number } };
}

/** Whether every resourceVersion is a number greater than the one before. */
export function strictlyIncreasing(resourceVersions: readonly (string | undefined)[]): boolean {
  return resourceVersions.every(
    (version, index) =>
      version !== undefined &&
      /^\d+$/.test(version) &&
      (index === 0 || Number(version) > Number(resourceVersions[index - 1])),
  );
}
