import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { CiliumNode } from '../../../functions/core/ciliumnode.ts';
import { LOCAL_CLOUD_VARIABLE, writeLocalCloudState } from '../../../infra/local-cloud-state.ts';
import {
  type ControlEndpoint,
  ControlError,
  nextInstanceLauncher,
  requestLaunch,
  startControlEndpoint,
} from '../../local-cloud/control.ts';
import { DemandTracker } from '../../local-cloud/demand.ts';
import { renderLiveTable } from '../../local-cloud/live-table.ts';
import { LOCAL_REGION } from '../../local-cloud/local-account.ts';
import { type LocalCloud, startLocalCloud } from '../../local-cloud/local-cloud.ts';
import { LOCAL_OPERATOR_CREDENTIALS } from '../../local-cloud/local-operator.ts';
import { type PodChurn, startPodChurn } from '../../local-cloud/pod-churn.ts';

/**
 * The live cloud as `npm start` runs it: the schedules on (the watcher's among them, every 6 s at
 * time scale 10), pods coming and going on the nodes, every stored CiliumNode version timestamped
 * by the demand tracker, and the control endpoint through which a second `npm start -- --launch N`
 * (a real process, finding the cloud by ENI_IPAM_LOCAL_CLOUD) adds nodes to it.
 */

const MAIN = fileURLToPath(new URL('../../local-cloud/main.ts', import.meta.url));
const REPOSITORY = fileURLToPath(new URL('../../../', import.meta.url));
const run = promisify(execFile);

let cloud: LocalCloud;
let control: ControlEndpoint;
let statePath: string;
let stateDirectory: string;
const demand = new DemandTracker();
let stopTracking: () => void = () => {};
let churn: PodChurn | undefined;

beforeAll(async () => {
  stateDirectory = mkdtempSync(join(tmpdir(), 'live-cloud-'));
  cloud = await startLocalCloud({
    dynamoDbEndpoint: inject('dynamoDbEndpoint'),
    timeScale: 10,
    watchSchedule: true,
  });
  stopTracking = cloud.k8s.onVersion((version) => demand.observe(version, Date.now()));
  control = await startControlEndpoint(nextInstanceLauncher(cloud));
  statePath = writeLocalCloudState(
    {
      pid: process.pid,
      lambdaEndpoint: cloud.lambdaEndpoint,
      syncFunctionName: '',
      tableName: cloud.table.name,
      dynamoDbEndpoint: cloud.table.endpoint,
      kubeconfigPath: cloud.kubeconfigPath,
      region: LOCAL_REGION,
      operatorCredentials: LOCAL_OPERATOR_CREDENTIALS,
      control: { endpoint: control.endpoint, token: control.token },
    },
    stateDirectory,
  );
}, 240_000);

afterAll(async () => {
  churn?.stop();
  stopTracking();
  await control?.close();
  await cloud?.stop();
  rmSync(stateDirectory, { recursive: true, force: true });
});

