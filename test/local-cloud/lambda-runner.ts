import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

/**
 * Runs one Lambda function's bundled asset the way the Lambda service does, in worker threads:
 *
 * - an execution environment ("container") imports the module once (module scope runs once per
 *   cold start) and handles ONE invocation at a time;
 * - a new container starts when every container is busy, up to the function's concurrency limit
 *   (`ReservedConcurrentExecutions`, else `maxContainers`); beyond it, invocations wait their turn
 *   (Lambda would throttle: async and stream invocations are retried until they run, which is what
 *   waiting models);
 * - each container's `process.env` is the function's environment only;
 * - an invocation running past the function's timeout is failed with `Sandbox.Timedout` and its
 *   container is destroyed, as Lambda does; so is a container whose module failed to load (the
 *   next invocation cold-starts again) or that crashed.
 *
 * The container's stdout/stderr (the functions' structured logs) go, line by line, to `onLog`.
 */

export interface LambdaErrorPayload {
  readonly errorType: string;
  readonly errorMessage: string;
  readonly stackTrace?: readonly string[];
}

export type InvocationResult = {
  readonly requestId: string;
  readonly functionName: string;
  readonly durationMs: number;
  readonly coldStart: boolean;
} & (
  | { readonly status: 'succeeded'; readonly payload: unknown }
  | { readonly status: 'failed'; readonly error: LambdaErrorPayload }
);

export interface LambdaFunctionSpec {
  readonly functionName: string;
  readonly functionArn: string;
  readonly entryFile: string;
  readonly handlerExport: string;
  readonly environment: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly memorySizeMb: number;
  /** Most containers at once. */
  readonly maxConcurrency: number;
  /**
   * Shared clock offset (one BigInt64 of milliseconds) added to `Date.now` inside every container,
   * so a test can move the functions' clock forward (leases expire, grace periods pass) without
   * waiting. Absent (the default): containers use the real clock untouched.
   */
  readonly clockOffsetMs?: BigInt64Array;
}

export type LogSink = (line: { functionName: string; stream: 'stdout' | 'stderr'; text: string }) => void;

export interface FunctionStats {
  readonly invocations: number;
  readonly failures: number;
  readonly coldStarts: number;
  readonly containers: number;
  readonly running: number;
  readonly waiting: number;
}

const WORKER_URL = new URL('./lambda-worker.mjs', import.meta.url);

interface PendingInvocation {
  readonly requestId: string;
  readonly event: unknown;
  readonly enqueuedAtMs: number;
  resolve(result: InvocationResult): void;
}

type WorkerMessage =
  | { type: 'ready' }
  | { type: 'init-error'; error: LambdaErrorPayload }
  | { type: 'result'; requestId: string; payload: unknown }
  | { type: 'error'; requestId: string; error: LambdaErrorPayload };

/** One execution environment: a worker thread that imported the asset. */
class Container {
  readonly worker: Worker;
  readonly ready: Promise<LambdaErrorPayload | undefined>;
  private current:
    | {
        requestId: string;
        settle(message: WorkerMessage | { type: 'crash'; error: LambdaErrorPayload }): void;
      }
    | undefined;
  private dead = false;
  invocations = 0;
  /** The event of the invocation running now, if any (what `crashContainers` selects on). */
  currentEvent: unknown;

