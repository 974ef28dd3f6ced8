/**
 * `npm start`: the whole system on this machine. Synthesizes the CDK app, runs the bundled
 * functions against DynamoDB Local and the EC2 and Kubernetes emulators, launches a few instances
 * of mixed types in the seeded cluster, and shows a live summary until Ctrl-C.
 *
 *   npm start -- [--nodes N] [--once] [--time-scale X] [--verbose] [--agents 1.19|1.20|mixed]
 *
 * --nodes N        instances to launch (default 3)
 * --once           run the scenario (launch, wait for every node, fire the schedules once), print
 *                  the summary and exit: 0 if every node is ready and no invariant was violated, else 1
 * --time-scale X   run schedules X times faster than AWS (default 10: rate(1 minute) every 6 s)
 * --verbose        echo the functions' log lines (they always go to the log file)
 * --agents V       the simulated cilium-agents: 1.19 (CRD protocol, default), 1.20 (multi-pool), mixed
 */
import { createWriteStream, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { LOCAL_CLOUD_STATE_FILE } from '../../infra/resync.ts';
import { startLocalLambdaApi } from './lambda-api.ts';
import { type LocalCloud, startLocalCloud } from './local-cloud.ts';
import { renderDenials, renderSummary } from './summary.ts';

const INSTANCE_TYPES = ['m5.large', 't3.medium', 'c5.xlarge', 'r5.large', 'm5.2xlarge'] as const;
const READY_TIMEOUT_MS = 90_000;

interface Flags {
  readonly nodes: number;
  readonly once: boolean;
  readonly timeScale: number;
  readonly verbose: boolean;
  readonly agents: '1.19' | '1.20' | 'mixed';
}

function parseFlags(argv: string[]): Flags {
  const { values } = parseArgs({
    args: argv,
    options: {
      nodes: { type: 'string', default: '3' },
      once: { type: 'boolean', default: false },
      'time-scale': { type: 'string', default: '10' },
      verbose: { type: 'boolean', default: false },
      agents: { type: 'string', default: '1.19' },
    },
  });
  const agents = values.agents;
  if (agents !== '1.19' && agents !== '1.20' && agents !== 'mixed')
    throw new Error(`--agents must be 1.19, 1.20 or mixed, got ${agents}`);
  const nodes = Number(values.nodes);
  const timeScale = Number(values['time-scale']);
  if (!Number.isInteger(nodes) || nodes < 1 || nodes > 200)
    throw new Error(`--nodes must be 1..200, got ${values.nodes}`);
  if (!(timeScale > 0)) throw new Error(`--time-scale must be positive, got ${values['time-scale']}`);
  return { nodes, once: values.once, timeScale, verbose: values.verbose, agents };
}

async function main(): Promise<number> {
  // The runner's own SDK clients (table setup, stream polling) run on this Node.js, which the
  // SDK warns about; the functions get the same setting in their environment.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const flags = parseFlags(process.argv.slice(2));
  const logPath = join(tmpdir(), `local-cloud-${process.pid}.log`);
  const logFile = createWriteStream(logPath);
  const recentErrors: string[] = [];
  console.log('local cloud: synthesizing the stack (bundling every function) and starting the stand-ins...');
  const startedAtMs = Date.now();
  const cloud = await startLocalCloud({
    timeScale: flags.timeScale,
    runSchedules: !flags.once,
    agentVersions: flags.agents,
    onLog: ({ functionName, stream, text }) => {
      const line = `${functionName} ${stream}: ${text}`;
      logFile.write(`${line}\n`);
      if (flags.verbose) console.log(line);
      if (stream === 'stderr' || text.includes('"level":"ERROR"')) {
        recentErrors.push(line.slice(0, 300));
        if (recentErrors.length > 5) recentErrors.shift();
      }
    },
  });
  // `npm run resync -- --local` reaches the sync function through the Lambda Invoke API.
  const lambdaApi = await startLocalLambdaApi(async (functionName, event) => {
    const logicalId = Object.entries(cloud.functionNames).find(([, name]) => name === functionName)?.[0];
    return logicalId === undefined ? undefined : cloud.invoke(logicalId, event);
  });
  const syncFunctionName = Object.entries(cloud.functionNames).find(([logicalId]) =>
    logicalId.startsWith('Sync'),
  )?.[1];
  writeFileSync(
    LOCAL_CLOUD_STATE_FILE,
    JSON.stringify({
      lambdaEndpoint: lambdaApi.url,
      syncFunctionName,
      pid: process.pid,
      // For `npm run inspect -- --local`.
      tableName: cloud.table.name,
      dynamoDbEndpoint: cloud.table.endpoint,
      kubeconfigPath: cloud.kubeconfigPath,
    }),
  );
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    rmSync(LOCAL_CLOUD_STATE_FILE, { force: true });
    await lambdaApi.close();
    await cloud.stop();
    await new Promise((resolve) => logFile.end(resolve));
  };
  try {
    console.log(describeCloud(cloud, Date.now() - startedAtMs, logPath));
    for (let index = 0; index < flags.nodes; index++) {
      cloud.launchInstance(INSTANCE_TYPES[index % INSTANCE_TYPES.length] as string);
    }
    if (flags.once) return await runOnce(cloud, recentErrors);
    await runLive(cloud, recentErrors, flags);
    return 0;
  } finally {
    await stop();
  }
}

