/**
 * `npm run bench`: N nodes launched at once on the local cloud, EC2 enforcing AWS's per-action
 * token buckets on a scaled clock; every figure is printed beside its floor (or limit) as a ratio,
 * and written to the out dir as bench.json, bench.md and nodes-ready.svg (plus the functions' log).
 * Benchmarks report; they assert nothing about wall-clock time.
 *
 *   npm run bench -- [--nodes N] [--mix m5.large:2,t3.medium:1] [--first-interface-index 0|1]
 *                    [--prefix-delegation] [--duplicate-events RATE] [--scale X] [--out DIR]
 *                    [--concurrency C] [--import-runs R] [--timeout SECONDS] [--seed S]
 *                    [--demand-nodes N] [--sweep-cost-nodes 100,1000,5000] [--agents 1.19|1.20|mixed]
 *                    [--write-readme] [--peer cilium-operator]
 *
 * --nodes N                  instances launched at once (default 200)
 * --mix SPEC                 instance types and weights (default m5.large:2,t3.medium:1)
 * --first-interface-index I  0: pool IPs may go on eth0 (default); 1: every node needs a new ENI
 * --prefix-delegation        /28 prefixes instead of single IPs (Nitro types)
 * --duplicate-events RATE    fraction of EC2 events delivered twice (default 0)
 * --scale X                  simulated seconds per real second for EC2's buckets, schedules and
 *                            Lambda retry waits (default 1: real time; the functions' own SDK
 *                            backoff stays real time, so a large X overstates retry waits)
 * --out DIR                  where the reports go (default bench-results)
 * --concurrency C            containers per function (default 8)
 * --import-runs R            fresh-process imports per function for the init time (default 5)
 * --timeout SECONDS          real seconds to wait for every node (default 120 + 0.6 per node)
 * --demand-nodes N           m5.large nodes of the burst whose pods start at once (default 50)
 * --agents V                 the simulated cilium-agents: 1.19 (CRD protocol, default), 1.20
 *                            (multi-pool: demand in spec.ipam.pools), mixed (every other node 1.20)
 * --sweep-cost-nodes LIST    cluster sizes for one steady-state sweep's cost (default 100,1000,5000;
 *                            empty to skip)
 * --write-readme             also write the figures table of the root README (readme-figures.ts)
 * --peer cilium-operator     instead of the phases: the same burst and demand once on our stack and
 *                            once per configuration of cilium-operator's ENI allocator (v1.20.2,
 *                            `npm run peers:build`), all on the real kube-apiserver in real time,
 *                            and per figure ours, the peer's and ours / peer (peer/comparison.ts);
 *                            reads --nodes, --mix, --demand-nodes, --seed, --concurrency, --timeout
 */
import { createWriteStream, mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { formatNumber } from './floors.ts';
import { PEERS, type PeerName, runPeerComparison } from './peer/comparison.ts';
import { writeReadmeFigures } from './readme-figures.ts';
import { renderMarkdownReport, renderTable } from './report.ts';
import { type BenchOptions, runBench } from './run.ts';

function agentsOf(raw: string | undefined): '1.19' | '1.20' | 'mixed' {
  if (raw === '1.19' || raw === '1.20' || raw === 'mixed') return raw;
  throw new Error(`--agents must be 1.19, 1.20 or mixed, got ${raw}`);
}

function peerOf(raw: string | undefined): PeerName | undefined {
  if (raw === undefined) return undefined;
  if ((PEERS as readonly string[]).includes(raw)) return raw as PeerName;
  throw new Error(`--peer must be one of ${PEERS.join(', ')}, got ${raw}`);
}

function parseFlags(argv: string[]): BenchOptions & { out: string; peer: PeerName | undefined } {
  const { values } = parseArgs({
    args: argv,
    options: {
      nodes: { type: 'string', default: '200' },
      mix: { type: 'string', default: 'm5.large:2,t3.medium:1' },
      'first-interface-index': { type: 'string', default: '0' },
      'prefix-delegation': { type: 'boolean', default: false },
      'duplicate-events': { type: 'string', default: '0' },
      scale: { type: 'string', default: '1' },
      out: { type: 'string', default: 'bench-results' },
      concurrency: { type: 'string', default: '8' },
      'import-runs': { type: 'string', default: '5' },
      timeout: { type: 'string' },
      seed: { type: 'string', default: '1' },
      'demand-nodes': { type: 'string', default: '50' },
      'sweep-cost-nodes': { type: 'string', default: '100,1000,5000' },
      agents: { type: 'string', default: '1.19' },
      'write-readme': { type: 'boolean', default: false },
      peer: { type: 'string' },
    },
  });
  const integer = (name: string, raw: string | undefined, min: number, max: number) => {
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max)
      throw new Error(`--${name} must be an integer in ${min}..${max}, got ${raw}`);
    return value;
  };
  const firstInterfaceIndex = integer('first-interface-index', values['first-interface-index'], 0, 1) as
    | 0
    | 1;
  return {
    nodes: integer('nodes', values.nodes, 1, 5_000),
    mix: values.mix,
    firstInterfaceIndex,
    prefixDelegation: values['prefix-delegation'],
    duplicateEvents: Number(values['duplicate-events']),
    scale: Number(values.scale),
    out: values.out,
    peer: peerOf(values.peer),
    concurrency: integer('concurrency', values.concurrency, 1, 64),
    importRuns: integer('import-runs', values['import-runs'], 1, 50),
    ...(values.timeout === undefined
      ? {}
      : { timeoutSeconds: integer('timeout', values.timeout, 10, 7_200) }),
    seed: integer('seed', values.seed, 0, 2 ** 31),
    demandNodes: integer('demand-nodes', values['demand-nodes'], 0, 1_000),
    agents: agentsOf(values.agents),
    sweepCostNodes: (values['sweep-cost-nodes'] ?? '')
      .split(',')
      .filter((part) => part.trim() !== '')
      .map((part) => integer('sweep-cost-nodes', part.trim(), 1, 5_000)),
  };
}

