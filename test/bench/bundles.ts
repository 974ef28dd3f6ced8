import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
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
 * What the bundle defers (the chunks under `chunks/`, loaded by `import()` on first use: the
 * Kubernetes client, the SDK's rarely used credential providers) is measured too, in the same
 * process right after the init: every chunk imported, an upper bound of what a first invocation
 * may wait for.
 */

export interface BundleFigures {
  readonly logicalId: string;
  /** What a cold start loads: index.mjs and the chunks it imports statically. */
  readonly bytes: number;
  readonly importMs: readonly number[];
  readonly medianImportMs: number;
  /** The deferred chunks: their bytes, and the median time importing all of them after the init took. */
  readonly deferred: { readonly chunks: number; readonly bytes: number; readonly medianImportMs: number };
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
      const deferredMs: number[] = [];
      const baselineMs: number[] = [];
      const files = assetFiles(definition.entryFile);
      const chunks = files.deferred;
      // Alternated, so the machine's load weighs on both alike.
      for (let run = 0; run < runs; run++) {
        const timing = await timeImport(definition.entryFile, definition, environment, chunks);
        importMs.push(timing.initMs);
        deferredMs.push(timing.deferredMs);
        if (baseline)
          baselineMs.push((await timeImport(baseline.entryFile, definition, baselineEnvironment, [])).initMs);
      }
      results.push({
        logicalId: definition.logicalId,
        bytes: bytesOf(files.eager),
        importMs,
        medianImportMs: median(importMs) ?? Number.NaN,
        deferred: {
          chunks: chunks.length,
          bytes: bytesOf(chunks),
          medianImportMs: median(deferredMs) ?? Number.NaN,
        },
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

/**
 * The asset's chunks (`chunks/*.mjs` beside the entry file) that the entry file does not import
 * statically, directly or through another chunk: what the bundle loads only on `import()`.
 */
function assetFiles(entryFile: string): { eager: string[]; deferred: string[] } {
  const directory = join(dirname(entryFile), 'chunks');
  const eager = new Set<string>([entryFile]);
  const visit = (file: string) => {
    // esbuild's ESM output: `import{a as b}from"./chunks/chunk-X.mjs";`, `import"./chunk-Y.mjs";`;
    // a dynamic import is `import("./chunks/…")` and does not match.
    for (const [, specifier] of readFileSync(file, 'utf8').matchAll(
      /(?:from|import)\s*"(\.\.?\/[^"]+\.mjs)"/g,
    )) {
      const target = resolve(dirname(file), specifier as string);
      if (!eager.has(target)) {
        eager.add(target);
        visit(target);
      }
    }
  };
  visit(entryFile);
  const chunks = existsSync(directory)
    ? readdirSync(directory)
        .filter((name) => name.endsWith('.mjs'))
        .sort()
        .map((name) => join(directory, name))
    : [];
  return { eager: [...eager], deferred: chunks.filter((file) => !eager.has(file)) };
}

const bytesOf = (files: readonly string[]) => files.reduce((sum, file) => sum + statSync(file).size, 0);

const IMPORT_SCRIPT = [
  "const { performance } = await import('node:perf_hooks');",
  'const started = performance.now();',
  'await import(process.argv[1]);',
  'const initialised = performance.now();',
  'for (const chunk of process.argv.slice(2)) await import(chunk);',
  'const deferred = performance.now();',
  "process.stdout.write('import-ms ' + (initialised - started) + ' deferred-ms ' + (deferred - initialised) + '\\n', () => process.exit(0));",
].join('\n');

function timeImport(
  entryFile: string,
  definition: FunctionDefinition,
  environment: Record<string, string>,
  chunks: readonly string[],
): Promise<{ initMs: number; deferredMs: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        IMPORT_SCRIPT,
        pathToFileURL(entryFile).href,
        ...chunks.map((chunk) => pathToFileURL(chunk).href),
      ],
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
      const match = /import-ms ([\d.]+) deferred-ms ([\d.]+)/.exec(output);
      if (code === 0 && match) resolve({ initMs: Number(match[1]), deferredMs: Number(match[2]) });
      else
        reject(new Error(`importing ${definition.logicalId} failed (exit ${code}): ${output.slice(0, 500)}`));
    });
  });
}
