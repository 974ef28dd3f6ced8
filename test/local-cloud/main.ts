/**
 * `npm start`: the whole system on this machine. Synthesizes the CDK app, runs the bundled
 * functions against DynamoDB Local, the EC2 stand-in and kube-apiserver, launches a few instances
 * of mixed types in the seeded cluster, and shows a live summary until Ctrl-C (the options:
 * `command-line.ts`, or `npm start -- --help`).
 */
import { createWriteStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  findLocalCloudState,
  LOCAL_CLOUD_VARIABLE,
  LocalCloudNotFoundError,
  removeLocalCloudState,
  writeLocalCloudState,
} from '../../infra/local-cloud-state.ts';
import { CommandLineError, type Flags, parseFlags, USAGE } from './command-line.ts';
import {
  type ControlEndpoint,
  ControlError,
  nextInstanceLauncher,
  requestLaunch,
  startControlEndpoint,
} from './control.ts';
import { DemandTracker } from './demand.ts';
import { renderLiveTable } from './live-table.ts';
import { LOCAL_REGION } from './local-account.ts';
import { type LocalCloud, startLocalCloud } from './local-cloud.ts';
import { LOCAL_OPERATOR_CREDENTIALS } from './local-operator.ts';
import { type PodChurn, startPodChurn } from './pod-churn.ts';

const READY_TIMEOUT_MS = 90_000;
/** How often the live cloud's pods start or end on one node (real time, whatever the time scale). */
const POD_CHURN_PERIOD_MS = 5_000;

async function main(): Promise<number> {
  // The runner's own SDK clients (table setup, stream polling) run on this Node.js, which the
  // SDK warns about; the functions get the same setting in their environment.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const flags = parseFlags(process.argv.slice(2), process.env);
  if (flags === 'help') {
    console.log(USAGE);
    return 0;
  }
  if (flags.launch !== undefined) return launchIntoRunningCloud(flags.launch);
  const logPath = join(tmpdir(), `local-cloud-${process.pid}.log`);
  const logFile = createWriteStream(logPath);
  const recentErrors: string[] = [];
  console.log('local cloud: synthesizing the stack (bundling every function) and starting the stand-ins...');
  const startedAtMs = Date.now();
  const cloud = await startLocalCloud({
    timeScale: flags.timeScale,
    runSchedules: !flags.once,
    // Live, the watcher runs on its schedule as on Lambda (under --once, the run settles instead).
    watchSchedule: !flags.once,
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
  const syncFunctionName =
    cloud.functionNames[
      Object.keys(cloud.functionNames).find((logicalId) => logicalId.startsWith('Sync')) ?? ''
    ];
  const launchNext = nextInstanceLauncher(cloud);
  // Every stored CiliumNode version, stamped when the cloud's watch delivered it.
  const demand = new DemandTracker();
  const stopTracking = cloud.k8s.onVersion((version) => demand.observe(version, Date.now()));
  let control: ControlEndpoint | undefined;
  let churn: PodChurn | undefined;
  let statePath: string | undefined;
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    if (statePath !== undefined) removeLocalCloudState(statePath);
    churn?.stop();
    stopTracking();
    await control?.close();
    await cloud.stop();
    await new Promise((resolve) => logFile.end(resolve));
  };
  try {
    control = await startControlEndpoint(launchNext);
    statePath = writeLocalCloudState({
      pid: process.pid,
      lambdaEndpoint: cloud.lambdaEndpoint,
      syncFunctionName: syncFunctionName ?? '',
      tableName: cloud.table.name,
      dynamoDbEndpoint: cloud.table.endpoint,
      kubeconfigPath: cloud.kubeconfigPath,
      region: LOCAL_REGION,
      operatorCredentials: LOCAL_OPERATOR_CREDENTIALS,
      control: { endpoint: control.endpoint, token: control.token },
    });
    console.log(describeCloud(cloud, Date.now() - startedAtMs, logPath));
    console.log(reachIt(cloud, statePath, syncFunctionName ?? ''));
    for (let index = 0; index < flags.nodes; index++) launchNext();
    if (flags.once) return await runOnce(cloud, recentErrors);
    churn = startPodChurn(
      {
        k8s: cloud.k8s,
        summary: () => cloud.summary(),
        runsMultiPoolAgent: (nodeName) => cloud.multiPoolAgent(nodeName) !== undefined,
      },
      POD_CHURN_PERIOD_MS,
    );
    await runLive(cloud, recentErrors, flags, demand);
    return 0;
  } finally {
    await stop();
  }
}

/**
 * The lines a person pastes into another shell: kubectl's KUBECONFIG, the aws CLI's endpoints
 * and the local operator's keys (both forms: AWS_ENDPOINT_URL_* for aws-cli 1.29+ and 2.13+,
 * --endpoint-url for older ones), and the variable the --local commands find this cloud by.
 */
function reachIt(cloud: LocalCloud, statePath: string, syncFunctionName: string): string {
  return [
    'reach it from another shell (kubectl, the aws CLI as the local operator, npm run inspect/resync -- --local):',
    `  export KUBECONFIG=${cloud.kubeconfigPath}`,
    `  export AWS_ACCESS_KEY_ID=${LOCAL_OPERATOR_CREDENTIALS.accessKeyId} AWS_SECRET_ACCESS_KEY=${LOCAL_OPERATOR_CREDENTIALS.secretAccessKey} AWS_DEFAULT_REGION=${LOCAL_REGION}`,
    `  export AWS_ENDPOINT_URL_EC2=${cloud.ec2.url} AWS_ENDPOINT_URL_DYNAMODB=${cloud.table.endpoint} AWS_ENDPOINT_URL_LAMBDA=${cloud.lambdaEndpoint}`,
    `  export ${LOCAL_CLOUD_VARIABLE}=${statePath}`,
    '  more nodes in this cloud: npm start -- --launch 2',
    `  node table ${cloud.table.name}, sync function ${syncFunctionName}; older aws CLIs: --endpoint-url ${cloud.ec2.url} (ec2), ${cloud.table.endpoint} (dynamodb), ${cloud.lambdaEndpoint} (lambda)`,
  ].join('\n');
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
  const denials = await cloud.denials();
  console.log(await renderLiveTable(cloud, { recentErrors }));
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
async function runLive(
  cloud: LocalCloud,
  recentErrors: readonly string[],
  flags: Flags,
  demand: DemandTracker,
): Promise<void> {
  const interactive = process.stdout.isTTY === true;
  let previous = '';
  const draw = async () => {
    const text = await renderLiveTable(cloud, { recentErrors, demand });
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

/** `--launch N`: asks the running local cloud (its state file) to launch N instances. */
async function launchIntoRunningCloud(count: number): Promise<number> {
  const state = findLocalCloudState();
  const launched = await requestLaunch(state, count);
  for (const instance of launched) {
    console.log(`launched ${instance.instanceId} (${instance.instanceType}), node ${instance.nodeName}`);
  }
  console.log(`the live table of the local cloud (pid ${state.pid}) shows them as they get ready`);
  return 0;
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    if (
      error instanceof CommandLineError ||
      error instanceof ControlError ||
      error instanceof LocalCloudNotFoundError
    )
      console.error(`npm start: ${(error as Error).message}`);
    else console.error(error instanceof Error ? (error.stack ?? error.message) : error);
    process.exitCode = 1;
  },
);
