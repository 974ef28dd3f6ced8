import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { EC2Client } from '@aws-sdk/client-ec2';
import { afterEach, describe, expect, it } from 'vitest';
import { ENI_TAG_KEYS, ownershipTags } from '../../functions/core/eni-ownership.ts';
import {
  decommission,
  decommissionPolicy,
  listOwnEnis,
  parseDecommissionArgs,
  summarize,
} from '../../infra/decommission.ts';
import { type ClusterSeed, type Ec2Emulator, startEc2Emulator } from '../emulators/ec2/index.ts';

/**
 * `npm run decommission`: two clusters' ENIs in one VPC, beside VPC CNI's, cilium-operator's and
 * a person's; one cluster is torn down from EC2 alone, under the least-privilege policy the
 * runbook documents, and nothing but its own detached ENIs is deleted.
 */

const OPERATOR_KEY = 'AKIADECOMMISSION0001';
const OPERATOR_SECRET = 'decommission-secret';
const TORN_DOWN = 'blue';
const KEPT = 'green';

let emulator: Ec2Emulator;
/** The emulator this test started, closed after it (a test of bad input may start none). */
let running: Ec2Emulator | undefined;
let ec2: EC2Client;
afterEach(async () => {
  ec2?.destroy();
  await running?.close();
  running = undefined;
});

/** The emulator, with the operator's key allowed exactly `decommissionPolicy(policyCluster)`. */
async function start(policyCluster = TORN_DOWN): Promise<ClusterSeed> {
  emulator = await startEc2Emulator({
    identities: {
      [OPERATOR_KEY]: {
        principalArn: 'arn:aws:iam::123456789012:user/operator',
        policies: [decommissionPolicy(policyCluster)],
      },
    },
  });
  running = emulator;
  ec2 = new EC2Client({
    region: 'us-east-1',
    endpoint: emulator.url,
    credentials: { accessKeyId: OPERATOR_KEY, secretAccessKey: OPERATOR_SECRET },
    maxAttempts: 1,
  });
  return emulator.state.seedCluster({ clusterName: TORN_DOWN });
}

function eni(seed: ClusterSeed, tags: Record<string, string>): string {
  return emulator.state.createNetworkInterface({ subnetId: seed.subnets.nodesA.subnetId, tags })
    .networkInterface.networkInterfaceId;
}

/** An instance with an ENI attached at device 1 (delete-on-termination as the allocator sets it). */
function attachedEni(seed: ClusterSeed, tags: Record<string, string>, deleteOnTermination = true) {
  const instance = emulator.state.launchInstance({
    instanceType: 'm5.large',
    subnetId: seed.subnets.nodesA.subnetId,
  });
  const networkInterfaceId = eni(seed, tags);
  const { attachmentId } = emulator.state.attachNetworkInterface({
    networkInterfaceId,
    instanceId: instance.instanceId,
    deviceIndex: 1,
  });
  emulator.state.modifyNetworkInterfaceAttribute({
    networkInterfaceId,
    attachment: { attachmentId, deleteOnTermination },
  });
  return { networkInterfaceId, instanceId: instance.instanceId };
}

const ours = (cluster: string) => ownershipTags(cluster, 'i-0123456789abcdef0');

/** The two clusters' ENIs and everyone else's, all in the one VPC. */
function populate(seed: ClusterSeed) {
  const blueDetached = [eni(seed, ours(TORN_DOWN)), eni(seed, ours(TORN_DOWN))];
  const blueAttached = attachedEni(seed, ours(TORN_DOWN));
  // A node terminated after the stack was destroyed: an ENI attached without delete-on-termination
  // is detached by EC2 and left available.
  const orphan = attachedEni(seed, ours(TORN_DOWN), false);
  emulator.state.setInstanceState(orphan.instanceId, 'terminated');
  const others = {
    greenDetached: eni(seed, ours(KEPT)),
    greenAttached: attachedEni(seed, ours(KEPT)).networkInterfaceId,
    vpcCni: eni(seed, { [ENI_TAG_KEYS.clusterName]: TORN_DOWN, 'node.k8s.amazonaws.com/instance_id': 'i-1' }),
    ciliumOperator: eni(seed, {
      [ENI_TAG_KEYS.ciliumManaged]: 'true',
      [ENI_TAG_KEYS.ciliumClusterName]: TORN_DOWN,
    }),
    ownerTagOnly: eni(seed, { [ENI_TAG_KEYS.owner]: 'serverless-eni-ipam' }),
    untagged: eni(seed, {}),
  };
  return { blueDetached: [...blueDetached, orphan.networkInterfaceId], blueAttached, others };
}