  constructor(spec: LambdaFunctionSpec, onLog: LogSink, onDeath: (container: Container) => void) {
    this.worker = new Worker(WORKER_URL, {
      workerData: {
        entryUrl: pathToFileURL(spec.entryFile).href,
        handlerExport: spec.handlerExport,
        ...(spec.clockOffsetMs === undefined ? {} : { clockOffsetMs: spec.clockOffsetMs }),
      },
      env: { ...spec.environment },
      stdout: true,
      stderr: true,
      resourceLimits: { maxOldGenerationSizeMb: spec.memorySizeMb },
    });
    for (const stream of ['stdout', 'stderr'] as const) {
      createInterface({ input: this.worker[stream] }).on('line', (text) =>
        onLog({ functionName: spec.functionName, stream, text }),
      );
    }
    this.ready = new Promise((resolve) => {
      const onMessage = (message: WorkerMessage) => {
        if (message.type === 'ready') resolve(undefined);
        else if (message.type === 'init-error') resolve(message.error);
        else if (message.type === 'result' || message.type === 'error') this.current?.settle(message);
      };
      this.worker.on('message', onMessage);
      const crash = (error: LambdaErrorPayload) => {
        if (this.dead) return;
        this.dead = true;
        resolve(error);
        this.current?.settle({ type: 'crash', error });
        onDeath(this);
      };
      this.worker.on('error', (error) =>
        crash({ errorType: 'Runtime.ExitError', errorMessage: `the container crashed: ${error.message}` }),
      );
      this.worker.on('exit', (code) =>
        crash({ errorType: 'Runtime.ExitError', errorMessage: `the container exited with code ${code}` }),
      );
    });
  }

  get isDead(): boolean {
    return this.dead;
  }

  /** Runs one invocation; resolves with the worker's answer, a crash, or a timeout. */
  run(
    requestId: string,
    event: unknown,
    context: Record<string, unknown>,
    timeoutMs: number,
  ): Promise<{ ok: true; payload: unknown } | { ok: false; error: LambdaErrorPayload; fatal: boolean }> {
    this.invocations++;
    this.currentEvent = event;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.current = undefined;
        this.currentEvent = undefined;
        resolve({
          ok: false,
          fatal: true,
          error: {
            errorType: 'Sandbox.Timedout',
            errorMessage: `Task timed out after ${(timeoutMs / 1000).toFixed(2)} seconds`,
          },
        });
      }, timeoutMs);
      this.current = {
        requestId,
        settle: (message) => {
          if (message.type !== 'crash' && 'requestId' in message && message.requestId !== requestId) return;
          clearTimeout(timer);
          this.current = undefined;
          this.currentEvent = undefined;
          if (message.type === 'result') resolve({ ok: true, payload: message.payload });
          else if (message.type === 'error') resolve({ ok: false, fatal: false, error: message.error });
          else if (message.type === 'crash') resolve({ ok: false, fatal: true, error: message.error });
        },
      };
      this.worker.postMessage({ type: 'invoke', requestId, event, context });
    });
  }

  /**
   * Kills the container abruptly, as a crashed or OOM-killed execution environment dies: the
   * worker is terminated mid-invocation, so no `finally` block or pending I/O of the function runs.
   * The invocation fails with `Runtime.ExitError` (through the worker's `exit`); resolves once the
   * worker is gone.
   */
  async kill(): Promise<void> {
    if (this.dead) return;
    await this.worker.terminate();
  }

  /** Ends the container; an invocation still running in it fails with `Runtime.ExitError`. */
  async destroy(): Promise<void> {
    this.current?.settle({
      type: 'crash',
      error: { errorType: 'Runtime.ExitError', errorMessage: 'the container was shut down' },
    });
    this.dead = true;
    await this.worker.terminate();
  }
}

export class LambdaFunctionRunner {
  private readonly idle: Container[] = [];
  private readonly containers = new Set<Container>();
  private readonly waiting: PendingInvocation[] = [];
  private running = 0;
  private stopped = false;
  private counters = { invocations: 0, failures: 0, coldStarts: 0 };

  constructor(
    readonly spec: LambdaFunctionSpec,
    private readonly onLog: LogSink,
  ) {}

  /** Invokes the function synchronously (RequestResponse): resolves with its result or error, never rejects. */
  invoke(event: unknown): Promise<InvocationResult> {
    if (this.stopped) return Promise.reject(new Error(`${this.spec.functionName} is stopped`));
    return new Promise((resolve) => {
      this.waiting.push({ requestId: randomUUID(), event, enqueuedAtMs: Date.now(), resolve });
      this.dispatch();
    });
  }

