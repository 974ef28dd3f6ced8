import { parseArgs } from 'node:util';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { KubeConfig } from '@kubernetes/client-node';
import { DynamoIpLedger } from '../functions/aws/ip-ledger-table.ts';
import { DynamoNodeRecordStore } from '../functions/aws/node-table.ts';
import {
  type CiliumNode,
  IPAM_IGNORE_ANNOTATION,
  RECORD_TABLE_ANNOTATION,
  RECORD_VERSION_ANNOTATION,
} from '../functions/core/ciliumnode.ts';
import {
  type HoldingInterval,
  holdersAt,
  holdingIntervals,
  type LedgerEntry,
  ledgerAddressesCovering,
} from '../functions/core/ip-ledger.ts';
import type { NodeRecord } from '../functions/core/model.ts';
import { appliedRecordVersion } from '../functions/core/table-generation.ts';
import { KubernetesCiliumNodeApi } from '../functions/k8s/ciliumnode-api.ts';
import { findLocalCloudState } from './local-cloud-state.ts';
import { stackOutput } from './resync.ts';

/**
 * `npm run inspect -- --instance i-… [--cluster NAME] [--outputs FILE] [--table NAME] [--local]`
 * `npm run inspect -- --ip ADDRESS [--at TIME] [--cluster NAME] [--outputs FILE] [--ledger-table NAME] [--local]`
 *
 * With `--ip`: who held the address at `--at` (ISO 8601 with its zone), or without `--at` every
 * holding the IP ledger keeps of it (ENI, subnet, instance, node, from, to, and why it ended),
 * whether it was assigned as itself or inside a delegated /28 or /80; the ledger table comes from
 * `--ledger-table`, else the stack's `LedgerTableName` output. It answers for nodes long
 * terminated, as long as the ledger's retention keeps their entries.
 *
 * Shows one node as the allocator and the cluster see it, side by side: its record (version,
 * lifecycle, ENIs), lease, last error, and its CiliumNode (the applied record version and table,
 * `ipam.cilium.io/ignore`, pool, status ENIs, used IPs, operator error), and whether the CiliumNode
 * shows the record's latest version. Read-only. The table comes from `--table`, else the
 * `NodeTableName` output of `ServerlessEniIpam-<cluster>` in the outputs file; Kubernetes from
 * KUBECONFIG or ~/.kube/config (kubectl's); `--local` reads a running `npm start` instead.
 */

export interface NodeView {
  readonly instanceId: string;
  readonly table: string;
  readonly record: NodeRecord | undefined;
  readonly ciliumNode: CiliumNode | undefined;
  readonly nowEpochMs: number;
}

const seconds = (milliseconds: number) => `${Math.round(milliseconds / 1000)} s`;

/** The record's side: version, lifecycle, ENIs, lease and last error. Pure. */
export function describeRecord(view: NodeView): string[] {
  const { record, nowEpochMs } = view;
  if (record === undefined)
    return [`record: none in ${view.table} (the allocator has not served this instance)`];
  const lease = record.lease;
  return [
    `record: version ${record.version}, ${record.lifecycle}, node ${record.nodeName}, ${record.instanceType} in ${record.availabilityZone}, updated ${seconds(nowEpochMs - record.updatedAtEpochMs)} ago`,
    ...record.enis.map(
      (eni) =>
        `  eni ${eni.id} device ${eni.deviceIndex}: ${eni.secondaryIps.length} IPs, ${eni.prefixes.length} prefixes`,
    ),
    lease === undefined
      ? 'lease: none'
      : lease.expiresAtEpochMs > nowEpochMs
        ? `lease: held by ${lease.holder} for ${seconds(lease.expiresAtEpochMs - nowEpochMs)} more`
        : `lease: expired ${seconds(nowEpochMs - lease.expiresAtEpochMs)} ago (held by ${lease.holder})`,
    record.lastError === undefined
      ? 'last error: none'
      : `last error: ${record.lastError.code}: ${record.lastError.message} (${seconds(nowEpochMs - record.lastError.atEpochMs)} ago)`,
  ];
}

