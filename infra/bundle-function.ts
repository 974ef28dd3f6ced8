import { build } from 'esbuild';
import { functionBuildOptions } from './function-bundle.ts';

/** `node --import tsx infra/bundle-function.ts <entry.ts> <output directory>`: one function's bundle. */
const [entry, outputDirectory] = process.argv.slice(2);
if (entry === undefined || outputDirectory === undefined) {
  throw new Error('usage: bundle-function.ts <entry.ts> <output directory>');
}
await build(functionBuildOptions(entry, outputDirectory));
