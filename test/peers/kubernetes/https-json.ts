import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

/**
 * A minimal JSON-over-HTTPS client for the control plane's fixtures and the differential suite: it
 * sends exactly the method, path, body and content type it is given (no client-side defaulting, no
 * retries), so what a test compares is what the server answered. An `http:` URL (the emulator, which
 * serves plain HTTP) is sent the same requests over plain HTTP; either way only loopback is reached.
 */

export interface HttpsJsonResponse {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The parsed JSON body, or the raw text when the body is not JSON. */
  readonly body: unknown;
}

export interface HttpsJsonClient {
  /** `headers`: extra request headers (e.g. `Impersonate-User`), sent as given. */
  request(
    method: string,
    path: string,
    body?: unknown,
    contentType?: string,
    headers?: Readonly<Record<string, string | readonly string[]>>,
  ): Promise<HttpsJsonResponse>;
  /** Opens a watch (`path` carries `watch=true`) and calls `onEvent` per line until `close()` or the server ends it. */
  watch(path: string, onEvent: (event: unknown) => void): Promise<{ close(): void; ended: Promise<number> }>;
}

export interface HttpsJsonClientOptions {
  /** `https://127.0.0.1:<port>`, or `http://127.0.0.1:<port>` for a plain-HTTP server. */
  readonly url: string;
  /** The CA that verifies an `https:` server's certificate (not used over plain HTTP). */
  readonly caPem?: string;
  readonly token: string;
}

export function httpsJsonClient(options: HttpsJsonClientOptions): HttpsJsonClient {
  const base = new URL(options.url);
  if (!/^127\.\d+\.\d+\.\d+$/.test(base.hostname))
    throw new Error(`refusing a non-loopback server: ${options.url}`);
  if (base.protocol === 'https:' && options.caPem === undefined)
    throw new Error(`an https server needs the CA that verifies it: ${options.url}`);
  if (base.protocol !== 'https:' && base.protocol !== 'http:')
    throw new Error(`not an http(s) URL: ${options.url}`);
  const send = base.protocol === 'https:' ? httpsRequest : httpRequest;
  const requestOptions = (
    method: string,
    path: string,
    contentType?: string,
    extraHeaders: Readonly<Record<string, string | readonly string[]>> = {},
  ) => ({
    method,
    host: base.hostname,
    port: base.port,
    path,
    ...(options.caPem === undefined ? {} : { ca: options.caPem }),
    headers: {
      Authorization: `Bearer ${options.token}`,
      Accept: 'application/json',
      ...(contentType === undefined ? {} : { 'Content-Type': contentType }),
      ...(extraHeaders as Record<string, string | string[]>),
    },
  });
  return {
    request: (method, path, body, contentType, headers) =>
      new Promise((resolve, reject) => {
        const payload =
          body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
        const type = payload === undefined ? undefined : (contentType ?? 'application/json');
        // The length always: Node sends a DELETE's body unframed otherwise, and the server reads it
        // as the start of the connection's next request.
        const length: Record<string, string> =
          payload === undefined ? {} : { 'Content-Length': String(Buffer.byteLength(payload)) };
        const request = send(requestOptions(method, path, type, { ...length, ...headers }), (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown = text;
            try {
              parsed = text === '' ? undefined : JSON.parse(text);
            } catch {
              // Not JSON (e.g. /readyz's "ok"): keep the text.
            }
            resolve({ status: response.statusCode ?? 0, headers: response.headers, body: parsed });
          });
          response.on('error', reject);
        });
        // A server killed mid-request (a restart test) must not hang its caller.
        request.setTimeout(15_000, () => request.destroy(new Error(`${method} ${path}: no answer in 15 s`)));
        request.on('error', reject);
        request.end(payload);
      }),
    watch: (path, onEvent) =>
      new Promise((resolve, reject) => {
        const request = send(requestOptions('GET', path), (response) => {
          if (response.statusCode !== 200) {
            reject(new WatchRefusedError(path, response.statusCode ?? 0));
            response.resume();
            return;
          }
          let buffered = '';
          const ended = new Promise<number>((resolveEnded) => {
            response.on('close', () => resolveEnded(response.statusCode ?? 0));
            response.on('error', () => resolveEnded(response.statusCode ?? 0));
          });
          response.on('data', (chunk: Buffer) => {
            buffered += chunk.toString('utf8');
            let newline = buffered.indexOf('\n');
            while (newline >= 0) {
              const line = buffered.slice(0, newline).trim();
              buffered = buffered.slice(newline + 1);
              if (line !== '') onEvent(JSON.parse(line));
              newline = buffered.indexOf('\n');
            }
          });
          resolve({ close: () => request.destroy(), ended });
        });
        request.on('error', reject);
        request.end();
      }),
  };
}

/** The server answered a watch with something other than 200 (e.g. 410 Gone for a too old resourceVersion). */
export class WatchRefusedError extends Error {
  constructor(
    path: string,
    readonly status: number,
  ) {
    super(`watch ${path}: ${status}`);
  }
}
