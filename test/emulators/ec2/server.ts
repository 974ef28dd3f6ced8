import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ACTION_HANDLERS } from './actions.ts';
import { EC2_ADMINISTRATOR, Ec2Authorizer, type IamIdentity } from './authorization.ts';
import { authorizationRequests } from './authorization-requests.ts';
import { CallLog, type CallOutcome } from './calls.ts';
import { Ec2ApiError, ec2Errors } from './errors.ts';
import { type BeforeApplyHook, Ec2FaultRegistry } from './faults.ts';
import { QueryParams } from './query.ts';
import { Ec2State, type Ec2StateOptions } from './state.ts';
import type { ThrottleBuckets, ThrottlingOption } from './throttling.ts';
import { renderDocument, renderElement, type XmlObject } from './xml.ts';

/**
 * The EC2 emulator's HTTP front: the EC2 Query protocol on 127.0.0.1, so the real
 * @aws-sdk/client-ec2 talks to it through `endpoint` or AWS_ENDPOINT_URL_EC2.
 *
 * A call goes through, in order: action lookup (InvalidAction), SigV4 header presence and a known
 * access key (AuthFailure), the fault registry's admission (the `rate-limit` bucket, then per-call
 * faults; see faults.ts), IAM authorization against the caller's identity policies
 * (UnauthorizedOperation, 403; see authorization.ts), DryRun, the `before-apply` hook, then the
 * state change. Only the last step changes state, so a throttled, faulted or rejected call leaves
 * it untouched (except `lost-response`, which applies the change and then loses the answer).
 */

export interface Ec2EmulatorOptions extends Ec2StateOptions {
  /** The `rate-limit` fault from the start: `true` = AWS's published token buckets; an object overrides single buckets. Default false. */
  throttling?: ThrottlingOption;
  /** The `before-apply` fault from the start: runs before a call is applied; may await, or throw an Ec2ApiError to answer it. */
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
  /** Every fault the emulator can raise, armed with `faults.arm` (the catalogue is `EC2_FAULTS`). */
  readonly faults: Ec2FaultRegistry;
  /** The `rate-limit` fault's token buckets (`faults.rateLimits`). */
  readonly throttling: ThrottleBuckets;
  /** Errors thrown by the emulator itself (bugs), answered as 500 InternalError; tests can assert it stays empty. */
  readonly unexpectedErrors: readonly unknown[];
  setClock(clock: () => number): void;
  /** Arms the `rate-limit` fault (`false` disarms it). */
  setThrottling(option: ThrottlingOption): void;
  /** Arms the `eventual-consistency` fault (0 disarms it). */
  setEventualConsistencyMs(milliseconds: number): void;
  /** Arms the `before-apply` fault (`undefined` disarms it). */
  setBeforeApply(hook: BeforeApplyHook | undefined): void;
  /** Adds or replaces the identity of an access key (e.g. a policy with a statement removed). */
  setIdentity(accessKeyId: string, identity: IamIdentity): void;
  close(): Promise<void>;
}

const EC2_XML_NAMESPACE = 'http://ec2.amazonaws.com/doc/2016-11-15/';

