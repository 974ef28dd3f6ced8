import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * How a running local cloud (`npm start`) says where it is, for `npm run resync -- --local` and
 * `npm run inspect -- --local`: one file per local cloud, named by its process id, in one folder
 * of the temp directory, so two local clouds on one machine never overwrite or delete each
 * other's. A `--local` command takes the file `ENI_IPAM_LOCAL_CLOUD` names (npm start prints the
 * line), or else the only local cloud running; files of processes that ended are skipped.
 */

const LOCAL_CLOUDS_DIRECTORY = join(tmpdir(), 'serverless-eni-ipam-local-clouds');

/** The variable naming the state file of the local cloud a `--local` command means. */
export const LOCAL_CLOUD_VARIABLE = 'ENI_IPAM_LOCAL_CLOUD';

export interface LocalCloudState {
  readonly pid: number;
  /** The Lambda Invoke API of the local cloud. */
  readonly lambdaEndpoint: string;
  readonly syncFunctionName: string;
  readonly tableName: string;
  readonly dynamoDbEndpoint: string;
  /** A person's kubeconfig (the admin's context current, one per function's group). */
  readonly kubeconfigPath: string;
  readonly region: string;
  /** The local operator's keys: the identity `npm start` prints for the aws CLI. */
  readonly operatorCredentials: { readonly accessKeyId: string; readonly secretAccessKey: string };
  /**
   * The running cloud's control endpoint on loopback (`npm start -- --launch N` asks it to launch
   * instances) and the bearer token it takes, readable only by the file's owner.
   */
  readonly control?: { readonly endpoint: string; readonly token: string };
}

/** Writes the state of the local cloud of this process; returns its path. */
export function writeLocalCloudState(state: LocalCloudState, directory = LOCAL_CLOUDS_DIRECTORY): string {
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  const path = join(directory, `${state.pid}.json`);
  writeFileSync(path, JSON.stringify(state), { mode: 0o600 });
  return path;
}

export function removeLocalCloudState(path: string): void {
  rmSync(path, { force: true });
}

/** No local cloud (or no single one) answers: the message says how to start or name one. */
export class LocalCloudNotFoundError extends Error {}

/** The state of the local cloud a `--local` command means, or an error saying how to name it. */
export function findLocalCloudState(
  environment: NodeJS.ProcessEnv = process.env,
  directory = LOCAL_CLOUDS_DIRECTORY,
  isRunning: (pid: number) => boolean = processIsRunning,
): LocalCloudState {
  const named = environment[LOCAL_CLOUD_VARIABLE];
  if (named !== undefined && named !== '') {
    const state = readState(named);
    if (state === undefined || !isRunning(state.pid)) {
      throw new LocalCloudNotFoundError(
        `${LOCAL_CLOUD_VARIABLE}=${named} names no running local cloud: start one with npm start`,
      );
    }
    return state;
  }
  const running = statesIn(directory).filter((state) => isRunning(state.pid));
  if (running.length === 1) return running[0] as LocalCloudState;
  if (running.length === 0)
    throw new LocalCloudNotFoundError('no local cloud is running: start one with npm start');
  throw new LocalCloudNotFoundError(
    `${running.length} local clouds are running (pids ${running.map((state) => state.pid).join(', ')}): ` +
      `say which with ${LOCAL_CLOUD_VARIABLE}=<its state file> (npm start prints the line), e.g. ` +
      `${LOCAL_CLOUD_VARIABLE}=${join(directory, `${running[0]?.pid}.json`)}`,
  );
}

function statesIn(directory: string): LocalCloudState[] {
  let names: string[];
  try {
    names = readdirSync(directory).filter((name) => /^\d+\.json$/.test(name));
  } catch {
    return [];
  }
  return names.flatMap((name) => readState(join(directory, name)) ?? []);
}

function readState(path: string): LocalCloudState | undefined {
  try {
    const state = JSON.parse(readFileSync(path, 'utf8')) as LocalCloudState;
    return Number.isInteger(state.pid) && state.operatorCredentials !== undefined ? state : undefined;
  } catch {
    return undefined;
  }
}

/** Whether a process with this id exists (signal 0 checks without signalling). */
function processIsRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
