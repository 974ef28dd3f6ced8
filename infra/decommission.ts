import { parseArgs } from 'node:util';
import {
  DeleteNetworkInterfaceCommand,
  EC2Client,
  EC2ServiceException,
  type NetworkInterface,
  paginateDescribeNetworkInterfaces,
} from '@aws-sdk/client-ec2';
import { classifyEc2Answer } from '../functions/aws/ec2-errors.ts';
import { ENI_TAG_KEYS, isOurs, OWNER_TAG_VALUE } from '../functions/core/eni-ownership.ts';
import { EKS_CLUSTER_NAME_PATTERN } from './config.ts';

/**
 * `npm run decommission -- --cluster NAME [--dry-run] [--region REGION]`
 *
 * Tears down what a cluster's allocator left in EC2: lists every ENI carrying BOTH our ownership
 * tag and the cluster's tag, deletes the detached ones, and reports the attached ones with their
 * instances. It reads EC2 alone (no stack output, no table, no cluster), so it works after the
 * cluster and the stack are gone. An ENI without both tags (another cluster's, VPC CNI's, which
 * share the cluster tag, cilium-operator's, an operator's) is never listed, so never deleted; the
 * IAM policy it needs (`decommissionPolicy`) makes EC2 refuse such a deletion anyway.
 *
 * Deletion is one call per ENI, in order, never retried by this tool beyond the SDK's retries of
 * throttling and 5xx: an ENI gone meanwhile (`*.NotFound`) counts as deleted; one attached
 * meanwhile (`InvalidNetworkInterface.InUse`, or EC2's "is currently in use") is reported with the
 * attached ones. `--dry-run` sends each deletion with EC2's DryRun flag, so EC2 checks the
 * permission and changes nothing.
 *
 * Exit status: 0 when no ENI of ours is left (in a dry run: every detached one would be deleted
 * and none is attached), 2 when every detached one is done but some are attached (terminate their
 * instances: delete-on-termination removes ENIs we attached; then run it again), 1 when a deletion
 * failed or the input is bad (nothing is done).
 */

export interface DecommissionOptions {
  readonly clusterName: string;
  readonly dryRun: boolean;
  readonly region?: string;
}

export function parseDecommissionArgs(argv: readonly string[]): DecommissionOptions {
  const { values, positionals } = parseArgs({
    args: [...argv],
    options: {
      cluster: { type: 'string' },
      'dry-run': { type: 'boolean', default: false },
      region: { type: 'string' },
    },
    strict: true,
    allowPositionals: true,
  });
  if (positionals.length > 0) throw new Error(`unexpected argument ${JSON.stringify(positionals[0])}`);
  if (values.cluster === undefined) throw new Error('--cluster NAME is required (the EKS cluster name)');
  if (!EKS_CLUSTER_NAME_PATTERN.test(values.cluster)) {
    throw new Error(`--cluster expects an EKS cluster name, got ${JSON.stringify(values.cluster)}`);
  }
  if (values.region !== undefined && !/^[a-z]{2}(-[a-z]+)+-\d$/.test(values.region)) {
    throw new Error(`--region expects an AWS region (us-east-1), got ${JSON.stringify(values.region)}`);
  }
  return {
    clusterName: values.cluster,
    dryRun: values['dry-run'],
    ...(values.region === undefined ? {} : { region: values.region }),
  };
}

/**
 * The least-privilege IAM policy the command runs with: listing ENIs (a Describe call cannot be
 * scoped to resources), and deleting only ENIs that carry both our ownership tag and the cluster's
 * tag. The runbook in infra/README.md shows it for a cluster named `my-cluster`.
 */
