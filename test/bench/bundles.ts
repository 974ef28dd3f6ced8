import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { kubeconfigYaml } from '../emulators/k8s/index.ts';
import type { SynthesizedStack } from '../local-cloud/synthesize.ts';
import { type FunctionDefinition, readStackModel, resolveEnvironment } from '../local-cloud/template.ts';
import type { BaselineBundle } from './baseline-bundles.ts';
import { median } from './floors.ts';

/**
 * Bundle size and module initialisation time of each synthesized function: the asset's index.mjs
 * bytes, and the time `await import()` of it takes in a FRESH child process (Node's own start-up
 * excluded), with the function's template environment, every endpoint pointing at a closed
 * loopback port (module scope builds clients but must not call anything). Median of `runs`.
 */

export interface BundleFigures {
  readonly logicalId: string;
  readonly bytes: number;
  readonly importMs: readonly number[];
  readonly medianImportMs: number;
  /** Today's naive bundle of the same handler (`baseline-bundles.ts`), timed in the same runs. */
  readonly baseline?: {
    readonly handlerFolder: string;
    readonly bytes: number;
    readonly importMs: readonly number[];
    readonly medianImportMs: number;
  };
}

/** Which naive handler each function is measured against (the watcher is new: the allocator's). */
const BASELINE_HANDLER: Record<string, 'allocate' | 'sweep' | 'sync'> = {
  Allocate: 'allocate',
  Sweep: 'sweep',
  GarbageCollection: 'sweep',
  Sync: 'sync',
  Watch: 'allocate',
};

const NOWHERE = 'http://127.0.0.1:9';

export async function measureBundles(
  stack: SynthesizedStack,
  runs: number,
  baselines?: readonly BaselineBundle[],
): Promise<BundleFigures[]> {
  const model = readStackModel(stack.template, stack.assemblyDirectory);
  const workDirectory = mkdtempSync(join(tmpdir(), 'bench-bundles-'));
  try {
    const kubeconfigPath = join(workDirectory, 'kubeconfig');
    writeFileSync(kubeconfigPath, kubeconfigYaml(NOWHERE, 'bench-token'));
    const results: BundleFigures[] = [];
    for (const definition of model.functions) {
      const environment = functionEnvironment(definition, stack.stackName, kubeconfigPath);
      const folder = BASELINE_HANDLER[definition.logicalId.replace(/Function[0-9A-F]{8}$/, '')];
      const baseline = baselines?.find((candidate) => candidate.handlerFolder === folder);
      // The naive handler runs with the environment of the function it was (the watcher's lacks
      // the allocator's variables), in the same asset directory as the function measured.
      const baselineDefinition =
        model.functions.find((candidate) =>
          candidate.logicalId.toLowerCase().startsWith(`${folder ?? ''}function`),
        ) ?? definition;
      const baselineEnvironment = functionEnvironment(baselineDefinition, stack.stackName, kubeconfigPath);
      const importMs: number[] = [];
      const baselineMs: number[] = [];
      // Alternated, so the machine's load weighs on both alike.
      for (let run = 0; run < runs; run++) {
        importMs.push(await timeImport(definition.entryFile, definition, environment));
        if (baseline) baselineMs.push(await timeImport(baseline.entryFile, definition, baselineEnvironment));
      }
      results.push({
        logicalId: definition.logicalId,
        bytes: statSync(definition.entryFile).size,
        importMs,
        medianImportMs: median(importMs) ?? Number.NaN,
        ...(baseline
          ? {
              baseline: {
                handlerFolder: baseline.handlerFolder,
                bytes: baseline.bytes,
                importMs: baselineMs,
                medianImportMs: median(baselineMs) ?? Number.NaN,
              },
            }
          : {}),
      });
    }
    return results;
  } finally {
    rmSync(workDirectory, { recursive: true, force: true });
  }
}

function functionEnvironment(
  definition: FunctionDefinition,
  stackName: string,
  kubeconfigPath: string,
): Record<string, string> {
  const variables = resolveEnvironment(definition, {
    ref: (logicalId) => `${stackName}-${logicalId}`,
    getAtt: (logicalId, attribute) =>
      `arn:aws:dynamodb:us-east-1:123456789012:table/${stackName}-${logicalId}/${attribute}`,
    pseudo: {
      'AWS::Region': 'us-east-1',
      'AWS::AccountId': '123456789012',
      'AWS::Partition': 'aws',
      'AWS::URLSuffix': 'amazonaws.com',
      'AWS::StackName': stackName,
    },
  });
  return {
    ...variables,
    PATH: process.env.PATH ?? '',
    AWS_REGION: 'us-east-1',
    AWS_DEFAULT_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'AKIDBENCH',
    AWS_SECRET_ACCESS_KEY: 'bench-secret',
    AWS_LAMBDA_FUNCTION_NAME: `${stackName}-${definition.logicalId}`,
    AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(definition.memorySizeMb),
    AWS_ENDPOINT_URL: NOWHERE,
    AWS_ENDPOINT_URL_EC2: NOWHERE,
    AWS_ENDPOINT_URL_DYNAMODB: NOWHERE,
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
    KUBECONFIG: kubeconfigPath,
    TZ: ':UTC',
  };
}

const IMPORT_SCRIPT = [
  "const { performance } = await import('node:perf_hooks');",
  'const started = performance.now();',
  'await import(process.argv[1]);',
  "process.stdout.write('import-ms ' + (performance.now() - started) + '\\n', () => process.exit(0));",
].join('\n');

function timeImport(
  entryFile: string,
  definition: FunctionDefinition,
  environment: Record<string, string>,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--input-type=module', '-e', IMPORT_SCRIPT, pathToFileURL(entryFile).href],
      { cwd: definition.assetDirectory, env: environment, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    child.stdout.on('data', (chunk) => {
      output += chunk;
    });
    child.stderr.on('data', (chunk) => {
      output += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      const match = /import-ms ([\d.]+)/.exec(output);
      if (code === 0 && match) resolve(Number(match[1]));
      else
        reject(new Error(`importing ${definition.logicalId} failed (exit ${code}): ${output.slice(0, 500)}`));
    });
  });
}
