import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer as createHttpsServer, request as httpsRequest } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { Faults } from '../../emulators/k8s/faults.ts';
import { parseRoute, requestInfo } from '../../emulators/k8s/server.ts';
import { type ApiError, conflict, internalError, tooManyRequests } from '../../emulators/k8s/status.ts';

/**
 * Faults in front of the real kube-apiserver: an HTTPS server on 127.0.0.1, serving the API server's
 * own certificate, that forwards every request unchanged unless an armed fault (the emulator's
 * `Faults`, matched on the verb, name and subresource kube-apiserver's RequestInfoResolver would
 * give the request) says otherwise:
 *  - `server-error`, `conflict`, `too-many-requests`: answered here with the server's Status body,
 *    never forwarded (nothing applied);
 *  - `drop-connection`: the client's socket is destroyed before anything is forwarded;
 *  - `drop-after-apply`: forwarded and carried out by the server, then the client's socket is
 *    destroyed instead of answering (a watch: after its first event).
 * `faults.dropWatches()` destroys every open watch stream (as a restart of the server would).
 */

export interface FaultProxy {
  /** `https://127.0.0.1:<port>`: point the functions' kubeconfigs here. */
  readonly url: string;
  readonly faults: Faults;
  close(): Promise<void>;
}

export interface FaultProxyOptions {
  /** The real server, `https://127.0.0.1:<port>`. */
  readonly upstream: string;
  readonly caPem: string;
  /** The serving certificate and key (kube-apiserver's own, from its cert dir). */
  readonly certPem: string;
  readonly keyPem: string;
}

export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const upstream = new URL(options.upstream);
  const watches = new Set<Socket>();
  const faults = new Faults(() => {
    const open = [...watches];
    for (const socket of open) socket.destroy();
    watches.clear();
    return open.length;
  });
  const sockets = new Set<Socket>();
  const server = createHttpsServer({ cert: options.certPem, key: options.keyPem }, (req, res) => {
    const url = new URL(req.url ?? '/', 'https://proxy');
    const route = parseRoute(url.pathname);
    const info = route === undefined ? undefined : requestInfo(route, req.method ?? 'GET', url.searchParams);
    const fault = info === undefined ? undefined : faults.take(info);
    if (fault === 'drop-connection') {
      req.socket.destroy();
      return;
    }
    const refusal = refusalOf(fault, info?.name ?? '');
    if (refusal !== undefined) {
      req.resume();
      answer(res, refusal);
      return;
    }
    if (info?.verb === 'watch') watches.add(req.socket);
    forward(req, res, { upstream, caPem: options.caPem, dropAfterApply: fault === 'drop-after-apply' });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => {
      sockets.delete(socket);
      watches.delete(socket);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${port}`,
    faults,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function refusalOf(fault: string | undefined, name: string): ApiError | undefined {
  if (fault === 'server-error') return internalError('injected fault');
  if (fault === 'conflict') return conflict(name);
  if (fault === 'too-many-requests') return tooManyRequests(1);
  return undefined;
}

function answer(res: ServerResponse, error: ApiError): void {
  const payload = JSON.stringify(error.status);
  res.writeHead(error.code, {
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(payload),
    ...error.headers,
  });
  res.end(payload);
}

function forward(
  req: IncomingMessage,
  res: ServerResponse,
  options: { upstream: URL; caPem: string; dropAfterApply: boolean },
): void {
  const headers = { ...req.headers, host: options.upstream.host };
  const upstreamRequest = httpsRequest(
    {
      method: req.method,
      host: options.upstream.hostname,
      port: options.upstream.port,
      path: req.url,
      headers,
      ca: options.caPem,
    },
    (upstreamResponse) => {
      if (options.dropAfterApply) {
        // The server has carried the request out; the client never hears so.
        upstreamResponse.once('data', () => {
          req.socket.destroy();
          upstreamResponse.destroy();
        });
        upstreamResponse.once('end', () => req.socket.destroy());
        return;
      }
      res.writeHead(upstreamResponse.statusCode ?? 502, upstreamResponse.headers);
      // Headers go on as the server sent them: a watch's arrive before its first event (Node
      // would hold them back until the first body write, and a quiet watch would never start).
      res.flushHeaders();
      // A server killed mid-answer (a restart) cuts the client off too, as it would without us:
      // a piped response that never ends would leave the client waiting for good.
      upstreamResponse.once('close', () => {
        if (!upstreamResponse.complete) req.socket.destroy();
      });
      upstreamResponse.pipe(res);
    },
  );
  upstreamRequest.on('error', () => req.socket.destroy());
  res.on('close', () => upstreamRequest.destroy());
  req.pipe(upstreamRequest);
}