export function decommissionPolicy(clusterName: string) {
  return {
    Version: '2012-10-17',
    Statement: [
      { Sid: 'ListEnis', Effect: 'Allow', Action: 'ec2:DescribeNetworkInterfaces', Resource: '*' },
      {
        Sid: 'DeleteOwnEnisOfCluster',
        Effect: 'Allow',
        Action: 'ec2:DeleteNetworkInterface',
        Resource: 'arn:aws:ec2:*:*:network-interface/*',
        Condition: {
          StringEquals: {
            [`aws:ResourceTag/${ENI_TAG_KEYS.owner}`]: OWNER_TAG_VALUE,
            [`aws:ResourceTag/${ENI_TAG_KEYS.clusterName}`]: clusterName,
          },
        },
      },
    ],
  };
}

/** An ENI of ours as the teardown sees it. */
export interface OwnEni {
  readonly networkInterfaceId: string;
  readonly subnetId: string;
  readonly status: string;
  /** The instance it is attached to, if any. */
  readonly instanceId: string | undefined;
}

/**
 * Every ENI of ours for the cluster: filtered by EC2 on both tags' values, then checked again here
 * with `isOurs` so that a filter EC2 ignored could never widen what is deleted.
 */
export async function listOwnEnis(ec2: EC2Client, clusterName: string, pageSize = 1000): Promise<OwnEni[]> {
  const filters = [
    { Name: `tag:${ENI_TAG_KEYS.owner}`, Values: [OWNER_TAG_VALUE] },
    { Name: `tag:${ENI_TAG_KEYS.clusterName}`, Values: [clusterName] },
  ];
  const enis: OwnEni[] = [];
  for await (const page of paginateDescribeNetworkInterfaces(
    { client: ec2, pageSize },
    { Filters: filters },
  )) {
    for (const eni of page.NetworkInterfaces ?? []) {
      if (eni.NetworkInterfaceId === undefined || !isOurs(tagsOf(eni), clusterName)) continue;
      enis.push({
        networkInterfaceId: eni.NetworkInterfaceId,
        subnetId: eni.SubnetId ?? '',
        status: eni.Status ?? 'unknown',
        instanceId: eni.Attachment?.InstanceId,
      });
    }
  }
  return enis;
}

function tagsOf(eni: NetworkInterface): Record<string, string> {
  return Object.fromEntries((eni.TagSet ?? []).map((tag) => [tag.Key ?? '', tag.Value ?? '']));
}

/**
 * Which ENIs to delete: those EC2 shows `available` (detached). Any other status (`in-use`,
 * `attaching`, `detaching`) is left alone and reported: deleting it would fail, and an attached
 * ENI carries a running node's pods. Pure.
 */
export function planDecommission(enis: readonly OwnEni[]): {
  readonly detached: OwnEni[];
  readonly attached: OwnEni[];
} {
  return {
    detached: enis.filter((eni) => eni.status === 'available'),
    attached: enis.filter((eni) => eni.status !== 'available'),
  };
}

export type DeletionOutcome =
  | { readonly kind: 'deleted' | 'would-delete' | 'already-gone' | 'attached-meanwhile' }
  | { readonly kind: 'denied' | 'failed'; readonly reason: string };

/** Deletes one detached ENI (or asks EC2 whether it may, in a dry run); never throws for EC2's answers. */
export async function deleteDetachedEni(
  ec2: EC2Client,
  networkInterfaceId: string,
  dryRun: boolean,
): Promise<DeletionOutcome> {
  try {
    await ec2.send(
      new DeleteNetworkInterfaceCommand({ NetworkInterfaceId: networkInterfaceId, DryRun: dryRun }),
    );
    return { kind: 'deleted' };
  } catch (error) {
    if (!(error instanceof EC2ServiceException)) return { kind: 'failed', reason: String(error) };
    if (error.name === 'DryRunOperation') return { kind: 'would-delete' };
    const kind = classifyEc2Answer({
      code: error.name,
      message: error.message,
      action: 'DeleteNetworkInterface',
      httpStatusCode: error.$metadata.httpStatusCode,
    });
    if (kind === 'not-found') return { kind: 'already-gone' };
    if (kind === 'in-use') return { kind: 'attached-meanwhile' };
    const reason = `${error.name}: ${error.message.split('. Encoded authorization failure')[0]}`;
    return { kind: kind === 'unauthorized' ? 'denied' : 'failed', reason };
  }
}

