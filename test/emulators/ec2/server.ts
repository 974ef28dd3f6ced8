import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ACTION_HANDLERS } from './actions.ts';
import { EC2_ADMINISTRATOR, Ec2Authorizer, type IamIdentity } from './authorization.ts';
import { authorizationRequests } from './authorization-requests.ts';
import { CallLog, type CallOutcome } from './calls.ts';
import { Ec2ApiError, ec2Errors } from './errors.ts';
import { FaultInjector, type FaultSpec } from './faults.ts';
import { QueryParams } from './query.ts';
import { Ec2State, type Ec2StateOptions } from './state.ts';
import { bucketKeyFor, ThrottleBuckets, type ThrottlingOption } from './throttling.ts';
import { renderDocument, renderElement, type XmlObject } from './xml.ts';

/**
 * The EC2 emulator's HTTP front: the EC2 Query protocol on 127.0.0.1, so the real
 * @aws-sdk/client-ec2 talks to it through `endpoint` or AWS_ENDPOINT_URL_EC2.
 *
 * A call goes through, in order: action lookup (InvalidAction), SigV4 header presence and a known
 * access key (AuthFailure), the action's token bucket (RequestLimitExceeded, 503), injected
 * faults, IAM authorization against the caller's identity policies (UnauthorizedOperation, 403;
 * see authorization.ts), DryRun, the `beforeApply` hook, then the state change. Only the last step changes state, so a
 * throttled, faulted or rejected call leaves it untouched (except `lost-response`, which applies
 * the change and then loses the answer).
 */

export type BeforeApplyHook = (
  action: string,
  params: Readonly<Record<string, string>>,
) => void | Promise<void>;

export interface Ec2EmulatorOptions extends Ec2StateOptions {
  /** `true` = AWS's published token buckets; an object overrides single buckets. Default false. */
  throttling?: ThrottlingOption;
  /** Runs before a call is applied (after throttling and faults); may await, or throw an Ec2ApiError to answer it. */
  beforeApply?: BeforeApplyHook;
  /** Answer AuthFailure to requests without a SigV4 Authorization header (default true). */
  requireSignature?: boolean;
  /**
   * Access key id → the IAM identity whose policies authorize its calls; any other key is
   * AuthFailure. Default: every signed request is `EC2_ADMINISTRATOR` (allowed every EC2 action,
   * still evaluated), for tests of EC2's own rules.
   */
  identities?: Readonly<Record<string, IamIdentity>>;
  /** Port on 127.0.0.1; default 0 (a random free port). */
  port?: number;
}

export interface Ec2Emulator {
  /** `http://127.0.0.1:<port>`: pass as `endpoint` or AWS_ENDPOINT_URL_EC2. */
  readonly url: string;
  readonly state: Ec2State;
  readonly calls: CallLog;
  readonly faults: FaultInjector;
  readonly throttling: ThrottleBuckets;
  /** Errors thrown by the emulator itself (bugs), answered as 500 InternalError; tests can assert it stays empty. */
  readonly unexpectedErrors: readonly unknown[];
  setClock(clock: () => number): void;
  setThrottling(option: ThrottlingOption): void;
  setEventualConsistencyMs(milliseconds: number): void;
  setBeforeApply(hook: BeforeApplyHook | undefined): void;
  /** Adds or replaces the identity of an access key (e.g. a policy with a statement removed). */
  setIdentity(accessKeyId: string, identity: IamIdentity): void;
  close(): Promise<void>;
}

const EC2_XML_NAMESPACE = 'http://ec2.amazonaws.com/doc/2016-11-15/';