export async function startEc2Emulator(options: Ec2EmulatorOptions = {}): Promise<Ec2Emulator> {
  const state = new Ec2State(options);
  const faults = new Ec2FaultRegistry(state, {
    ...(options.throttling === undefined ? {} : { throttling: options.throttling }),
    ...(options.beforeApply === undefined ? {} : { beforeApply: options.beforeApply }),
  });
  const authorizers = new Map(
    Object.entries(options.identities ?? {}).map(([key, identity]) => [
      key,
      new Ec2Authorizer(identity, state.accountId),
    ]),
  );
  const administrator =
    options.identities === undefined ? new Ec2Authorizer(EC2_ADMINISTRATOR, state.accountId) : undefined;
  const front: Ec2Front = {
    state,
    calls: new CallLog(),
    faults,
    unexpectedErrors: [],
    requireSignature: options.requireSignature ?? true,
    authorizerFor: (accessKeyId) => authorizers.get(accessKeyId) ?? administrator,
  };

  const server = createServer((request, response) => {
    answerCall(front, request, response).catch((error: unknown) => {
      front.unexpectedErrors.push(error);
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
    calls: front.calls,
    faults,
    throttling: faults.rateLimits,
    unexpectedErrors: front.unexpectedErrors,
    setClock: (clock) => state.setClock(clock),
    setThrottling: (throttling) => faults.arm({ kind: 'rate-limit', throttling }),
    setEventualConsistencyMs: (delayMs) => faults.arm({ kind: 'eventual-consistency', delayMs }),
    setBeforeApply: (hook) => faults.arm({ kind: 'before-apply', hook }),
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

/** What answering a call needs: the state, the log, the faults and who may call. */
interface Ec2Front {
  readonly state: Ec2State;
  readonly calls: CallLog;
  readonly faults: Ec2FaultRegistry;
  readonly unexpectedErrors: unknown[];
  readonly requireSignature: boolean;
  /** The authorizer of an access key id; undefined: AuthFailure. */
  authorizerFor(accessKeyId: string): Ec2Authorizer | undefined;
}

/** What the log records of a call besides its outcome, filled in as the call goes through. */
interface CallFacts {
  resources?: string[];
  deniedByIam?: true;
}

/** One call through the steps listed at the top of this file; answers it, logs it. */
async function answerCall(
  front: Ec2Front,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  const requestId = randomUUID();
  const atMs = front.state.now();
  const params = await readParams(request);
  const action = params.get('Action') ?? '';
  const paramRecord = params.toRecord();
  const facts: CallFacts = {};
  const accessKeyId = accessKeyIdOf(request);
  const log = (outcome: CallOutcome, errorCode?: string): void =>
    front.calls.record({
      action,
      atMs,
      outcome,
      ...(errorCode === undefined ? {} : { errorCode }),
      ...(accessKeyId === '' ? {} : { accessKeyId }),
      ...facts,
    });
  const answerError = (error: Ec2ApiError): void => {
    log(outcomeOfError(error), error.code);
    sendError(response, requestId, error);
  };

  const handler = ACTION_HANDLERS[action];
  if (!handler) return answerError(ec2Errors.invalidAction(action));
  if (front.requireSignature && !request.headers.authorization?.startsWith('AWS4-HMAC-SHA256')) {
    return answerError(ec2Errors.authFailure());
  }
  const authorizer = front.authorizerFor(accessKeyId);
  if (authorizer === undefined) return answerError(ec2Errors.authFailure());
  const admission = front.faults.admit(action, paramRecord);
  if (!admission.admitted) return answerError(admission.refusal);
  const loseAnswer = (errorCode?: string): void => {
    log('lost-response', errorCode);
    if (admission.loseAnswerAs === 'internal-error')
      sendError(response, requestId, ec2Errors.internalError());
    else response.socket?.destroy();
  };

  let body: XmlObject;
  try {
    await authorize(front, authorizer, action, params, facts);
    if (params.boolean('DryRun')) {
      throw new Ec2ApiError('DryRunOperation', 'Request would have succeeded, but DryRun flag is set.', 412);
    }
    await front.faults.beforeApply(action, paramRecord);
    body = handler(front.state, params);
  } catch (error) {
    if (!(error instanceof Ec2ApiError)) {
      front.unexpectedErrors.push(error);
      return answerError(ec2Errors.internalError());
    }
    // A lost answer hides the EC2 error the call raised as it hides a success (kept in the log).
    return admission.loseAnswerAs === undefined ? answerError(error) : loseAnswer(error.code);
  }
  if (admission.loseAnswerAs !== undefined) return loseAnswer();
  log('ok');
  const document = renderDocument(`${action}Response`, { requestId, ...body }, EC2_XML_NAMESPACE);
  sendXml(response, 200, requestId, document);
}

/** IAM authorization of the call against the caller's policies; throws UnauthorizedOperation on a denial. */
async function authorize(
  front: Ec2Front,
  authorizer: Ec2Authorizer,
  action: string,
  params: QueryParams,
  facts: CallFacts,
): Promise<void> {
  const requests = await authorizationRequests(front.state, action, params);
  facts.resources = [...new Set(requests.map((request) => request.resourceArn))];
  const denial = await authorizer.firstDenial(requests);
  if (denial === undefined) return;
  facts.deniedByIam = true;
  throw ec2Errors.unauthorizedOperation(denial.message);
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
