import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { App } from 'aws-cdk-lib';
import { buildApp, cdkJsonContext } from '../../infra/build-app.ts';
import { DEPLOY_MODES } from './deploy-modes.ts';
import { runGuard } from './guard.ts';

/**
 * `npm run templates` (part of `npm run check`): synthesizes the stack in every deploy mode the
 * tests synthesize (cdk-nag's AwsSolutions and Serverless packs run in each synthesis: an
 * unacknowledged finding fails it), then lints each template with AWS's cfn-lint at the pinned
 * version, and checks our own invariants with cfn-guard (test/template-checks/rules).
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const REQUIREMENTS = join(ROOT, '.ci/cfn-lint-requirements.txt');
const INSTALL = `python3 -m pip install -r .ci/cfn-lint-requirements.txt (then pyenv rehash, if pyenv is used)`;

/**
 * cfn-lint checks not run, each with why. Gating is on errors and warnings (informational checks are
 * not run). Per-resource exceptions live in the stack as `Metadata.cfn-lint.config.ignore_checks`.
 */
const IGNORED_CHECKS: Readonly<Record<string, string>> = {
  W3005:
    "aws-cdk-lib makes each function DependsOn its role and the role's default policy (so the policy " +
    'exists before the function can run); the role half is also a GetAtt, which W3005 reports as ' +
    'redundant. Harmless, and written by aws-cdk-lib, not by the stack',
};

function pinnedVersion(): string {
  const pin = /^cfn-lint==(\S+)$/m.exec(readFileSync(REQUIREMENTS, 'utf8'))?.[1];
  if (!pin) throw new Error(`${REQUIREMENTS} pins no cfn-lint version (cfn-lint==x.y.z)`);
  return pin;
}

/** Fails with how to install cfn-lint when it is missing or not the pinned version. */
function checkCfnLint(pin: string): void {
  const probe = spawnSync('cfn-lint', ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error(`cfn-lint is not installed (npm run check runs it): ${INSTALL}`);
  }
  const installed = /cfn-lint (\S+)/.exec(probe.stdout)?.[1];
  if (installed !== pin) {
    throw new Error(
      `cfn-lint ${installed} is installed, ${pin} is pinned (.ci/cfn-lint-requirements.txt): ${INSTALL}`,
    );
  }
}

/** Synthesizes every mode (bundling skipped: the templates are the same) into `directory`. */
function synthesizeModes(directory: string): { mode: string; template: string }[] {
  return Object.entries(DEPLOY_MODES).map(([mode, context]) => {
    const outdir = join(directory, mode);
    const app = new App({
      outdir,
      context: { ...cdkJsonContext(), ...context, 'aws:cdk:bundling-stacks': [] },
    });
    const { stack } = buildApp(app);
    app.synth();
    return { mode, template: join(outdir, stack.templateFile) };
  });
}

function lint(templates: readonly string[]): number {
  const args = [
    '--format',
    'parseable',
    ...(Object.keys(IGNORED_CHECKS).length > 0 ? ['--ignore-checks', ...Object.keys(IGNORED_CHECKS)] : []),
    '--',
    ...templates,
  ];
  const run = spawnSync('cfn-lint', args, { encoding: 'utf8' });
  process.stdout.write(run.stdout);
  process.stderr.write(run.stderr);
  return run.status ?? 1;
}

function main(): number {
  const pin = pinnedVersion();
  checkCfnLint(pin);
  const directory = mkdtempSync(join(tmpdir(), 'eni-ipam-templates-'));
  try {
    const synthesized = synthesizeModes(directory);
    const templates = synthesized.map(({ template }) => template);
    const lintStatus = lint(templates);
    console.log(
      `cfn-lint ${pin}: ${templates.length} templates (${synthesized.map(({ mode }) => mode).join(', ')}): ` +
        (lintStatus === 0 ? 'clean' : `failed (exit ${lintStatus})`),
    );
    const guardStatus = runGuard(synthesized);
    return lintStatus === 0 && guardStatus === 0 ? 0 : 1;
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

try {
  process.exitCode = main();
} catch (error) {
  console.error(`npm run templates: ${(error as Error).message}`);
  process.exitCode = 1;
}
