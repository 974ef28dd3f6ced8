import { Agent, createServer, request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * A recording pass-through in front of a stand-in (127.0.0.1 only): the functions' endpoints point
 * here, every request is forwarded unchanged and recorded with its start and end time, so the
 * bench can order the round trips of all three services on one clock. It also keeps what the
 * stand-ins do not log: DynamoDB's answers (a failed condition is a 400
 * ConditionalCheckFailedException) and, when asked, the Kubernetes answers.
 */

export interface TapRecord {
  readonly service: string;
  /** performance.timeOrigin-based epoch ms, sub-millisecond. */
  readonly startMs: number;
  readonly endMs: number;
  readonly method: string;
  readonly path: string;
  /** EC2 `Action`, DynamoDB `X-Amz-Target` operation, or the Kubernetes method + path. */
  readonly operation: string;
  readonly statusCode: number;
  /** DynamoDB: the `__type` of an error answer (e.g. ConditionalCheckFailedException). */
  readonly errorType?: string;
  /** The answer body, when `keepBody` selected it. */
  readonly body?: string;
  /** Bytes of the answer body. */
  readonly responseBytes?: number;
}

export interface TapOptions {
  readonly service: string;
  /** Upstream base URL; may be set later with `setUpstream` (requests before that get a 503). */
  readonly upstream?: string;
  /** Keep the answer body of these requests (default none). */
  readonly keepBody?: (record: Omit<TapRecord, 'body' | 'endMs' | 'statusCode'>) => boolean;
}

export interface Tap {
  readonly url: string;
  readonly records: readonly TapRecord[];
  setUpstream(url: string): void;
  /**
   * Holds every request this long before forwarding it (0, the default, forwards at once): the
   * stand-ins answer in about a millisecond, so requests the code starts together would otherwise
   * be ordered by the client's own CPU time and count as sequential round trips.
   */
  setLatencyMs(ms: number): void;
  close(): Promise<void>;
}

export const nowMs = (): number => performance.timeOrigin + performance.now();

export async function startTap(options: TapOptions): Promise<Tap> {
  let upstream = options.upstream === undefined ? undefined : new URL(options.upstream);
  const records: TapRecord[] = [];
  let latencyMs = 0;
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const server = createServer((incoming, outgoing) => {
    const startMs = nowMs();
    const chunks: Buffer[] = [];
    incoming.on('data', (chunk: Buffer) => chunks.push(chunk));
    incoming.on('end', async () => {
      if (latencyMs > 0) await sleep(latencyMs);
      const requestBody = Buffer.concat(chunks);
      const operation = operationOf(options.service, incoming, requestBody);
      const base = {
        service: options.service,
        startMs,
        method: incoming.method ?? 'GET',
        path: incoming.url ?? '/',
        operation,
      };
      if (upstream === undefined) {
        outgoing.writeHead(503).end();
        return;
      }
      const forwarded = httpRequest(
        {
          agent,
          host: upstream.hostname,
          port: upstream.port,
          method: incoming.method,
          path: incoming.url,
          headers: incoming.headers,
        },
        (answer) => {
          const answerChunks: Buffer[] = [];
          outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.on('data', (chunk: Buffer) => {
            answerChunks.push(chunk);
            outgoing.write(chunk);
          });
          answer.on('end', () => {
            outgoing.end();
            const statusCode = answer.statusCode ?? 0;
            const text = Buffer.concat(answerChunks).toString('utf8');
            const errorType = statusCode >= 400 ? errorTypeOf(options.service, text) : undefined;
            records.push({
              ...base,
              endMs: nowMs(),
              statusCode,
              responseBytes: Buffer.byteLength(text),
              ...(errorType === undefined ? {} : { errorType }),
              ...(options.keepBody?.(base) ? { body: text } : {}),
            });
          });
          answer.on('error', () => outgoing.destroy());
        },
      );
      forwarded.on('error', () => {
        records.push({ ...base, endMs: nowMs(), statusCode: 0 });
        outgoing.destroy();
      });
      forwarded.end(requestBody);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    records,
    setUpstream: (url) => {
      const parsed = new URL(url);
      if (!/^127\.\d+\.\d+\.\d+$/.test(parsed.hostname)) {
        throw new Error(`the bench only forwards to 127.0.0.0/8, not ${url}`);
      }
      upstream = parsed;
    },
    setLatencyMs: (ms) => {
      latencyMs = ms;
    },
    close: () =>
      new Promise<void>((resolve) => {
        agent.destroy();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function operationOf(service: string, incoming: IncomingMessage, body: Buffer): string {
  if (service === 'dynamodb') {
    const target = incoming.headers['x-amz-target'];
    return (typeof target === 'string' ? target.split('.').pop() : undefined) ?? 'unknown';
  }
  if (service === 'ec2') {
    const fromBody = /(?:^|&)Action=([A-Za-z0-9]+)/.exec(body.toString('utf8'))?.[1];
    const fromQuery = /[?&]Action=([A-Za-z0-9]+)/.exec(incoming.url ?? '')?.[1];
    return fromBody ?? fromQuery ?? 'unknown';
  }
  const path = (incoming.url ?? '/').split('?')[0] ?? '/';
  return `${incoming.method ?? 'GET'} ${path.endsWith('/status') ? 'status' : path.split('/').length >= 6 ? 'object' : 'collection'}`;
}

function errorTypeOf(service: string, body: string): string | undefined {
  if (service === 'dynamodb') {
    try {
      const type = (JSON.parse(body) as { __type?: string }).__type;
      return type?.split('#').pop();
    } catch {
      return undefined;
    }
  }
  if (service === 'ec2') return /<Code>([^<]+)<\/Code>/.exec(body)?.[1];
  return undefined;
}
