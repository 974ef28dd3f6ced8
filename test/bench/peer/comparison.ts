import { rmSync } from 'node:fs';
import { synthesizeStack } from '../../local-cloud/synthesize.ts';
import { OPERATOR_IPAM_API_DEFAULTS, operatorPeerBinary } from '../../peers/cilium-1.20/operator-peer.ts';
import { startDynamoDbLocal } from '../../support/dynamodb-local.ts';
import { parseMix } from '../floors.ts';
import { type ComparisonRow, comparisonRows, renderComparison } from './figures.ts';
import { runSide, type SideRun } from './run-side.ts';
import type { ComparisonSide } from './side.ts';

/** The peers `--peer` accepts. */
export const PEERS = ['cilium-operator'] as const;
export type PeerName = (typeof PEERS)[number];

/**
 * EC2's non-mutating bucket (100 tokens, 20 a second): the largest bucket and rate of those the
 * operator's calls draw on. cilium-operator's limiter is one token bucket for every call, so with
 * these it no longer holds back what EC2's own buckets would let through.
 */
export const EC2_BUCKET_LIMITS = { qps: 20, burst: 100 } as const;

export const COMPARISON_SIDES: readonly ComparisonSide[] = [
  { id: 'ours', label: 'ours' },
  {
    id: 'peer_defaults',
    label: `cilium-operator ${OPERATOR_IPAM_API_DEFAULTS.qps} qps/${OPERATOR_IPAM_API_DEFAULTS.burst} burst`,
    peerLimits: OPERATOR_IPAM_API_DEFAULTS,
  },
  {
    id: 'peer_raised',
    label: `cilium-operator ${EC2_BUCKET_LIMITS.qps} qps/${EC2_BUCKET_LIMITS.burst} burst`,
    peerLimits: EC2_BUCKET_LIMITS,
  },
];

export interface PeerComparisonOptions {
  readonly peer: PeerName;
  readonly nodes: number;
  readonly mix: string;
  readonly demandNodes: number;
  readonly seed: number;
  readonly concurrency: number;
  readonly timeoutSeconds?: number;
  readonly onProgress: (line: string) => void;
  readonly log: (line: string) => void;
}

export interface PeerComparison {
  readonly rows: readonly ComparisonRow[];
  readonly table: string;
  readonly sides: readonly {
    readonly id: string;
    readonly label: string;
    readonly readyNodes: number;
    readonly nodes: number;
    readonly timedOut: boolean;
    readonly ec2CallsByAction: Readonly<Record<string, number>>;
    readonly deniedByIam: Readonly<Record<string, number>>;
    readonly kubernetesRefused: number;
  }[];
}

/**
 * `npm run bench -- --peer cilium-operator`: the same workload (node mix and launch, EC2's token
 * buckets, 1.19 agents, the real kube-apiserver) once on our stack and once per peer
 * configuration, each on a fresh local cloud, in real time (the peer's limiter and retry waits
 * run on the real clock). Fails, naming them, if the peer called an EC2 action the stand-in does
 * not serve.
 */
export async function runPeerComparison(options: PeerComparisonOptions): Promise<PeerComparison> {
  operatorPeerBinary();
  const instanceTypes = parseMix(options.mix);
  options.onProgress('synthesizing the stack (bundling every function)...');
  const stack = await synthesizeStack({
    context: { 'eni-ipam:firstInterfaceIndex': 0, 'eni-ipam:prefixDelegation': false },
  });
  // A loaded machine can take longer than the default 30 s to bring the JVM up.
  const dynamoDb = await startDynamoDbLocal({ readyTimeoutMs: 120_000 });
  const runs: SideRun[] = [];
  try {
    for (const side of COMPARISON_SIDES) {
      runs.push(
        await runSide(stack, side, {
          nodes: options.nodes,
          instanceTypes,
          demandNodes: options.demandNodes,
          seed: options.seed,
          concurrency: options.concurrency,
          timeoutSeconds: options.timeoutSeconds ?? Math.min(1_200, 120 + options.nodes * 0.6),
          dynamoDbEndpoint: dynamoDb.endpoint,
          onProgress: options.onProgress,
          log: options.log,
        }),
      );
    }
  } finally {
    await dynamoDb.stop();
    rmSync(stack.assemblyDirectory, { recursive: true, force: true });
  }
  const unserved = runs.flatMap((run) =>
    run.unservedActions.map((action) => `${action} (${run.side.label})`),
  );
  if (unserved.length > 0)
    throw new Error(`the EC2 stand-in does not serve what was called: ${[...new Set(unserved)].join(', ')}`);
  const [ours, ...peers] = runs as [SideRun, ...SideRun[]];
  const rows = comparisonRows(ours, peers);
  return { rows, table: renderComparison(rows, peers), sides: runs.map(sideSummary) };
}

function sideSummary(run: SideRun): PeerComparison['sides'][number] {
  const count = (keys: readonly string[]) =>
    keys.reduce<Record<string, number>>((counts, key) => {
      counts[key] = (counts[key] ?? 0) + 1;
      return counts;
    }, {});
  return {
    id: run.side.id,
    label: run.side.label,
    readyNodes: run.readySeconds.size,
    nodes: run.nodeNames.length,
    timedOut: run.timedOut,
    ec2CallsByAction: count(
      run.burstCalls.map((call) => `${call.action}${call.outcome === 'throttled' ? ' (throttled)' : ''}`),
    ),
    deniedByIam: count(run.burstCalls.filter((call) => call.deniedByIam === true).map((call) => call.action)),
    kubernetesRefused: run.burstRequests.filter(
      (request) => request.statusCode === 401 || request.statusCode === 403,
    ).length,
  };
}