/** The CiliumNode's side, and whether it shows the record's version. Pure. */
export function describeCiliumNode(view: NodeView): string[] {
  const cn = view.ciliumNode;
  if (cn === undefined) return ['ciliumnode: none'];
  const annotations = cn.metadata.annotations ?? {};
  const applied = appliedRecordVersion(cn, view.table);
  const error = cn.status?.ipam?.['operator-status']?.error;
  const verdict =
    view.record === undefined
      ? 'served by another allocator, or not yet by us'
      : applied === view.record.version
        ? 'in step: the CiliumNode shows the latest record version'
        : `behind: the CiliumNode shows ${applied === undefined ? 'no version of this table' : `version ${applied}`}, the record is at ${view.record.version} (npm run resync -- --instance ${view.instanceId})`;
  return [
    `ciliumnode: ${cn.metadata.name}, record-version ${annotations[RECORD_VERSION_ANNOTATION] ?? 'none'} (table ${annotations[RECORD_TABLE_ANNOTATION] ?? 'unnamed'}), ${IPAM_IGNORE_ANNOTATION}=${annotations[IPAM_IGNORE_ANNOTATION] ?? 'unset'}`,
    `  pool ${Object.keys(cn.spec?.ipam?.pool ?? {}).length} IPs, status ${Object.keys(cn.status?.eni?.enis ?? {}).length} ENIs, used ${Object.keys(cn.status?.ipam?.used ?? {}).length} IPs`,
    `  operator error: ${error ? error : 'none'}`,
    verdict,
  ];
}

export type InspectOptions =
  | (CommonOptions & { readonly mode: 'node'; readonly instance: string })
  | (CommonOptions & { readonly mode: 'ip'; readonly ip: string; readonly atEpochMs: number | undefined });

interface CommonOptions {
  readonly cluster: string | undefined;
  readonly table: string | undefined;
  readonly ledgerTable: string | undefined;
  readonly outputs: string;
  readonly local: boolean;
}

export function parseInspectArgs(argv: readonly string[]): InspectOptions {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      instance: { type: 'string' },
      ip: { type: 'string' },
      at: { type: 'string' },
      cluster: { type: 'string' },
      table: { type: 'string' },
      'ledger-table': { type: 'string' },
      outputs: { type: 'string', default: 'cdk-outputs.json' },
      local: { type: 'boolean', default: false },
    },
    strict: true,
  });
  const common: CommonOptions = {
    cluster: values.cluster,
    table: values.table,
    ledgerTable: values['ledger-table'],
    outputs: values.outputs,
    local: values.local,
  };
  if ((values.instance === undefined) === (values.ip === undefined)) {
    throw new Error('say either --instance i-… or --ip ADDRESS [--at TIME]');
  }
  if (values.ip !== undefined) {
    if (ledgerAddressesCovering(values.ip) === undefined) {
      throw new Error(`--ip expects an IPv4 or IPv6 address, got ${JSON.stringify(values.ip)}`);
    }
    return { ...common, mode: 'ip', ip: values.ip, atEpochMs: parseInstant(values.at) };
  }
  if (values.at !== undefined) throw new Error('--at goes with --ip');
  if (values.instance === undefined || !/^i-[0-9a-f]{8,17}$/.test(values.instance)) {
    throw new Error(`--instance expects an instance id (i-…), got ${JSON.stringify(values.instance)}`);
  }
  return { ...common, mode: 'node', instance: values.instance };
}

/** `--at`: an ISO 8601 time with its zone (`2026-12-01T14:02:00Z`), as epoch ms. */
function parseInstant(text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  const atEpochMs = Date.parse(text);
  if (
    !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:\d{2})$/.test(text) ||
    Number.isNaN(atEpochMs)
  ) {
    throw new Error(
      `--at expects an ISO 8601 time with its zone (2026-12-01T14:02:00Z), got ${JSON.stringify(text)}`,
    );
  }
  return atEpochMs;
}