async function main(): Promise<number> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const flags = parseFlags(process.argv.slice(2));
  const out = resolve(flags.out);
  mkdirSync(out, { recursive: true });
  const functionLog = createWriteStream(join(out, 'functions.log'));
  try {
    if (flags.peer !== undefined)
      return await comparePeer(flags, out, (line) => functionLog.write(`${line}\n`));
    const { report, chartSvg } = await runBench({
      ...flags,
      functionLog: (line) => functionLog.write(`${line}\n`),
      onProgress: (line) => console.log(`bench: ${line}`),
    });
    writeFileSync(join(out, 'bench.json'), `${JSON.stringify(report, null, 2)}\n`);
    writeFileSync(join(out, 'bench.md'), renderMarkdownReport(report));
    writeFileSync(join(out, 'nodes-ready.svg'), chartSvg);
    if (process.argv.includes('--write-readme')) writeReadmeFigures(report.figures, process.argv.slice(2));
    console.log('');
    console.log(
      `${flags.nodes} nodes (${flags.mix}, first-interface-index ${flags.firstInterfaceIndex}${flags.prefixDelegation ? ', prefix delegation' : ''}, duplicate events ${flags.duplicateEvents}, scale ${flags.scale}x): ready ${report.readyNodes}/${flags.nodes}${report.burst.timedOut ? ' TIMED OUT' : ''}, invariant violations ${report.burst.invariantViolations}, burst ${formatNumber(report.burst.realSeconds, 1)} real s`,
    );
    console.log(renderTable(report.figures));
    if (report.singleNode) console.log(`one node alone, chain: ${report.singleNode.chain.join(' > ')}`);
    if (report.warmSingleNode)
      console.log(`one node alone (warm), chain: ${report.warmSingleNode.chain.join(' > ')}`);
    console.log(`\nreports: ${join(out, 'bench.md')}, bench.json, nodes-ready.svg, functions.log`);
    return 0;
  } finally {
    await new Promise((done) => functionLog.end(done));
  }
}

/** `--peer`: the side-by-side comparison, printed and written as peer-comparison.json / .md. */
async function comparePeer(
  flags: ReturnType<typeof parseFlags>,
  out: string,
  log: (line: string) => void,
): Promise<number> {
  const comparison = await runPeerComparison({
    peer: flags.peer as PeerName,
    nodes: flags.nodes,
    mix: flags.mix,
    demandNodes: flags.demandNodes ?? 50,
    seed: flags.seed ?? 1,
    concurrency: flags.concurrency ?? 8,
    ...(flags.timeoutSeconds === undefined ? {} : { timeoutSeconds: flags.timeoutSeconds }),
    onProgress: (line) => console.log(`bench: ${line}`),
    log,
  });
  const heading = `${flags.nodes} nodes (${flags.mix}), 1.19 agents, real kube-apiserver, EC2 token buckets, real time: ours beside cilium-operator v1.20.2's ENI allocator`;
  const readiness = comparison.sides
    .map(
      (side) =>
        `${side.label}: ready ${side.readyNodes}/${side.nodes}${side.timedOut ? ' TIMED OUT' : ''}, EC2 denied ${JSON.stringify(side.deniedByIam)}, Kubernetes refused ${side.kubernetesRefused}`,
    )
    .join('\n');
  writeFileSync(join(out, 'peer-comparison.json'), `${JSON.stringify(comparison, null, 2)}\n`);
  writeFileSync(
    join(out, 'peer-comparison.md'),
    `${heading}\n\n\`\`\`\n${comparison.table}\n\`\`\`\n\n${readiness}\n`,
  );
  console.log(
    `\n${heading}\n${readiness}\n\n${comparison.table}\n\nreports: ${join(out, 'peer-comparison.md')}, peer-comparison.json, functions.log`,
  );
  return comparison.sides.some((side) => side.timedOut) ? 1 : 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : error);
    process.exitCode = 1;
  },
);