export async function startEc2Emulator(options: Ec2EmulatorOptions = {}): Promise<Ec2Emulator> {
  const state = new Ec2State(options);
  const calls = new CallLog();
  const faults = new FaultInjector();
  const throttling = new ThrottleBuckets(() => state.now(), options.throttling ?? false);
  const unexpectedErrors: unknown[] = [];
  const requireSignature = options.requireSignature ?? true;
  let beforeApply = options.beforeApply;
  const authorizers = new Map(
    Object.entries(options.identities ?? {}).map(([key, identity]) => [
      key,
      new Ec2Authorizer(identity, state.accountId),
    ]),
  );
  const administrator =
    options.identities === undefined ? new Ec2Authorizer(EC2_ADMINISTRATOR, state.accountId) : undefined;

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const requestId = randomUUID();
    const atMs = state.now();
    const params = await readParams(request);
    const action = params.get('Action') ?? '';
    const paramRecord = params.toRecord();
    let resources: string[] | undefined;
    let deniedByIam = false;
    const log = (outcome: CallOutcome, errorCode?: string): void =>
      calls.record({
        action,
        atMs,
        outcome,
        ...(errorCode === undefined ? {} : { errorCode }),
        ...(resources === undefined ? {} : { resources }),
        ...(deniedByIam ? { deniedByIam } : {}),
      });
    const answerError = (error: Ec2ApiError): void => {
      log(outcomeOfError(error), error.code);
      sendError(response, requestId, error);
    };

    const handler = ACTION_HANDLERS[action];
    if (!handler) return answerError(ec2Errors.invalidAction(action));
    if (requireSignature && !request.headers.authorization?.startsWith('AWS4-HMAC-SHA256')) {
      return answerError(ec2Errors.authFailure());
    }
    const authorizer = authorizers.get(accessKeyIdOf(request)) ?? administrator;
    if (authorizer === undefined) return answerError(ec2Errors.authFailure());
    if (!throttling.tryTake(bucketKeyFor(action, Object.keys(paramRecord)))) {
      return answerError(ec2Errors.requestLimitExceeded());
    }
    const fault = faults.take(action, paramRecord);
    if (fault?.kind === 'throttle') return answerError(ec2Errors.requestLimitExceeded());
    if (fault?.kind === 'server-error') return answerError(ec2Errors.internalError());

    let body: XmlObject;
    try {
      const requests = await authorizationRequests(state, action, params);
      resources = [...new Set(requests.map((request) => request.resourceArn))];
      const denial = await authorizer.firstDenial(requests);
      if (denial !== undefined) {
        deniedByIam = true;
        throw ec2Errors.unauthorizedOperation(denial.message);
      }
      if (params.boolean('DryRun')) {
        throw new Ec2ApiError(
          'DryRunOperation',
          'Request would have succeeded, but DryRun flag is set.',
          412,
        );
      }
      await beforeApply?.(action, paramRecord);
      body = handler(state, params);
    } catch (error) {
      if (error instanceof Ec2ApiError && fault?.kind === 'lost-response') {
        return loseResponse(response, fault, requestId, () => log('lost-response', error.code));
      }
      if (error instanceof Ec2ApiError) return answerError(error);
      unexpectedErrors.push(error);
      return answerError(ec2Errors.internalError());
    }
    if (fault?.kind === 'lost-response')
      return loseResponse(response, fault, requestId, () => log('lost-response'));
    log('ok');
    sendXml(
      response,
      200,
      requestId,
      renderDocument(`${action}Response`, { requestId, ...body }, EC2_XML_NAMESPACE),
    );
  };

  const server = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      unexpectedErrors.push(error);
      if (!response.headersSent) sendError(response, randomUUID(), ec2Errors.internalError());
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://127.0.0.1:${port}`,
    state,
    calls,
    faults,
    throttling,
    unexpectedErrors,
    setClock: (clock) => state.setClock(clock),
    setThrottling: (option) => throttling.configure(option),
    setEventualConsistencyMs: (milliseconds) => state.setEventualConsistencyMs(milliseconds),
    setBeforeApply: (hook) => {
      beforeApply = hook;
    },
    setIdentity: (accessKeyId, identity) => {
      authorizers.set(accessKeyId, new Ec2Authorizer(identity, state.accountId));
    },
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

/** `Credential=<access key id>/<date>/<region>/ec2/aws4_request` of the SigV4 header. */
function accessKeyIdOf(request: IncomingMessage): string {
  return /Credential=([^/,\s]+)\//.exec(request.headers.authorization ?? '')?.[1] ?? '';
}

/** The Query protocol sends a form-encoded POST body; a GET carries the same pairs in the URL. */
async function readParams(request: IncomingMessage): Promise<QueryParams> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks).toString('utf8');
  if (request.method === 'GET')
    return QueryParams.fromFormBody(new URL(request.url ?? '/', 'http://x').search);
  return QueryParams.fromFormBody(body);
}

function outcomeOfError(error: Ec2ApiError): CallOutcome {
  if (error.code === 'RequestLimitExceeded') return 'throttled';
  return error.httpStatus >= 500 ? 'server-error' : 'client-error';
}

/**
 * The call was applied (or answered an EC2 error, kept in the log); the client sees a reset
 * connection, or a 500, instead of the answer.
 */
function loseResponse(
  response: ServerResponse,
  fault: FaultSpec,
  requestId: string,
  logLoss: () => void,
): void {
  logLoss();
  if (fault.lostResponseAs === 'internal-error') {
    sendError(response, requestId, ec2Errors.internalError());
    return;
  }
  response.socket?.destroy();
}

function sendError(response: ServerResponse, requestId: string, error: Ec2ApiError): void {
  const errors = renderElement('Errors', { Error: { Code: error.code, Message: error.message } });
  const body = `<?xml version="1.0" encoding="UTF-8"?>\n<Response>${errors}${renderElement('RequestID', requestId)}</Response>`;
  sendXml(response, error.httpStatus, requestId, body);
}

function sendXml(response: ServerResponse, status: number, requestId: string, body: string): void {
  response.writeHead(status, {
    'content-type': 'text/xml;charset=UTF-8',
    'content-length': Buffer.byteLength(body),
    'x-amzn-requestid': requestId,
  });
  response.end(body);
}