/** Reads the node from the table and the cluster; the CiliumNode by the record's node name. */
export async function inspectNode(options: InspectOptions): Promise<NodeView> {
  if (options.mode !== 'node') throw new Error('inspectNode needs --instance');
  const local = options.local ? findLocalCloudState() : undefined;
  const table =
    options.table ?? local?.tableName ?? stackOutput(options.outputs, options.cluster, 'NodeTableName');
  // The local operator's keys (DynamoDB Local takes any): no AWS credentials needed on the machine.
  const dynamoDb = new DynamoDBClient(
    local
      ? {
          endpoint: local.dynamoDbEndpoint,
          region: local.region,
          credentials: local.operatorCredentials,
        }
      : {},
  );
  const kubeConfig = new KubeConfig();
  if (local) kubeConfig.loadFromFile(local.kubeconfigPath);
  else kubeConfig.loadFromDefault();
  try {
    const record = await new DynamoNodeRecordStore(dynamoDb, table).get(options.instance);
    const ciliumNodes = new KubernetesCiliumNodeApi(kubeConfig, {
      fieldManager: 'serverless-eni-ipam-inspect',
    });
    const ciliumNode = record ? await ciliumNodes.get(record.nodeName) : undefined;
    return { instanceId: options.instance, table, record, ciliumNode, nowEpochMs: Date.now() };
  } finally {
    dynamoDb.destroy();
  }
}

/** Who held `ip` at `atEpochMs` (or through its whole kept history), from the IP ledger. Pure. */
export function describeAddress(ip: string, entries: readonly LedgerEntry[], atEpochMs?: number): string[] {
  const time = (epochMs: number) => new Date(epochMs).toISOString();
  const holding = ({ assigned, released }: HoldingInterval) => {
    const entry = assigned ?? released;
    if (entry === undefined) return '';
    const from = assigned ? time(assigned.atEpochMs) : 'before the ledger kept it';
    const to = released ? `${time(released.atEpochMs)} (${released.reason})` : 'now (still held)';
    return `  ${entry.address} on ${entry.eniId} (${entry.subnetId}) of ${entry.instanceId}, node ${entry.nodeName}: from ${from} to ${to}`;
  };
  if (atEpochMs === undefined) {
    const intervals = holdingIntervals(entries);
    if (intervals.length === 0) return [`${ip}: the ledger holds no assignment of it`];
    return [`${ip}: ${intervals.length} holdings in the ledger`, ...intervals.map(holding)];
  }
  const holders = holdersAt(entries, atEpochMs);
  if (holders.length === 0)
    return [`${ip} at ${time(atEpochMs)}: held by nobody the allocator assigned it to`];
  return [`${ip} at ${time(atEpochMs)}: held by`, ...holders.map(holding)];
}

/** Reads the ledger entries of `ip`: the address itself and the /28 or /80 that would contain it. */
export async function inspectAddress(
  options: Extract<InspectOptions, { mode: 'ip' }>,
): Promise<LedgerEntry[]> {
  const local = options.local ? findLocalCloudState() : undefined;
  const table = options.ledgerTable ?? stackOutput(options.outputs, options.cluster, 'LedgerTableName');
  const dynamoDb = new DynamoDBClient(
    local
      ? { endpoint: local.dynamoDbEndpoint, region: local.region, credentials: local.operatorCredentials }
      : {},
  );
  try {
    return await new DynamoIpLedger(dynamoDb, table).entriesOf(ledgerAddressesCovering(options.ip) ?? []);
  } finally {
    dynamoDb.destroy();
  }
}

async function main(): Promise<number> {
  try {
    const options = parseInspectArgs(process.argv.slice(2));
    if (options.mode === 'ip') {
      const entries = await inspectAddress(options);
      console.log(describeAddress(options.ip, entries, options.atEpochMs).join('\n'));
      return 0;
    }
    const view = await inspectNode(options);
    console.log(
      [`instance ${view.instanceId}`, ...describeRecord(view), ...describeCiliumNode(view)].join('\n'),
    );
    return 0;
  } catch (error) {
    console.error(`inspect: ${(error as Error).message}`);
    return 1;
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.exitCode = await main();
}
