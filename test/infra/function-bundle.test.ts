import { build, type Metafile } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { functionBuildOptions, withLiteralTraitKeys } from '../../infra/function-bundle.ts';

/**
 * The functions' bundling: the SDK schemas' computed trait keys written as literals (so esbuild can
 * drop the schemas of operations no function calls), and code splitting (what a handler loads with
 * `import()` stays out of what a cold start parses). That the bundled clients still speak to EC2,
 * DynamoDB and Kubernetes is what every local-cloud test shows: they run these bundles.
 */

describe('withLiteralTraitKeys', () => {
  it('writes a computed key naming a string constant of the module as that literal', () => {
    const source = [
      'const _xN = "xmlName";',
      'const _eQN = "ec2QueryName";',
      'export var A$ = [3, n0, _A, 0, [_xN], [[0, { [_xN]: _it }], [2, { [_eQN]: `DryRun`,',
      '        [_xN]: _dR }]]];',
    ].join('\n');
    expect(withLiteralTraitKeys(source)).toBe(
      [
        'const _xN = "xmlName";',
        'const _eQN = "ec2QueryName";',
        'export var A$ = [3, n0, _A, 0, [_xN], [[0, { "xmlName": _it }], [2, { "ec2QueryName": `DryRun`,',
        '        "xmlName": _dR }]]];',
      ].join('\n'),
    );
  });

  it('leaves keys naming anything else, and array elements, as they are', () => {
    const source = 'let _v = f();\nconst x = { [_v]: 1, [_unknown]: 2 };\nconst y = [_v, [_unknown]];';
    expect(withLiteralTraitKeys(source)).toBe(source);
  });
});

describe('a function bundle', () => {
  const entry = (contents: string) => ({ contents, resolveDir: process.cwd(), loader: 'ts' as const });
  const bytesFrom = (metafile: Metafile, fragment: string) =>
    Object.values(metafile.outputs)
      .flatMap((output) => Object.entries(output.inputs))
      .filter(([path]) => path.includes(fragment))
      .reduce((sum, [, input]) => sum + input.bytesInOutput, 0);

  it("keeps only the EC2 schemas of the operations it calls (the SDK alone keeps every operation's)", async () => {
    const source =
      "import { DescribeInstancesCommand, EC2Client } from '@aws-sdk/client-ec2';\nexport const used = [DescribeInstancesCommand, EC2Client];";
    const options = functionBuildOptions('unused.ts', '/nonexistent');
    const bundle = async (plugins: typeof options.plugins) =>
      (
        await build({
          ...options,
          entryPoints: undefined,
          stdin: entry(source),
          splitting: false,
          outdir: undefined,
          write: false,
          metafile: true,
          plugins,
        })
      ).metafile;
    const withPlugin = bytesFrom(await bundle(options.plugins), 'client-ec2/dist-es/schemas/');
    const withoutPlugin = bytesFrom(await bundle([]), 'client-ec2/dist-es/schemas/');
    expect(withoutPlugin).toBeGreaterThan(400_000);
    expect(withPlugin).toBeLessThan(50_000);
  });

  it('loads what a handler imports with import() in a chunk of its own, not in index.mjs', async () => {
    const result = await build({
      ...functionBuildOptions('functions/sync/index.ts', '/tmp/function-bundle-test'),
      write: false,
      metafile: true,
    });
    const outputs = Object.entries(result.metafile.outputs);
    const [, index] = outputs.find(([path]) => path.endsWith('index.mjs')) ?? [];
    expect(index).toBeDefined();
    expect(Object.keys(index?.inputs ?? {}).some((path) => path.includes('@kubernetes/client-node'))).toBe(
      false,
    );
    const chunksWithClient = outputs.filter(
      ([path, output]) =>
        path.includes('/chunks/') &&
        Object.keys(output.inputs).some((input) => input.includes('@kubernetes/client-node')),
    );
    expect(chunksWithClient.length).toBeGreaterThan(0);
  });
});
