import { ApiException, CustomObjectsApi, type KubeConfig, Watch } from '@kubernetes/client-node';
import {
  CILIUM_API_GROUP,
  CILIUM_API_VERSION,
  CILIUM_NODE_PLURAL,
  type CiliumNode,
  CiliumNodeNotFoundError,
  type CiliumNodePort,
  type JsonPatchOperation,
  ResourceVersionConflictError,
} from '../core/ciliumnode.ts';
import type { CiliumNodeList, CiliumNodeWatchEvent, CiliumNodeWatchPort } from '../core/ports.ts';

/**
 * `cilium.io/v2` CiliumNodes over @kubernetes/client-node's CustomObjectsApi (cluster-scoped).
 * Build one per container: it holds the HTTP agent and the authentication.
 *
 * Patches are JSON Patch (`application/json-patch+json`, client-node's default for PATCH): strategic
 * merge is not supported for custom resources, and JSON Patch's `test` op makes a resourceVersion
 * precondition part of the patch. Error mapping, and nothing else is translated:
 * - 404 on get: `undefined`; 404 on a patch: `CiliumNodeNotFoundError`;
 * - 409 (Conflict, AlreadyExists) and the 422 a failed `test` of `/metadata/resourceVersion`
 *   produces: `ResourceVersionConflictError`;
 * - everything else (schema-invalid 422, 5xx, 429, network) is rethrown as is.
 */
type PatchRequest = Parameters<CustomObjectsApi['patchClusterCustomObject']>[0];

export class KubernetesCiliumNodeApi implements CiliumNodePort, CiliumNodeWatchPort {
  private readonly api: CustomObjectsApi;

  constructor(
    private readonly kubeConfig: KubeConfig,
    private readonly options: { fieldManager?: string; listPageSize?: number } = {},
  ) {
    this.api = kubeConfig.makeApiClient(CustomObjectsApi);
  }

  async get(name: string): Promise<CiliumNode | undefined> {
    try {
      return (await this.api.getClusterCustomObject({ ...RESOURCE, name })) as CiliumNode;
    } catch (error) {
      if (error instanceof ApiException && error.code === 404) return undefined;
      throw error;
    }
  }

  async create(object: CiliumNode): Promise<CiliumNode> {
    try {
      return (await this.api.createClusterCustomObject({
        ...RESOURCE,
        body: object,
        ...this.fieldManager(),
      })) as CiliumNode;
    } catch (error) {
      throw translateWriteError(error, object.metadata.name);
    }
  }

  patchMain(name: string, operations: readonly JsonPatchOperation[]): Promise<CiliumNode> {
    return this.patch(name, operations, (request) => this.api.patchClusterCustomObject(request));
  }

  patchStatus(name: string, operations: readonly JsonPatchOperation[]): Promise<CiliumNode> {
    return this.patch(name, operations, (request) => this.api.patchClusterCustomObjectStatus(request));
  }

  /** One JSON Patch to the main resource or to /status; errors translated as the class says. */
  private async patch(
    name: string,
    operations: readonly JsonPatchOperation[],
    send: (request: PatchRequest) => Promise<unknown>,
  ): Promise<CiliumNode> {
    try {
      return (await send({ ...RESOURCE, name, body: operations, ...this.fieldManager() })) as CiliumNode;
    } catch (error) {
      throw translateWriteError(error, name, 'json-patch');
    }
  }

  async list(): Promise<CiliumNode[]> {
    return (await this.listWithResourceVersion()).items;
  }

  /** Every CiliumNode, and the resourceVersion of the (first page of the) list to watch from. */
  async listWithResourceVersion(): Promise<CiliumNodeList> {
    const items: CiliumNode[] = [];
    let resourceVersion: string | undefined;
    let continueToken: string | undefined;
    do {
      const page = (await this.api.listClusterCustomObject({
        ...RESOURCE,
        limit: this.options.listPageSize ?? 500,
        ...(continueToken ? { _continue: continueToken } : {}),
      })) as { items?: CiliumNode[]; metadata?: { continue?: string; resourceVersion?: string } };
      items.push(...(page.items ?? []));
      resourceVersion ??= page.metadata?.resourceVersion;
      continueToken = page.metadata?.continue || undefined;
    } while (continueToken !== undefined);
    if (resourceVersion === undefined) throw new Error('the CiliumNode list carries no resourceVersion');
    return { items, resourceVersion };
  }

