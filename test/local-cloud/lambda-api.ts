import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { InvocationResult } from './lambda-runner.ts';

/**
 * The Lambda Invoke API (`POST /2015-03-31/functions/{FunctionName}/invocations`) on 127.0.0.1, in
 * front of the local cloud's functions, so `@aws-sdk/client-lambda` and the aws CLI reach them
 * through AWS_ENDPOINT_URL_LAMBDA exactly as they reach the deployed ones (`npm run resync --
 * --local`, and the watcher's invokes of the allocate function). As Lambda answers each
 * `X-Amz-Invocation-Type`: `RequestResponse` (the default) runs the function and answers 200 with
 * its result, a function error with `X-Amz-Function-Error: Unhandled`; `Event` queues the event for
 * Lambda's asynchronous invocation (its retries included) and answers 202 at once, with no body;
 * `DryRun` answers 204 once the caller may invoke. With `authorize`, each request is authorized by
 * its SigV4 access key first: a denial answers 403 `AccessDeniedException`, as IAM's does.
 */
export interface LocalLambdaApi {
  readonly url: string;
  close(): Promise<void>;
}

const INVOKE_PATH = /^\/2015-03-31\/functions\/([^/]+)\/invocations$/;

/** The denial message when the caller (by access key id) may not invoke `functionName`; else undefined. */
export type InvokeAuthorizer = (accessKeyId: string, functionName: string) => Promise<string | undefined>;

/** The functions behind the API, by function name; each answers undefined for a name it does not know. */
export interface InvokeTargets {
  /** Runs the function (RequestResponse). */
  invoke(functionName: string, event: unknown): Promise<InvocationResult | undefined>;
  /** Queues the event for an asynchronous invocation (Event); false when no function has the name. */
  queue(functionName: string, event: unknown): boolean;
  /** Whether a function has the name (DryRun). */
  has(functionName: string): boolean;
}

export async function startLocalLambdaApi(
  targets: InvokeTargets,
  authorize?: InvokeAuthorizer,
): Promise<LocalLambdaApi> {
  const server: Server = createServer((request, response) => {
    void answer(request, response, targets, authorize).catch((error: unknown) => {
      send(response, 500, { 'x-amzn-errortype': 'ServiceException' }, { message: String(error) });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function answer(
  request: IncomingMessage,
  response: ServerResponse,
  targets: InvokeTargets,
  authorize: InvokeAuthorizer | undefined,
): Promise<void> {
  const path = new URL(request.url ?? '/', 'http://local').pathname;
  const match = INVOKE_PATH.exec(path);
  if (request.method !== 'POST' || !match) {
    send(response, 404, { 'x-amzn-errortype': 'ResourceNotFoundException' }, { message: `no route ${path}` });
    return;
  }
  const name = decodeURIComponent(match[1] ?? '').replace(/^arn:aws:lambda:[^:]+:\d+:function:/, '');
  const accessKeyId = /Credential=([^/,\s]+)\//.exec(request.headers.authorization ?? '')?.[1] ?? '';
  const denial = await authorize?.(accessKeyId, name);
  if (denial !== undefined) {
    request.resume();
    send(response, 403, { 'x-amzn-errortype': 'AccessDeniedException' }, { Message: denial });
    return;
  }
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks).toString('utf8');
  let event: unknown;
  try {
    event = body === '' ? {} : JSON.parse(body);
  } catch {
    send(
      response,
      400,
      { 'x-amzn-errortype': 'InvalidRequestContentException' },
      { message: 'payload is not JSON' },
    );
    return;
  }
  const notFound = () =>
    send(
      response,
      404,
      { 'x-amzn-errortype': 'ResourceNotFoundException' },
      { message: `Function not found: ${name}` },
    );
  const invocationType = request.headers['x-amz-invocation-type'] ?? 'RequestResponse';
  if (invocationType === 'Event') {
    if (!targets.queue(name, event)) return notFound();
    sendEmpty(response, 202);
    return;
  }
  if (invocationType === 'DryRun') {
    if (!targets.has(name)) return notFound();
    sendEmpty(response, 204);
    return;
  }
  if (invocationType !== 'RequestResponse') {
    send(
      response,
      400,
      { 'x-amzn-errortype': 'InvalidParameterValueException' },
      { message: `InvocationType ${String(invocationType)}: expected RequestResponse, Event or DryRun` },
    );
    return;
  }
  const result = await targets.invoke(name, event);
  if (!result) return notFound();
  if (result.status === 'failed') {
    send(response, 200, { 'x-amz-function-error': 'Unhandled' }, result.error);
    return;
  }
  send(response, 200, {}, result.payload ?? null);
}

function sendEmpty(response: ServerResponse, status: 202 | 204): void {
  response.writeHead(status, { 'content-length': 0, 'x-amzn-requestid': 'local' });
  response.end();
}

function send(
  response: ServerResponse,
  status: number,
  headers: Record<string, string>,
  body: unknown,
): void {
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'x-amzn-requestid': 'local',
    ...headers,
  });
  response.end(text);
}