export interface DecommissionReport {
  readonly clusterName: string;
  readonly dryRun: boolean;
  readonly attached: readonly OwnEni[];
  readonly deletions: readonly { readonly eni: OwnEni; readonly outcome: DeletionOutcome }[];
}

/** Lists, then deletes the detached ENIs one by one; `onLine` hears each step as it happens. */
export async function decommission(
  ec2: EC2Client,
  options: DecommissionOptions,
  onLine: (line: string) => void = () => {},
): Promise<DecommissionReport> {
  const { detached, attached } = planDecommission(await listOwnEnis(ec2, options.clusterName));
  onLine(
    `cluster ${options.clusterName}: ${detached.length} detached ENIs of ours, ${attached.length} attached${options.dryRun ? ' (dry run: nothing is changed)' : ''}`,
  );
  for (const eni of attached) onLine(`  attached ${describeAttached(eni)}`);
  const deletions: { eni: OwnEni; outcome: DeletionOutcome }[] = [];
  for (const eni of detached) {
    const outcome = await deleteDetachedEni(ec2, eni.networkInterfaceId, options.dryRun);
    deletions.push({ eni, outcome });
    onLine(`  ${eni.networkInterfaceId} (${eni.subnetId}): ${describeOutcome(outcome)}`);
  }
  return { clusterName: options.clusterName, dryRun: options.dryRun, attached, deletions };
}

function describeAttached(eni: OwnEni): string {
  return `${eni.networkInterfaceId} (${eni.subnetId}): ${eni.status}${eni.instanceId ? ` on ${eni.instanceId}` : ''}`;
}

function describeOutcome(outcome: DeletionOutcome): string {
  switch (outcome.kind) {
    case 'deleted':
      return 'deleted';
    case 'would-delete':
      return 'would be deleted (EC2 allows it)';
    case 'already-gone':
      return 'already gone';
    case 'attached-meanwhile':
      return 'attached meanwhile: left alone';
    case 'denied':
      return `denied: ${outcome.reason}`;
    case 'failed':
      return `failed: ${outcome.reason}`;
  }
}

/** The summary line and the exit status described at the top of this file. Pure. */
export function summarize(report: DecommissionReport): {
  readonly line: string;
  readonly exitCode: 0 | 1 | 2;
} {
  const count = (...kinds: DeletionOutcome['kind'][]) =>
    report.deletions.filter(({ outcome }) => kinds.includes(outcome.kind)).length;
  const failed = count('denied', 'failed');
  const remaining = report.attached.length + count('attached-meanwhile');
  const done = report.dryRun
    ? `${count('would-delete')} would be deleted`
    : `${count('deleted', 'already-gone')} deleted`;
  const line = `${done}, ${failed} failed, ${remaining} attached left alone`;
  return { line, exitCode: failed > 0 ? 1 : remaining > 0 ? 2 : 0 };
}

async function main(): Promise<number> {
  let options: DecommissionOptions;
  try {
    options = parseDecommissionArgs(process.argv.slice(2));
  } catch (error) {
    console.error(`decommission: ${(error as Error).message}`);
    return 1;
  }
  // The SDK's adaptive retry: EC2 throttles deletes per account, shared with every other tool.
  const ec2 = new EC2Client({
    retryMode: 'adaptive',
    maxAttempts: 10,
    ...(options.region ? { region: options.region } : {}),
  });
  try {
    const report = await decommission(ec2, options, (line) => console.log(line));
    const { line, exitCode } = summarize(report);
    console.log(line);
    return exitCode;
  } catch (error) {
    console.error(`decommission: ${(error as Error).message}`);
    return 1;
  } finally {
    ec2.destroy();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.exitCode = await main();
}
