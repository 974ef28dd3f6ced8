import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { InstanceRecord } from '../../emulators/ec2/index.ts';
import { LOCAL_REGION } from '../../local-cloud/local-account.ts';
import { type LocalCloud, startLocalCloud } from '../../local-cloud/local-cloud.ts';
import { LOCAL_OPERATOR_CREDENTIALS } from '../../local-cloud/local-operator.ts';
import { kubectlBinary } from '../../peers/kubernetes/control-plane.ts';

/**
 * A person with kubectl (built from k8s.io/kubectl by `npm run peers:build`) and the aws CLI (the
 * machine's; .ci/run installs it when missing) against the local cloud, with nothing but what
 * `npm start` prints. kubectl with its KUBECONFIG: the admin's context sees the CiliumNodes and
 * applies rbac.yaml as a user would; a context per function answers `auth can-i` as that
 * function's group is answered in EKS. The aws CLI as the local operator, with the AWS_* lines:
 * the runbooks' describe, get-item and invoke work, an Event invoke answers 202. A request the
 * person is refused is reported apart and never counted as the functions' denial.
 */

const RBAC_YAML = fileURLToPath(new URL('../../../infra/kubernetes/rbac.yaml', import.meta.url));
const run = promisify(execFile);

let cloud: LocalCloud;
let instance: InstanceRecord;
let home: string;
beforeAll(async () => {
  home = mkdtempSync(join(tmpdir(), 'person-'));
  cloud = await startLocalCloud({ dynamoDbEndpoint: inject('dynamoDbEndpoint'), runSchedules: false });
  instance = cloud.launchInstance('m5.large');
  await cloud.waitUntil(async () => (await cloud.summary()).readyNodes === 1, { timeoutMs: 60_000 });
}, 240_000);
afterAll(async () => {
  await cloud?.stop();
  rmSync(home, { recursive: true, force: true });
});