/** Whether EC2 still holds the ENI (the emulator keeps deleted ones in its history). */
const exists = (id: string) => {
  const record = emulator.state.networkInterface(id);
  return record !== undefined && record.deletedAtMs === undefined;
};

describe('npm run decommission', () => {
  it("deletes the cluster's detached ENIs, reports its attached ones, and touches nobody else's", async () => {
    const seed = await start();
    const { blueDetached, blueAttached, others } = populate(seed);
    const lines: string[] = [];

    const report = await decommission(ec2, { clusterName: TORN_DOWN, dryRun: false }, (line) =>
      lines.push(line),
    );

    for (const id of blueDetached) expect(exists(id)).toBe(false);
    expect(exists(blueAttached.networkInterfaceId)).toBe(true);
    for (const id of Object.values(others)) {
      expect(exists(id)).toBe(true);
      expect(emulator.calls.touching(id)).toEqual([]);
    }
    expect(report.deletions.map(({ outcome }) => outcome.kind)).toEqual(['deleted', 'deleted', 'deleted']);
    expect(lines[0]).toBe(`cluster ${TORN_DOWN}: 3 detached ENIs of ours, 1 attached`);
    expect(lines).toContain(
      `  attached ${blueAttached.networkInterfaceId} (${seed.subnets.nodesA.subnetId}): in-use on ${blueAttached.instanceId}`,
    );
    expect(summarize(report)).toEqual({ line: '3 deleted, 0 failed, 1 attached left alone', exitCode: 2 });
    expect(emulator.calls.denied()).toBe(0);

    // The node is terminated (its ENI goes with it): a second run finds nothing left.
    emulator.state.setInstanceState(blueAttached.instanceId, 'terminated');
    const again = await decommission(ec2, { clusterName: TORN_DOWN, dryRun: false });
    expect(summarize(again)).toEqual({ line: '0 deleted, 0 failed, 0 attached left alone', exitCode: 0 });
  });

  it('--dry-run changes nothing: EC2 answers each deletion DryRunOperation', async () => {
    const seed = await start();
    const { blueDetached } = populate(seed);
    const before = emulator.state.networkInterfaces().length;

    const report = await decommission(ec2, { clusterName: TORN_DOWN, dryRun: true });

    expect(emulator.state.networkInterfaces()).toHaveLength(before);
    expect(report.deletions.map(({ outcome }) => outcome.kind)).toEqual(
      blueDetached.map(() => 'would-delete'),
    );
    expect(emulator.calls.log.filter((call) => call.action === 'DeleteNetworkInterface')).toHaveLength(3);
    expect(
      emulator.calls.log.every(
        (call) => call.action !== 'DeleteNetworkInterface' || call.errorCode === 'DryRunOperation',
      ),
    ).toBe(true);
    expect(summarize(report)).toEqual({
      line: '3 would be deleted, 0 failed, 1 attached left alone',
      exitCode: 2,
    });
  });

  it('an ENI gone between list and delete counts as done; one attached meanwhile is reported, not retried', async () => {
    const seed = await start();
    const [gone, attachedLater] = [eni(seed, ours(TORN_DOWN)), eni(seed, ours(TORN_DOWN))];
    const instance = emulator.state.launchInstance({
      instanceType: 'm5.large',
      subnetId: seed.subnets.nodesA.subnetId,
    });
    emulator.setBeforeApply((action, params) => {
      if (action !== 'DeleteNetworkInterface') return;
      if (params.NetworkInterfaceId === gone) emulator.state.deleteNetworkInterface(gone);
      if (params.NetworkInterfaceId === attachedLater) {
        emulator.state.attachNetworkInterface({
          networkInterfaceId: attachedLater,
          instanceId: instance.instanceId,
          deviceIndex: 1,
        });
      }
    });

    const report = await decommission(ec2, { clusterName: TORN_DOWN, dryRun: false });

    expect(
      Object.fromEntries(report.deletions.map(({ eni, outcome }) => [eni.networkInterfaceId, outcome.kind])),
    ).toEqual({
      [gone]: 'already-gone',
      [attachedLater]: 'attached-meanwhile',
    });
    expect(exists(attachedLater)).toBe(true);
    expect(emulator.calls.count('DeleteNetworkInterface')).toBe(2);
    expect(summarize(report)).toEqual({ line: '1 deleted, 0 failed, 1 attached left alone', exitCode: 2 });
  });

  it("the documented policy lets EC2 refuse another cluster's ENIs even if the tool asked", async () => {
    const seed = await start(TORN_DOWN);
    const { others } = populate(seed);

    const report = await decommission(ec2, { clusterName: KEPT, dryRun: false });

    expect(exists(others.greenDetached)).toBe(true);
    expect(report.deletions.map(({ outcome }) => outcome.kind)).toEqual(['denied']);
    expect(emulator.calls.denied('DeleteNetworkInterface')).toBe(1);
    expect(summarize(report).exitCode).toBe(1);
  });

  it('lists every page of ENIs', async () => {
    const seed = await start();
    const ids = Array.from({ length: 12 }, () => eni(seed, ours(TORN_DOWN)));
    eni(seed, ours(KEPT));

    const listed = await listOwnEnis(ec2, TORN_DOWN, 5);

    expect(listed.map((listedEni) => listedEni.networkInterfaceId).sort()).toEqual([...ids].sort());
    expect(emulator.calls.count('DescribeNetworkInterfaces')).toBe(3);
  });

  it('runs as a command: npm run decommission -- --cluster blue', async () => {
    const seed = await start();
    const { blueDetached } = populate(seed);

    const { stdout, code } = await runCommand(['--cluster', TORN_DOWN]);

    expect(code).toBe(2);
    expect(stdout).toContain('3 deleted, 0 failed, 1 attached left alone');
    for (const id of blueDetached) expect(exists(id)).toBe(false);
  });

  it.each([
    { case: 'no --cluster', args: ['--dry-run'], error: '--cluster NAME is required' },
    { case: 'an unknown flag', args: ['--cluster', 'blue', '--force'], error: "Unknown option '--force'" },
    {
      case: 'a malformed cluster name',
      args: ['--cluster', 'blue.prod'],
      error: '--cluster expects an EKS cluster name',
    },
    { case: 'a stray argument', args: ['--cluster', 'blue', 'now'], error: 'unexpected argument "now"' },
  ])('refuses $case with one line and makes no call', async ({ args, error }) => {
    expect(() => parseDecommissionArgs(args)).toThrow(error);
    await start();
    const { stderr, code } = await runCommand(args);
    expect(code).toBe(1);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toContain(error);
    expect(emulator.calls.log).toEqual([]);
  });

  it("the runbook shows the policy the command's tests run under", () => {
    const readme = readFileSync(new URL('../../infra/README.md', import.meta.url), 'utf8');
    expect(readme).toContain(JSON.stringify(decommissionPolicy('my-cluster'), null, 2));
  });
});

/** The command as a person runs it, against the emulator through the SDK's endpoint variable. */
async function runCommand(
  args: readonly string[],
): Promise<{ stdout: string; stderr: string; code: number }> {
  const environment = {
    ...process.env,
    AWS_ENDPOINT_URL_EC2: emulator.url,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: OPERATOR_KEY,
    AWS_SECRET_ACCESS_KEY: OPERATOR_SECRET,
  };
  try {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', 'infra/decommission.ts', ...args],
      { env: environment, cwd: new URL('../..', import.meta.url).pathname },
    );
    return { stdout, stderr, code: 0 };
  } catch (error) {
    const failure = error as { stdout: string; stderr: string; code: number };
    return { stdout: failure.stdout, stderr: failure.stderr, code: failure.code };
  }
}