/** `npm start -- <args>` as a person runs it in another shell, with ENI_IPAM_LOCAL_CLOUD pasted. */
async function npmStart(
  args: readonly string[],
  localCloud = statePath,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', MAIN, ...args], {
      cwd: REPOSITORY,
      env: { PATH: process.env.PATH, HOME: process.env.HOME, [LOCAL_CLOUD_VARIABLE]: localCloud },
      timeout: 60_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

describe('npm start -- --launch N against the running cloud', () => {
  it('launches N instances in it, which its table shows and its functions serve', async () => {
    const before = cloud.launched.length;
    const launched = await npmStart(['--launch', '2']);
    expect(launched, launched.stderr).toMatchObject({ code: 0 });
    expect(cloud.launched.slice(before)).toHaveLength(2);
    for (const instanceId of cloud.launched.slice(before)) {
      const instance = cloud.ec2.state.instance(instanceId);
      expect(launched.stdout).toContain(
        `launched ${instanceId} (${instance?.instanceType}), node ${instance?.privateDnsName}`,
      );
    }
    await cloud.waitUntil(async () => (await cloud.summary()).readyNodes === cloud.launched.length, {
      timeoutMs: 90_000,
      description: 'the launched nodes ready',
    });
    const table = await renderLiveTable(cloud, { recentErrors: [] });
    for (const instanceId of cloud.launched) expect(table).toContain(instanceId);
  });

  it('refuses a bad count, a wrong token and a cloud that is not running, launching nothing', async () => {
    const before = cloud.launched.length;
    const zero = await npmStart(['--launch', '0']);
    expect(zero.code).toBe(1);
    expect(zero.stderr).toContain('--launch must be a whole number from 1 to 200, got 0');
    const mixed = await npmStart(['--launch', '1', '--nodes', '4']);
    expect(mixed.stderr).toContain('--launch adds instances to the local cloud already running');
    const gone = await npmStart(['--launch', '1'], join(stateDirectory, 'not-running.json'));
    expect(gone.code).toBe(1);
    expect(gone.stderr).toContain(`${LOCAL_CLOUD_VARIABLE}=`);
    expect(gone.stderr).toContain('names no running local cloud');
    const state = {
      pid: process.pid,
      lambdaEndpoint: '',
      syncFunctionName: '',
      tableName: '',
      dynamoDbEndpoint: '',
      kubeconfigPath: '',
      region: LOCAL_REGION,
      operatorCredentials: LOCAL_OPERATOR_CREDENTIALS,
      control: { endpoint: control.endpoint, token: 'not-the-token' },
    };
    await expect(requestLaunch(state, 1)).rejects.toThrow(ControlError);
    await expect(
      requestLaunch({ ...state, control: { ...state.control, token: control.token } }, 201),
    ).rejects.toThrow('count must be a whole number from 1 to 200, got 201');
    expect(cloud.launched.length).toBe(before);
  });
});

describe('the live table', () => {
  it("shows the last pod start's demand-to-pool time, taken from the versions the server stored", async () => {
    await cloud.waitUntil(async () => (await cloud.summary()).readyNodes === cloud.launched.length, {
      timeoutMs: 90_000,
      description: 'every node ready',
    });
    churn = startPodChurn(
      {
        k8s: cloud.k8s,
        summary: () => cloud.summary(),
        runsMultiPoolAgent: (nodeName) => cloud.multiPoolAgent(nodeName) !== undefined,
      },
      1_000,
    );
    await cloud.waitUntil(() => demand.servedCount() >= 1, {
      timeoutMs: 90_000,
      description: 'a pod start served',
    });
    const served = demand.lastServed();
    expect(served).toBeDefined();
    if (served === undefined) return;
    const nodeNames = cloud.launched.map(
      (instanceId) => cloud.ec2.state.instance(instanceId)?.privateDnsName,
    );
    expect(nodeNames).toContain(served.nodeName);
    expect(served.servedAtMs).toBeGreaterThanOrEqual(served.demandAtMs);
    // Each end of the interval is a version the server stored: the pods' status, then the grown pool.
    const history = await cloud.k8s.history();
    const versionAt = (resourceVersion: string) =>
      history.find((entry) => entry.name === served.nodeName && entry.resourceVersion === resourceVersion)
        ?.object as unknown as CiliumNode | undefined;
    const demanded = versionAt(served.demandResourceVersion);
    const grown = versionAt(served.servedResourceVersion);
    expect(Object.keys(demanded?.status?.ipam?.used ?? {})).toHaveLength(served.usedIps);
    expect(Object.keys(demanded?.spec?.ipam?.pool ?? {})).toHaveLength(served.poolBefore);
    expect(Object.keys(grown?.spec?.ipam?.pool ?? {})).toHaveLength(served.poolAfter);
    expect(served.poolAfter - served.usedIps).toBeGreaterThanOrEqual(8);
    expect(served.poolBefore - served.usedIps).toBeLessThan(8);
    expect(Number(served.servedResourceVersion)).toBeGreaterThan(Number(served.demandResourceVersion));

    const table = await renderLiveTable(cloud, { recentErrors: [], demand });
    const seconds = ((served.servedAtMs - served.demandAtMs) / 1000).toFixed(2);
    expect(table).toContain(`demand: last pod start ${served.usedIps} IPs in use on ${served.nodeName}`);
    expect(table).toContain(`pool ${served.poolBefore} -> ${served.poolAfter} in ${seconds} s`);
  });

  it("counts the watcher's invocations, started by its schedule", async () => {
    await cloud.waitUntil(() => watchStats().invocations > 0, {
      timeoutMs: 60_000,
      description: 'the watch schedule fired',
    });
    const table = await renderLiveTable(cloud, { recentErrors: [], demand });
    const shown = /Watch (\d+) \(/.exec(table);
    expect(Number(shown?.[1])).toBeGreaterThan(0);
    expect(Number(shown?.[1])).toBeLessThanOrEqual(watchStats().invocations);
    expect(await cloud.denials()).toMatchObject({ total: 0 });
  });
});

function watchStats() {
  const [, stats] =
    Object.entries(cloud.functionStats()).find(([logicalId]) => logicalId.startsWith('Watch')) ?? [];
  return stats ?? { invocations: 0 };
}
