import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { AssetHashType, DockerImage } from 'aws-cdk-lib';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type { BuildOptions, Plugin } from 'esbuild';

/**
 * A function's code: its `functions/<folder>/index.ts` bundled by the locally installed esbuild (no
 * Docker) into `index.mjs` plus chunks. Why not `NodejsFunction`'s bundling: it writes one file
 * (`--outfile`), and code splitting needs an output directory.
 *
 * - **Code splitting**: what a handler imports with `import()` (the Kubernetes client, loaded by
 *   `LazyCiliumNodeApi` when an invocation starts; the SDK's rarely used credential providers) goes
 *   into chunks of its own, so a cold start parses only the eager part; a single file would still
 *   parse every deferred module at init, only evaluating it later.
 * - ESM, minified, `target node22`, the AWS SDK bundled and tree-shaken (`mainFields: module`).
 * - **The SDK's schemas tree-shaken** (`treeShakableSdkSchemas`): without it, client-ec2's schemas
 *   of every EC2 operation are kept whatever the function calls, more than half of its bundle.
 * - **Source maps** for stack traces (`--enable-source-maps` is set on every function), without the
 *   sources embedded: Node parses a module's map when it loads, and the embedded sources were most
 *   of its size; positions and names, which stack traces need, are all kept.
 */
export function bundledFunctionCode(handlerFolder: string): lambda.Code {
  const entry = fileURLToPath(new URL(`../functions/${handlerFolder}/index.ts`, import.meta.url));
  return lambda.Code.fromAsset(dirname(entry), {
    assetHashType: AssetHashType.OUTPUT,
    bundling: {
      // Required by the type, never used: local bundling always succeeds or throws.
      image: DockerImage.fromRegistry('local-bundling-only'),
      local: {
        // In a child process, as esbuild's synchronous API takes no plugins (`bundle-function.ts`).
        tryBundle(outputDirectory) {
          const bundled = spawnSync(
            process.execPath,
            ['--import', 'tsx', BUNDLE_SCRIPT, entry, outputDirectory],
            { cwd: PROJECT_ROOT, encoding: 'utf8' },
          );
          if (bundled.status !== 0) {
            throw new Error(`bundling ${entry} failed: ${bundled.stderr || bundled.error?.message}`);
          }
          return true;
        },
      },
    },
  });
}

const PROJECT_ROOT = fileURLToPath(new URL('..', import.meta.url));
const BUNDLE_SCRIPT = fileURLToPath(new URL('bundle-function.ts', import.meta.url));

/** The esbuild options of one function's bundle (also what the bench's bundle figures measure). */
export function functionBuildOptions(entry: string, outputDirectory: string): BuildOptions {
  return {
    entryPoints: { index: entry },
    outdir: outputDirectory,
    outExtension: { '.js': '.mjs' },
    chunkNames: 'chunks/[name]-[hash]',
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node22',
    mainFields: ['module', 'main'],
    minify: true,
    sourcemap: true,
    sourcesContent: false,
    // ESM output of CommonJS dependencies needs a `require` in scope (in every chunk).
    banner: { js: "import { createRequire } from 'module';const require = createRequire(import.meta.url);" },
    plugins: [treeShakableSdkSchemas],
    logLevel: 'error',
  };
}

/**
 * The AWS SDK's generated schemas (`@aws-sdk/client-<service>/dist-es/schemas/schemas_N.js`) write
 * their trait objects with computed keys naming module constants (`const _xN = "xmlName";` then
 * `{ [_xN]: _it }`). A computed key might run code (a getter, `toString`), so esbuild keeps every
 * declaration that holds one: all of them, so importing one command keeps the schemas of all (for
 * client-ec2, about 540 KB of the bundle, compiled at every cold start). Here each such key whose
 * constant is a plain string literal of the same module is written as that literal, which means
 * the same, and the schemas the functions never reach are dropped. This is what the SDK's
 * generator itself is being changed to emit (aws/aws-sdk-js-v3#7607, smithy-lang/smithy-typescript#1889).
 */
const treeShakableSdkSchemas: Plugin = {
  name: 'tree-shakable-sdk-schemas',
  setup(build) {
    build.onLoad(
      { filter: /[\\/]@aws-sdk[\\/]client-[^\\/]+[\\/]dist-es[\\/]schemas[\\/]schemas_\d+\.js$/ },
      (args) => ({
        contents: withLiteralTraitKeys(readFileSync(args.path, 'utf8')),
        loader: 'js',
      }),
    );
  },
};

/** `source` with every `{ [_name]:` / `, [_name]:` key whose `const _name = "…";` is a string literal written as that literal. */
export function withLiteralTraitKeys(source: string): string {
  const literals = new Map<string, string>();
  for (const [, name, literal] of source.matchAll(/^const (_\w+) = ("(?:[^"\\\n]|\\.)*");$/gm)) {
    literals.set(name as string, literal as string);
  }
  return source.replace(/([{,]\s*)\[(_\w+)\]:/g, (whole, before: string, name: string) => {
    const literal = literals.get(name);
    return literal === undefined ? whole : `${before}${literal}:`;
  });
}