  /**
   * One watch stream from `resourceVersion` (bookmarks on), until the server ends it, the
   * connection drops (rejects) or `signal` aborts (resolves). An ERROR event with a 410 Status
   * (history compacted) arrives as `expired` and ends the stream; any other ERROR rejects.
   */
  async watch(
    resourceVersion: string,
    onEvent: (event: CiliumNodeWatchEvent) => void,
    signal: AbortSignal,
  ): Promise<void> {
    const path = `/apis/${CILIUM_API_GROUP}/${CILIUM_API_VERSION}/${CILIUM_NODE_PLURAL}`;
    await new Promise<void>((resolve, reject) => {
      let controller: AbortController | undefined;
      const stop = () => controller?.abort();
      const finish = (error: unknown) => {
        signal.removeEventListener('abort', stop);
        if (error && !signal.aborted) reject(error);
        else resolve();
      };
      new Watch(this.kubeConfig)
        .watch(
          path,
          { resourceVersion, allowWatchBookmarks: true },
          (type: string, object: unknown) => {
            const event = toWatchEvent(type, object);
            if (event instanceof Error) {
              finish(event);
              stop();
            } else {
              onEvent(event);
              if (event.type === 'EXPIRED') stop();
            }
          },
          (error: unknown) => finish(error),
        )
        .then((started) => {
          controller = started;
          if (signal.aborted) stop();
          else signal.addEventListener('abort', stop, { once: true });
        }, finish);
    });
  }

  private fieldManager(): { fieldManager?: string } {
    return { fieldManager: this.options.fieldManager ?? 'serverless-eni-ipam' };
  }
}

function toWatchEvent(type: string, object: unknown): CiliumNodeWatchEvent | Error {
  const body = (object ?? {}) as { code?: number; message?: string; metadata?: { resourceVersion?: string } };
  switch (type) {
    case 'ADDED':
    case 'MODIFIED':
    case 'DELETED':
      return { type, object: object as CiliumNode };
    case 'BOOKMARK':
      return { type, resourceVersion: body.metadata?.resourceVersion ?? '' };
    default:
      if (body.code === 410) return { type: 'EXPIRED' };
      return new Error(`CiliumNode watch failed: ${type} ${body.code ?? ''} ${body.message ?? ''}`);
  }
}

const RESOURCE = {
  group: CILIUM_API_GROUP,
  version: CILIUM_API_VERSION,
  plural: CILIUM_NODE_PLURAL,
} as const;

/** The text evanphx/json-patch (what kube-apiserver uses) gives a failed `test` operation. */
const FAILED_RESOURCE_VERSION_TEST = 'testing value /metadata/resourceVersion failed';

/**
 * Maps a write's ApiException to our errors; returns anything else unchanged, to be rethrown.
 *
 * A JSON Patch that cannot be applied is answered 422 Invalid. Older servers name the failed `test`
 * in a cause; kube-apiserver 1.36 sends only "the server rejected our request due to an error in our
 * request" with no cause at all. Every patch we send starts with a `test` of the resourceVersion it
 * was built from and only touches paths that exist at that version, so a patch that cannot be
 * applied means the object changed since it was read: a lost race, retried like a 409. A schema
 * violation is a 422 too, but always names its fields (`details.causes[].field`), and stays an error.
 */
function translateWriteError(
  error: unknown,
  name: string,
  kind: 'json-patch' | 'create' = 'create',
): unknown {
  if (!(error instanceof ApiException)) return error;
  const status = parseStatus(error.body);
  if (error.code === 404) return new CiliumNodeNotFoundError(name, { cause: error });
  if (error.code === 409) {
    return new ResourceVersionConflictError(name, status?.message ?? `HTTP 409 ${status?.reason ?? ''}`, {
      cause: error,
    });
  }
  if (
    error.code === 422 &&
    (mentionsFailedResourceVersionTest(status) || (kind === 'json-patch' && isUnappliablePatch(status)))
  ) {
    return new ResourceVersionConflictError(
      name,
      'resourceVersion changed since it was read (JSON Patch test failed)',
      {
        cause: error,
      },
    );
  }
  return error;
}

interface KubeStatusBody {
  message?: string;
  reason?: string;
  details?: { causes?: { message?: string; field?: string }[] };
}

/** 422 Invalid naming no field: the patch handler's answer to a patch that does not apply. */
function isUnappliablePatch(status: KubeStatusBody | undefined): boolean {
  return status?.reason === 'Invalid' && !(status.details?.causes ?? []).some((cause) => cause.field);
}

/** ApiException `.body` is the raw response text (a JSON `Status` from the API server). */
function parseStatus(body: unknown): KubeStatusBody | undefined {
  if (typeof body === 'object' && body !== null) return body as KubeStatusBody;
  if (typeof body !== 'string') return undefined;
  try {
    const parsed: unknown = JSON.parse(body);
    return typeof parsed === 'object' && parsed !== null ? (parsed as KubeStatusBody) : undefined;
  } catch {
    return undefined;
  }
}

function mentionsFailedResourceVersionTest(status: KubeStatusBody | undefined): boolean {
  const texts = [status?.message, ...(status?.details?.causes ?? []).map((cause) => cause.message)];
  return texts.some((text) => text?.includes(FAILED_RESOURCE_VERSION_TEST) === true);
}
