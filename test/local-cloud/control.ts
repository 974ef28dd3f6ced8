import { randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, request, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LocalCloudState } from '../../infra/local-cloud-state.ts';
import { assertLoopback } from './local-account.ts';
import type { LocalCloud } from './local-cloud.ts';

/**
 * The control endpoint of a running `npm start`: a loopback HTTP server through which a second
 * command (`npm start -- --launch N`) adds instances to the running cloud, as an autoscaler would
 * launch them. It answers only `POST /launch` with `{"count": N}` (1..MAX_LAUNCH) and the bearer
 * token of the cloud's state file (readable by its owner only); anything else is refused and
 * launches nothing.
 */

export const MAX_LAUNCH = 200;

/** An instance launched through the endpoint, as the caller prints it. */
export interface LaunchedInstance {
  readonly instanceId: string;
  readonly instanceType: string;
  readonly nodeName: string;
}

/** The instance types `npm start` launches, in turn. */
export const INSTANCE_TYPES = ['m5.large', 't3.medium', 'c5.xlarge', 'r5.large', 'm5.2xlarge'] as const;

/** Launches the cloud's next instance, of the next type in turn (what `--nodes` and `--launch` do). */
export function nextInstanceLauncher(
  cloud: Pick<LocalCloud, 'launchInstance' | 'launched'>,
): () => LaunchedInstance {
  return () => {
    const instanceType = INSTANCE_TYPES[cloud.launched.length % INSTANCE_TYPES.length] as string;
    const instance = cloud.launchInstance(instanceType);
    return { instanceId: instance.instanceId, instanceType, nodeName: instance.privateDnsName };
  };
}

export interface ControlEndpoint {
  /** `http://127.0.0.1:<port>` */
  readonly endpoint: string;
  readonly token: string;
  close(): Promise<void>;
}

/** Serves the endpoint; `launch` launches one instance of the cloud's cluster. */
export async function startControlEndpoint(launch: () => LaunchedInstance): Promise<ControlEndpoint> {
  const token = randomBytes(24).toString('hex');
  const server = createServer((req, res) => {
    answer(req, token, launch).then(
      ({ code, body }) => reply(res, code, body),
      (error: unknown) => reply(res, 500, { error: String((error as Error)?.message ?? error) }),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    token,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function answer(
  req: IncomingMessage,
  token: string,
  launch: () => LaunchedInstance,
): Promise<{ code: number; body: unknown }> {
  if (!sameSecret(req.headers.authorization ?? '', `Bearer ${token}`)) {
    return { code: 401, body: { error: 'the bearer token of the local cloud state file is required' } };
  }
  if (req.method !== 'POST' || req.url !== '/launch') {
    return { code: 404, body: { error: `no such operation: ${req.method} ${req.url}; POST /launch` } };
  }
  const count = launchCount(await readJson(req));
  if (typeof count === 'string') return { code: 400, body: { error: count } };
  return { code: 200, body: { launched: Array.from({ length: count }, () => launch()) } };
}

/** The requested count, or why it is refused. */
function launchCount(body: unknown): number | string {
  const count = (body as { count?: unknown } | undefined)?.count;
  if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > MAX_LAUNCH) {
    return `count must be a whole number from 1 to ${MAX_LAUNCH}, got ${JSON.stringify(count)}`;
  }
  return count;
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 4096) return undefined;
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return undefined;
  }
}

function reply(res: ServerResponse, code: number, body: unknown): void {
  const payload = JSON.stringify(body);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(payload) });
  res.end(payload);
}

/** A refusal of the running cloud, or no control endpoint to ask: its message says which. */
export class ControlError extends Error {}

/** Asks the running cloud of `state` to launch `count` instances; resolves with them. */
export async function requestLaunch(state: LocalCloudState, count: number): Promise<LaunchedInstance[]> {
  if (state.control === undefined) {
    throw new ControlError(
      `the local cloud of pid ${state.pid} has no control endpoint: restart it with npm start`,
    );
  }
  assertLoopback(state.control.endpoint);
  const { code, body } = await post(state.control.endpoint, '/launch', state.control.token, { count });
  if (code !== 200) {
    throw new ControlError(
      `the local cloud of pid ${state.pid} refused: ${(body as { error?: string })?.error ?? code}`,
    );
  }
  return (body as { launched: LaunchedInstance[] }).launched;
}

function post(
  endpoint: string,
  path: string,
  token: string,
  body: unknown,
): Promise<{ code: number; body: unknown }> {
  const url = new URL(path, endpoint);
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const sent = request(
      url,
      {
        method: 'POST',
        headers: {
          Authorization: `Bearer ${token}`,
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(payload),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown = text;
          try {
            parsed = JSON.parse(text);
          } catch {
            // keep the text
          }
          resolve({ code: res.statusCode ?? 0, body: parsed });
        });
        res.on('error', reject);
      },
    );
    sent.setTimeout(15_000, () => sent.destroy(new Error(`${url.href}: no answer in 15 s`)));
    sent.on('error', (error) =>
      reject(
        new ControlError(`the local cloud's control endpoint ${endpoint} did not answer: ${error.message}`),
      ),
    );
    sent.end(payload);
  });
}