  stats(): FunctionStats {
    return {
      ...this.counters,
      containers: this.containers.size,
      running: this.running,
      waiting: this.waiting.length,
    };
  }

  /**
   * Fault injection: kills (see `Container.kill`) every container whose running invocation's event
   * satisfies `predicate`; resolves with how many died, once they are dead.
   */
  async crashContainers(predicate: (event: unknown) => boolean): Promise<number> {
    const victims = [...this.containers].filter(
      (container) =>
        !container.isDead && container.currentEvent !== undefined && predicate(container.currentEvent),
    );
    await Promise.all(victims.map((container) => container.kill()));
    return victims.length;
  }

  /** Destroys every container; invocations still waiting fail. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const pending of this.waiting.splice(0)) {
      pending.resolve(
        this.failed(pending.requestId, 0, false, { errorType: 'Stopped', errorMessage: 'stopped' }),
      );
    }
    await Promise.all([...this.containers].map((container) => container.destroy()));
    this.containers.clear();
    this.idle.length = 0;
  }

  private dispatch(): void {
    while (this.waiting.length > 0 && !this.stopped) {
      const warm = this.idle.pop();
      if (warm === undefined && this.containers.size >= this.spec.maxConcurrency) return;
      const pending = this.waiting.shift();
      if (pending === undefined) return;
      void this.execute(pending, warm);
    }
  }

  private async execute(pending: PendingInvocation, warm: Container | undefined): Promise<void> {
    this.running++;
    this.counters.invocations++;
    const startedAtMs = Date.now();
    const coldStart = warm === undefined;
    const container = warm ?? this.startContainer();
    let result: InvocationResult;
    const initError = coldStart ? await container.ready : undefined;
    if (initError !== undefined) {
      result = this.failed(pending.requestId, Date.now() - startedAtMs, coldStart, initError);
      this.discard(container);
    } else {
      // The timeout covers the invocation, not the init phase (Lambda bounds init separately).
      const deadlineEpochMs = Date.now() + this.spec.timeoutMs;
      const outcome = await container.run(
        pending.requestId,
        pending.event,
        {
          functionName: this.spec.functionName,
          functionVersion: '$LATEST',
          invokedFunctionArn: this.spec.functionArn,
          memoryLimitInMB: String(this.spec.memorySizeMb),
          logGroupName: `/aws/lambda/${this.spec.functionName}`,
          logStreamName: `local/${container.worker.threadId}`,
          deadlineEpochMs,
        },
        this.spec.timeoutMs,
      );
      const durationMs = Date.now() - startedAtMs;
      if (outcome.ok) {
        result = {
          requestId: pending.requestId,
          functionName: this.spec.functionName,
          durationMs,
          coldStart,
          status: 'succeeded',
          payload: outcome.payload,
        };
      } else {
        result = this.failed(pending.requestId, durationMs, coldStart, outcome.error);
      }
      if (!outcome.ok && outcome.fatal) this.discard(container);
      else if (!this.stopped && !container.isDead) this.idle.push(container);
    }
    this.running--;
    pending.resolve(result);
    this.dispatch();
  }

  private startContainer(): Container {
    this.counters.coldStarts++;
    const container = new Container(this.spec, this.onLog, (dead) => {
      this.containers.delete(dead);
      const index = this.idle.indexOf(dead);
      if (index >= 0) this.idle.splice(index, 1);
      this.dispatch();
    });
    this.containers.add(container);
    return container;
  }

  private discard(container: Container): void {
    this.containers.delete(container);
    void container.destroy();
  }

  private failed(
    requestId: string,
    durationMs: number,
    coldStart: boolean,
    error: LambdaErrorPayload,
  ): InvocationResult {
    this.counters.failures++;
    return {
      requestId,
      functionName: this.spec.functionName,
      durationMs,
      coldStart,
      status: 'failed',
      error,
    };
  }
}