/** kubectl as the person runs it: exit code, output and error. */
async function kubectl(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(kubectlBinary(), args, {
      env: { PATH: process.env.PATH, HOME: process.env.HOME, KUBECONFIG: cloud.kubeconfigPath },
      timeout: 30_000,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    return failedRun(error);
  }
}

function failedRun(error: unknown): { code: number; stdout: string; stderr: string } {
  const failed = error as { code?: number; stdout?: string; stderr?: string };
  return { code: failed.code ?? -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
}

/**
 * The aws CLI as the person runs it after pasting `npm start`'s lines: the local operator's keys
 * and the AWS_ENDPOINT_URL_* variables (`endpoints: 'flag'`: none of those, --endpoint-url given
 * instead, as an older CLI needs). Nothing of this process's AWS settings leaks in.
 */
async function aws(
  args: readonly string[],
  endpoints: 'environment' | 'flag' = 'environment',
): Promise<{ code: number; stdout: string; stderr: string }> {
  const environment: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    AWS_ACCESS_KEY_ID: LOCAL_OPERATOR_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: LOCAL_OPERATOR_CREDENTIALS.secretAccessKey,
    AWS_DEFAULT_REGION: LOCAL_REGION,
    AWS_CONFIG_FILE: join(home, 'config'),
    AWS_SHARED_CREDENTIALS_FILE: join(home, 'credentials'),
    ...(process.env.PYENV_ROOT === undefined ? {} : { PYENV_ROOT: process.env.PYENV_ROOT }),
    ...(endpoints === 'environment'
      ? {
          AWS_ENDPOINT_URL_EC2: cloud.ec2.url,
          AWS_ENDPOINT_URL_DYNAMODB: cloud.table.endpoint,
          AWS_ENDPOINT_URL_LAMBDA: cloud.lambdaEndpoint,
        }
      : {}),
  };
  try {
    const { stdout, stderr } = await run('aws', [...args], { env: environment, cwd: home, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    return failedRun(error);
  }
}

describe('kubectl against the local cloud', () => {
  it("sees the nodes' CiliumNodes and the record version the sync stamped, as the runbook reads them", async () => {
    expect((await kubectl('version', '-o', 'json')).stdout).toMatch(/"gitVersion": "v1\.36\.\d+"/);
    const names = await kubectl('get', 'ciliumnodes', '-o', 'name');
    expect(names).toMatchObject({ code: 0 });
    expect(names.stdout).toContain(`ciliumnode.cilium.io/${instance.privateDnsName}`);
    const annotations = await kubectl(
      'get',
      'ciliumnode',
      instance.privateDnsName,
      '-o',
      'jsonpath={.metadata.annotations.serverless-eni-ipam\\.io/record-version}',
    );
    expect(annotations.stdout).toMatch(/^\d+$/);
  });

  it('applies infra/kubernetes/rbac.yaml as a user would, dry run first', async () => {
    const dryRun = await kubectl('apply', '--dry-run=server', '-f', RBAC_YAML);
    expect(dryRun, dryRun.stderr).toMatchObject({ code: 0 });
    expect(dryRun.stdout).toContain('(server dry run)');
    const applied = await kubectl('apply', '-f', RBAC_YAML);
    expect(applied, applied.stderr).toMatchObject({ code: 0 });
  });

  it("answers auth can-i per function context as that function's group is answered", async () => {
    const canI = async (context: string, verb: string, resource: string) =>
      (await kubectl('--context', context, 'auth', 'can-i', verb, resource)).stdout.trim();
    expect(await canI('sync', 'patch', 'ciliumnodes/status')).toBe('yes');
    expect(await canI('sync', 'patch', 'ciliumnodes')).toBe('yes');
    expect(await canI('allocate', 'get', 'ciliumnodes')).toBe('yes');
    expect(await canI('allocate', 'patch', 'ciliumnodes')).toBe('yes');
    expect(await canI('allocate', 'delete', 'ciliumnodes')).toBe('no');
    expect(await canI('allocate', 'watch', 'ciliumnodes')).toBe('no');
    expect(await canI('watch', 'watch', 'ciliumnodes')).toBe('yes');
    expect(await canI('watch', 'patch', 'ciliumnodes')).toBe('no');
    expect(await canI('admin', 'delete', 'ciliumnodes')).toBe('yes');
    expect(await canI('sync', 'delete', 'ciliumnodes')).toBe('no');
  });

  it("reports a person's refused request apart: the functions' denials stay 0", async () => {
    const refused = await kubectl('--context', 'allocate', 'delete', 'ciliumnode', instance.privateDnsName);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('Forbidden');
    await cloud.waitUntil(async () => (await cloud.denials()).person >= 1, { timeoutMs: 20_000 });
    expect(await cloud.denials()).toMatchObject({ total: 0 });
    expect((await kubectl('get', 'ciliumnode', instance.privateDnsName, '-o', 'name')).code).toBe(0);
  });
});

describe('the aws CLI against the local cloud, as the local operator', () => {
  const syncFunctionName = () =>
    cloud.functionNames[Object.keys(cloud.functionNames).find((id) => id.startsWith('Sync')) ?? ''] ?? '';

  it("lists the node's ENIs with describe-network-interfaces, by AWS_ENDPOINT_URL_EC2 and by --endpoint-url", async () => {
    const args = [
      'ec2',
      'describe-network-interfaces',
      '--filters',
      `Name=attachment.instance-id,Values=${instance.instanceId}`,
      '--query',
      'NetworkInterfaces[].NetworkInterfaceId',
      '--output',
      'json',
    ];
    const byVariable = await aws(args);
    expect(byVariable, byVariable.stderr).toMatchObject({ code: 0 });
    const enis = JSON.parse(byVariable.stdout) as string[];
    const recorded = (await cloud.records()).get(instance.instanceId);
    expect(enis.length).toBeGreaterThan(0);
    expect(enis).toEqual(expect.arrayContaining((recorded?.enis ?? []).map((eni) => eni.id)));
    const byFlag = await aws([...args, '--endpoint-url', cloud.ec2.url], 'flag');
    expect(byFlag, byFlag.stderr).toMatchObject({ code: 0 });
    expect(JSON.parse(byFlag.stdout)).toEqual(enis);
  });

  it("reads the node's record with the get-item runbook, consistently", async () => {
    const item = await aws([
      'dynamodb',
      'get-item',
      '--table-name',
      cloud.table.name,
      '--key',
      JSON.stringify({ instanceId: { S: instance.instanceId } }),
      '--consistent-read',
    ]);
    expect(item, item.stderr).toMatchObject({ code: 0 });
    const { Item } = JSON.parse(item.stdout) as { Item: Record<string, { S?: string; N?: string }> };
    expect(Item.instanceId).toEqual({ S: instance.instanceId });
    expect(Number(Item.version?.N)).toBe((await cloud.records()).get(instance.instanceId)?.version);
  });

  it('invokes the sync function: RequestResponse answers 200 with its result, Event 202 and runs later', async () => {
    writeFileSync(join(home, 'payload.json'), JSON.stringify({ instanceId: instance.instanceId }));
    const invoked = await aws([
      'lambda',
      'invoke',
      '--function-name',
      syncFunctionName(),
      '--payload',
      'fileb://payload.json',
      'out.json',
    ]);
    expect(invoked, invoked.stderr).toMatchObject({ code: 0 });
    expect(JSON.parse(invoked.stdout)).toMatchObject({ StatusCode: 200 });
    expect(JSON.parse(invoked.stdout).FunctionError).toBeUndefined();
    expect(readFileSync(join(home, 'out.json'), 'utf8')).toContain(instance.instanceId);

    const syncsBefore = syncInvocations();
    const queued = await aws([
      'lambda',
      'invoke',
      '--function-name',
      syncFunctionName(),
      '--invocation-type',
      'Event',
      '--payload',
      'fileb://payload.json',
      'event-out.json',
    ]);
    expect(queued, queued.stderr).toMatchObject({ code: 0 });
    expect(JSON.parse(queued.stdout)).toMatchObject({ StatusCode: 202 });
    await cloud.waitUntil(() => syncInvocations() > syncsBefore, { timeoutMs: 20_000 });
  });

  it("is refused what its policy does not grant, counted as the person's, not the functions'", async () => {
    const before = (await cloud.denials()).person;
    const refused = await aws([
      'ec2',
      'create-network-interface',
      '--subnet-id',
      cloud.cluster.subnets.nodesA.subnetId,
    ]);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('UnauthorizedOperation');
    const denials = await cloud.denials();
    expect(denials.person).toBe(before + 1);
    expect(denials.total).toBe(0);
  });
});

function syncInvocations(): number {
  const [, stats] =
    Object.entries(cloud.functionStats()).find(([logicalId]) => logicalId.startsWith('Sync')) ?? [];
  return stats?.invocations ?? 0;
}
