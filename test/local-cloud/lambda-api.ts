import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { InvocationResult } from './lambda-runner.ts';

/**
 * The Lambda Invoke API (`POST /2015-03-31/functions/{FunctionName}/invocations`, RequestResponse)
 * on 127.0.0.1, in front of the local cloud's functions, so `@aws-sdk/client-lambda` reaches them
 * through AWS_ENDPOINT_URL_LAMBDA exactly as it reaches the deployed ones (`npm run resync --
 * --local`, and the watcher's invokes of the allocate function). A function error answers 200 with
 * `X-Amz-Function-Error: Unhandled`, as Lambda does. With `authorize`, each request is authorized
 * by its SigV4 access key first: a denial answers 403 `AccessDeniedException`, as IAM's does.
 */
export interface LocalLambdaApi {
  readonly url: string;
  close(): Promise<void>;
}

const INVOKE_PATH = /^\/2015-03-31\/functions\/([^/]+)\/invocations$/;

/** The denial message when the caller (by access key id) may not invoke `functionName`; else undefined. */
export type InvokeAuthorizer = (accessKeyId: string, functionName: string) => Promise<string | undefined>;

export async function startLocalLambdaApi(
  invokeByName: (functionName: string, event: unknown) => Promise<InvocationResult | undefined>,
  authorize?: InvokeAuthorizer,
): Promise<LocalLambdaApi> {
  const server: Server = createServer((request, response) => {
    void answer(request, response, invokeByName, authorize).catch((error: unknown) => {
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
  invokeByName: (functionName: string, event: unknown) => Promise<InvocationResult | undefined>,
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
  const result = await invokeByName(name, event);
  if (!result) {
    send(
      response,
      404,
      { 'x-amzn-errortype': 'ResourceNotFoundException' },
      { message: `Function not found: ${name}` },
    );
    return;
  }
  if (result.status === 'failed') {
    send(response, 200, { 'x-amz-function-error': 'Unhandled' }, result.error);
    return;
  }
  send(response, 200, {}, result.payload ?? null);
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
