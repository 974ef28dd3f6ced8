import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const RULES = fileURLToPath(new URL('./rules/invariants.guard', import.meta.url));
const RULE_TESTS = fileURLToPath(new URL('./rules/invariants.tests.yaml', import.meta.url));

/**
 * AWS's cfn-guard, the prebuilt static binary the npm package @cdklabs/cdk-validator-cfnguard
 * ships for Linux and macOS (x86_64 and aarch64); nothing is downloaded. Only its binary is used, which
 * knip does not count as a use: knip.json lists the package in ignoreDependencies for that reason.
 */
function guardBinary(): string {
  let root: string;
  try {
    root = dirname(createRequire(import.meta.url).resolve('@cdklabs/cdk-validator-cfnguard/package.json'));
  } catch {
    throw new Error('cfn-guard comes with the devDependency @cdklabs/cdk-validator-cfnguard: run npm ci');
  }
  const platform = process.platform === 'darwin' ? 'macos' : 'ubuntu';
  const architecture = process.arch === 'arm64' ? 'aarch64' : 'x86_64';
  return join(root, 'bin', platform, architecture, 'cfn-guard');
}

function run(binary: string, args: readonly string[]): number {
  const result = spawnSync(binary, args, { encoding: 'utf8' });
  if (result.error) throw new Error(`cfn-guard did not run (${binary}): ${result.error.message}`);
  if (result.status !== 0) process.stdout.write(result.stdout + result.stderr);
  return result.status ?? 1;
}

/** The rules' own tests first (each rule passes its good template, fails its bad one), then every mode. */
export function runGuard(synthesized: readonly { mode: string; template: string }[]): number {
  const binary = guardBinary();
  const version = spawnSync(binary, ['--version'], { encoding: 'utf8' }).stdout.trim();
  if (run(binary, ['test', '-r', RULES, '-t', RULE_TESTS]) !== 0) {
    console.log(`${version}: the rules' own tests failed (test/template-checks/rules/invariants.tests.yaml)`);
    return 1;
  }
  const failed = synthesized.filter(
    ({ template }) => run(binary, ['validate', '-r', RULES, '-d', template, '--show-summary', 'fail']) !== 0,
  );
  console.log(
    `${version}: rule tests pass; ${synthesized.length} templates: ` +
      (failed.length === 0 ? 'clean' : `failed in ${failed.map(({ mode }) => mode).join(', ')}`),
  );
  return failed.length === 0 ? 0 : 1;
}
