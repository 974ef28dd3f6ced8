// One Lambda execution environment ("container") in a worker thread: plain JavaScript, so it runs
// the bundled asset with no TypeScript loader, under vitest and `node --import tsx` alike.
//
// Mirrors the Node.js runtime's contract: the module is imported once (init phase, module scope
// runs once per container); then invocations arrive one at a time; each gets a context with
// `awsRequestId`, `functionName`, `getRemainingTimeInMillis()`; the result is JSON-serialized (an
// `undefined` result becomes `null`), and a thrown error is reported as `{errorType, errorMessage,
// stackTrace}`. process.env is the function's environment only (set by the parent).
import { parentPort, workerData } from 'node:worker_threads';

const { entryUrl, handlerExport, clockOffsetMs } = workerData;

// A test-controlled clock (see LambdaFunctionSpec.clockOffsetMs): installed before the module is
// imported, so functions that capture `Date.now` at init see the shifted clock too.
if (clockOffsetMs !== undefined) {
  const realNow = Date.now;
  Date.now = () => realNow() + Number(Atomics.load(clockOffsetMs, 0));
}

function describeError(error) {
  const name = error instanceof Error ? error.name : 'Error';
  const message = error instanceof Error ? error.message : String(error);
  const stack =
    error instanceof Error && typeof error.stack === 'string' ? error.stack.split('\n').slice(1) : [];
  return { errorType: name, errorMessage: message, stackTrace: stack.map((line) => line.trim()) };
}

let handler;
try {
  const module = await import(entryUrl);
  handler = module[handlerExport];
  if (typeof handler !== 'function') {
    throw Object.assign(new Error(`${handlerExport} is undefined or not exported`), {
      name: 'Runtime.HandlerNotFound',
    });
  }
  parentPort.postMessage({ type: 'ready' });
} catch (error) {
  const described = describeError(error);
  parentPort.postMessage({
    type: 'init-error',
    error: {
      ...described,
      errorType: described.errorType.startsWith('Runtime.')
        ? described.errorType
        : 'Runtime.ImportModuleError',
    },
  });
}

parentPort.on('message', async (message) => {
  if (message.type !== 'invoke' || handler === undefined) return;
  const { requestId, event, context } = message;
  const lambdaContext = {
    ...context,
    awsRequestId: requestId,
    callbackWaitsForEmptyEventLoop: true,
    getRemainingTimeInMillis: () => Math.max(0, context.deadlineEpochMs - Date.now()),
  };
  try {
    const result = await handler(event, lambdaContext);
    const payload = result === undefined ? null : JSON.parse(JSON.stringify(result));
    parentPort.postMessage({ type: 'result', requestId, payload });
  } catch (error) {
    parentPort.postMessage({ type: 'error', requestId, error: describeError(error) });
  }
});