/** The scenario, once: every node ready, then one round of every schedule, then the verdict. */
async function runOnce(cloud: LocalCloud, recentErrors: readonly string[]): Promise<number> {
  const allReady = async () => {
    const summary = await cloud.summary();
    return summary.readyNodes === summary.nodes.length || summary.violations > 0;
  };
  let timedOut = false;
  await cloud.waitUntil(allReady, { timeoutMs: READY_TIMEOUT_MS, intervalMs: 200 }).catch(() => {
    timedOut = true;
  });
  await cloud.fireSchedules();
  await cloud.settle();
  const summary = await cloud.summary();
  console.log(kubernetesLine(cloud));
  console.log(renderSummary(summary));
  console.log(describeActivity(cloud, recentErrors));
  const denials = await cloud.denials();
  console.log(renderDenials(denials));
  const ok =
    !timedOut &&
    summary.readyNodes === summary.nodes.length &&
    summary.violations === 0 &&
    denials.total === 0;
  console.log(
    ok ? 'OK: every node is ready, no invariant was violated and no call was denied' : 'FAILED: see above',
  );
  return ok ? 0 : 1;
}

/** Redraws the summary every second until Ctrl-C. */
async function runLive(cloud: LocalCloud, recentErrors: readonly string[], flags: Flags): Promise<void> {
  const interactive = process.stdout.isTTY === true;
  let previous = '';
  const draw = async () => {
    const text = `${kubernetesLine(cloud)}\n${renderSummary(await cloud.summary())}\n${renderDenials(await cloud.denials())}\n${describeActivity(cloud, recentErrors)}`;
    if (text === previous) return;
    previous = text;
    if (interactive) process.stdout.write('\x1b[2J\x1b[H');
    console.log(`local cloud (time scale ${flags.timeScale}x) - Ctrl-C to stop\n${text}`);
  };
  await new Promise<void>((resolve) => {
    let drawing = Promise.resolve();
    const timer = setInterval(() => {
      drawing = drawing
        .then(draw)
        .catch((error: unknown) => console.error(`summary failed: ${(error as Error).message}`));
    }, 1_000);
    const finish = () => {
      clearInterval(timer);
      console.log('\nstopping...');
      void drawing.then(resolve);
    };
    process.once('SIGINT', finish);
    process.once('SIGTERM', finish);
  });
}

/** Which Kubernetes API server the cloud runs on: `kube-apiserver v1.36.3`, or the emulator. */
function kubernetesLine(cloud: LocalCloud): string {
  return cloud.k8s.backend === 'emulator' ? 'Kubernetes emulator' : `kube-apiserver ${cloud.k8s.version}`;
}

function describeCloud(cloud: LocalCloud, startupMs: number, logPath: string): string {
  const functions = cloud.model.functions.map(
    (definition) =>
      `  ${definition.logicalId.padEnd(28)} ${cloud.functionNames[definition.logicalId]} (${definition.runtime}, ${definition.timeoutSeconds} s)`,
  );
  const rules = cloud.model.rules.map(
    (rule) =>
      `  ${rule.logicalId.padEnd(28)} ${rule.scheduleExpression ?? JSON.stringify(rule.eventPattern)} -> ${rule.targets.map((target) => target.functionLogicalId).join(', ')}`,
  );
  const mappings = cloud.model.streamMappings.map(
    (mapping) =>
      `  ${mapping.functionLogicalId.padEnd(28)} batch ${mapping.batchSize}, retries ${mapping.maximumRetryAttempts}, bisect ${mapping.bisectBatchOnFunctionError}, partial batch response ${mapping.reportBatchItemFailures}, ${mapping.startingPosition}`,
  );
  return [
    `started in ${(startupMs / 1000).toFixed(1)} s from ${cloud.stack.assemblyDirectory}`,
    `functions (bundled assets):`,
    ...functions,
    'rules:',
    ...rules,
    'stream mapping:',
    ...mappings,
    `node table ${cloud.table.name} on ${cloud.table.endpoint}; EC2 ${cloud.ec2.url}; Kubernetes ${cloud.k8s.url} (KUBECONFIG=${cloud.kubeconfigPath})`,
    `function logs: ${logPath}`,
  ].join('\n');
}

function describeActivity(cloud: LocalCloud, recentErrors: readonly string[]): string {
  const invocations = Object.entries(cloud.functionStats())
    .map(
      ([logicalId, stats]) =>
        `${logicalId.replace(/Function[0-9A-F]{8}$/, '')} ${stats.invocations} (${stats.failures} failed, ${stats.coldStarts} cold)`,
    )
    .join(', ');
  const stream = cloud.streamStats();
  const lines = [
    `invocations: ${invocations}`,
    `stream: ${stream.recordsRead} records, ${stream.batchesInvoked} batches, ${stream.batchFailures} failed batches, ${stream.recordsDiscarded} records given up`,
    `given up: ${cloud.asyncFailures.length} async invocations, ${cloud.streamFailures.length} stream batches`,
  ];
  if (recentErrors.length > 0)
    lines.push('recent function errors:', ...recentErrors.map((line) => `  ${line}`));
  return lines.join('\n');
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
