import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  findLocalCloudState,
  LOCAL_CLOUD_VARIABLE,
  type LocalCloudState,
  removeLocalCloudState,
  writeLocalCloudState,
} from '../../infra/local-cloud-state.ts';

/** Which local cloud a `--local` command means, with two or more on one machine. */

const stateOf = (pid: number): LocalCloudState => ({
  pid,
  lambdaEndpoint: `http://127.0.0.1:${4000 + pid}`,
  syncFunctionName: 'ServerlessEniIpam-local-Sync',
  tableName: `nodes-${pid}`,
  dynamoDbEndpoint: 'http://127.0.0.1:8000',
  kubeconfigPath: `/tmp/kubeconfig-${pid}`,
  region: 'us-east-1',
  operatorCredentials: { accessKeyId: 'AKIALOCALOPERATOR000', secretAccessKey: 'local' },
});

const folder = () => mkdtempSync(join(tmpdir(), 'local-clouds-'));

describe('the local clouds of one machine', () => {
  it('two side by side keep a file each; with both running a --local command asks which, naming both', () => {
    const directory = folder();
    const first = writeLocalCloudState(stateOf(101), directory);
    const second = writeLocalCloudState(stateOf(202), directory);
    expect(first).not.toBe(second);
    const running = new Set([101, 202]);
    const find = (environment: NodeJS.ProcessEnv = {}) =>
      findLocalCloudState(environment, directory, (pid) => running.has(pid));

    expect(() => find()).toThrow(
      /2 local clouds are running \(pids 101, 202\): say which with ENI_IPAM_LOCAL_CLOUD=/,
    );
    expect(find({ [LOCAL_CLOUD_VARIABLE]: second })).toEqual(stateOf(202));
    expect(find({ [LOCAL_CLOUD_VARIABLE]: first })).toEqual(stateOf(101));

    // The second one stops and removes its own file: the first is still found, alone.
    removeLocalCloudState(second);
    running.delete(202);
    expect(find()).toEqual(stateOf(101));
    expect(() => find({ [LOCAL_CLOUD_VARIABLE]: second })).toThrow(
      `ENI_IPAM_LOCAL_CLOUD=${second} names no running local cloud: start one with npm start`,
    );
  });

  it("skips the file of a local cloud whose process ended without removing it, and files that are not a cloud's", () => {
    const directory = folder();
    writeLocalCloudState(stateOf(303), directory);
    const killed = writeLocalCloudState(stateOf(404), directory);
    writeFileSync(join(directory, '505.json'), 'not json');
    writeFileSync(join(directory, 'notes.txt'), '{"pid": 606}');
    const find = (environment: NodeJS.ProcessEnv = {}) =>
      findLocalCloudState(environment, directory, (pid) => pid !== 404);

    expect(find()).toEqual(stateOf(303));
    expect(() => find({ [LOCAL_CLOUD_VARIABLE]: killed })).toThrow('names no running local cloud');
  });

  it('says none is running when the folder is empty or missing; an empty variable means "not named"', () => {
    const missing = join(folder(), 'never-made');
    expect(() => findLocalCloudState({}, missing, () => true)).toThrow(
      'no local cloud is running: start one with npm start',
    );
    const directory = folder();
    writeLocalCloudState(stateOf(707), directory);
    expect(findLocalCloudState({ [LOCAL_CLOUD_VARIABLE]: '' }, directory, () => true)).toEqual(stateOf(707));
  });

  it('the real process check: this process runs; a pid no process has does not', () => {
    const directory = folder();
    writeLocalCloudState(stateOf(process.pid), directory);
    writeLocalCloudState(stateOf(2 ** 22 + 17), directory); // above Linux's pid_max limit
    expect(findLocalCloudState({}, directory).pid).toBe(process.pid);
  });
});
