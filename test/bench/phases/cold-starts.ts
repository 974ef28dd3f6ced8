import type { SynthesizedStack } from '../../local-cloud/synthesize.ts';
import { buildBaselineBundles } from '../baseline-bundles.ts';
import { type BundleFigures, measureBundles } from '../bundles.ts';
import { type Figure, figure } from '../report.ts';
import type { Cleanups } from './cleanups.ts';
import type { BenchSettings } from './settings.ts';

/** Measured alone (esbuild ESM, minified; test/README.md, *Bundle references*): the third-party code each function must bundle. */
const SDK_BUNDLE_REFERENCE = {
  ec2AndDynamoDb: { bytes: 908_259, importMs: 165 },
  kubernetesClient: { bytes: 1_043_156, importMs: 145 },
} as const;

/**
 * What a cold start of each function costs: the bytes its bundle makes Node parse and the median
 * of `settings.importRuns` fresh-process imports (see `measureBundles`), alternated with today's
 * naive bundles (built from git history) unless `settings.naiveBaseline` is false.
 */
export async function measureColdStarts(
  stack: SynthesizedStack,
  settings: BenchSettings,
  cleanups: Cleanups,
): Promise<readonly BundleFigures[]> {
  settings.onProgress('timing module initialisation of every function (fresh processes)...');
  const baseline = settings.naiveBaseline ? await buildBaselineBundles(process.cwd()) : undefined;
  if (baseline) cleanups.add(() => baseline.cleanup());
  return measureBundles(stack, settings.importRuns, baseline?.bundles);
}

/** Per function: against the naive bundle (when timed), then bundle size, init time and deferred chunks. */
export function bundleFigures(bundle: BundleFigures): Figure[] {
  const name = bundle.logicalId.replace(/Function[0-9A-F]{8}$/, '');
  const usesEc2 = !name.startsWith('Sync');
  const reference = usesEc2
    ? {
        bytes: SDK_BUNDLE_REFERENCE.ec2AndDynamoDb.bytes + SDK_BUNDLE_REFERENCE.kubernetesClient.bytes,
        importMs:
          SDK_BUNDLE_REFERENCE.ec2AndDynamoDb.importMs + SDK_BUNDLE_REFERENCE.kubernetesClient.importMs,
        what: 'client-ec2 + lib-dynamodb (908,259 B, 165 ms) plus @kubernetes/client-node 1.4.0 (1,043,156 B, 145 ms)',
      }
    : {
        bytes: SDK_BUNDLE_REFERENCE.kubernetesClient.bytes,
        importMs: SDK_BUNDLE_REFERENCE.kubernetesClient.importMs,
        what: '@kubernetes/client-node 1.4.0 alone (1,043,156 B, 145 ms; the DynamoDB client it also needs has no row of its own)',
      };
  const naive = bundle.baseline;
  const baselineRows = naive
    ? [
        figure({
          id: `init_ms_vs_naive_${name}`,
          label: `module initialisation, ${name}, vs today's naive bundle`,
          value: bundle.medianImportMs,
          reference: naive.medianImportMs,
          referenceKind: 'limit',
          unit: 'ms',
          note: `the same fresh-process import, alternated run by run with the naive ${naive.handlerFolder} bundle (the handler at the baseline commit, client-node imported eagerly; ${naive.bytes} bytes; ${naive.importMs.map((ms) => ms.toFixed(0)).join(', ')} ms). Target: at most half (ratio <= 0.50).`,
        }),
      ]
    : [];
  return [
    ...baselineRows,
    figure({
      id: `bundle_bytes_${name}`,
      label: `bundle size, ${name}`,
      value: bundle.bytes,
      reference: reference.bytes,
      referenceKind: 'reference',
      unit: 'bytes',
      note: `what a cold start parses: the synthesized asset's index.mjs and the chunks it imports statically (${bundle.deferred.chunks} more chunks, ${bundle.deferred.bytes} bytes, load on first use). Reference (not a strict floor): test/README.md's bundle references, the third-party code this function must bundle, measured alone: ${reference.what}.`,
    }),
    figure({
      id: `init_ms_${name}`,
      label: `module initialisation, ${name}`,
      value: bundle.medianImportMs,
      reference: reference.importMs,
      referenceKind: 'reference',
      unit: 'ms',
      note: `median of ${bundle.importMs.length} \`await import()\` of index.mjs in a fresh Node ${process.version} process with the function's environment (${bundle.importMs.map((ms) => ms.toFixed(0)).join(', ')} ms). Reference: the same rows of test/README.md's bundle references (import time measured alone on this kind of machine).`,
    }),
    figure({
      id: `deferred_load_ms_${name}`,
      label: `deferred chunks loaded on first use, ${name}`,
      value: bundle.deferred.medianImportMs,
      reference: bundle.medianImportMs,
      referenceKind: 'reference',
      unit: 'ms',
      note: `median time, in the same processes right after the init, to import every chunk the bundle defers (${bundle.deferred.chunks} chunks, ${bundle.deferred.bytes} bytes: the Kubernetes client and the SDK's rarely used credential providers; an upper bound of what a first invocation waits for, which starts the Kubernetes client's load as it begins so that it overlaps its first AWS call). Reference: this function's module initialisation.`,
    }),
  ];
}
