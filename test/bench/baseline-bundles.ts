import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';

/**
 * Today's naive bundles, to measure the cold-start work against: the handlers as they were at
 * `BASELINE_COMMIT` (every client built at module scope, @kubernetes/client-node imported
 * eagerly), taken from git history and bundled exactly as the stack bundles (ESM, minified, the
 * SDK's module build, source maps). Undefined when the checkout has no history to take them from.
 */
export const BASELINE_COMMIT = '2bb2b789c1fd8f91ccf4cd0b670dd97e3999cc14';

export interface BaselineBundle {
  readonly handlerFolder: 'allocate' | 'sweep' | 'sync';
  readonly entryFile: string;
  readonly bytes: number;
}

export interface BaselineBundles {
  readonly bundles: readonly BaselineBundle[];
  cleanup(): void;
}

export async function buildBaselineBundles(repositoryRoot: string): Promise<BaselineBundles | undefined> {
  const directory = mkdtempSync(join(tmpdir(), 'bench-baseline-'));
  try {
    const archive = execFileSync('git', ['-C', repositoryRoot, 'archive', BASELINE_COMMIT, 'functions'], {
      maxBuffer: 64 * 1024 * 1024,
    });
    execFileSync('tar', ['-x', '-C', directory], { input: archive });
  } catch {
    rmSync(directory, { recursive: true, force: true });
    return undefined;
  }
  const bundles: BaselineBundle[] = [];
  for (const handlerFolder of ['allocate', 'sweep', 'sync'] as const) {
    const entryFile = join(directory, 'out', handlerFolder, 'index.mjs');
    await build({
      entryPoints: [join(directory, 'functions', handlerFolder, 'index.ts')],
      outfile: entryFile,
      bundle: true,
      minify: true,
      sourcemap: true,
      platform: 'node',
      target: 'node22',
      format: 'esm',
      mainFields: ['module', 'main'],
      nodePaths: [resolve(repositoryRoot, 'node_modules')],
      banner: {
        js: "import { createRequire } from 'module';const require = createRequire(import.meta.url);",
      },
      logLevel: 'error',
    });
    bundles.push({ handlerFolder, entryFile, bytes: statSync(entryFile).size });
  }
  return { bundles, cleanup: () => rmSync(directory, { recursive: true, force: true }) };
}
