import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CloudFormationTemplate } from './template.ts';

/** A synthesized stack: its cloud assembly folder (holding the asset folders) and its template. */
export interface SynthesizedStack {
  readonly assemblyDirectory: string;
  readonly stackName: string;
  readonly template: CloudFormationTemplate;
}

export interface SynthesizeOptions {
  /** Where the cloud assembly goes; default a fresh temp folder. */
  readonly outdir?: string;
  /** Context on top of cdk.json's (and of the local defaults below). */
  readonly context?: Readonly<Record<string, unknown>>;
}

/**
 * Context the local cloud synthesizes with, on top of cdk.json:
 * - `aws:cdk:enable-asset-metadata`: what the CDK CLI sets, so each function names its bundled
 *   asset folder (`aws:asset:path`);
 * - `eni-ipam:kubernetesAccess: none`: no EKS access entries and no EKS_* variables, so the
 *   functions reach Kubernetes through KUBECONFIG (the Kubernetes emulator);
 * - `eni-ipam:vpcId`: the seeded cluster VPC.
 */
export const LOCAL_SYNTH_CONTEXT = {
  'aws:cdk:enable-asset-metadata': true,
  'eni-ipam:kubernetesAccess': 'none',
  // The VPC the local cloud seeds first (the EC2 emulator numbers ids in creation order): the
  // roles may create ENIs only there (IAM ec2:Vpc), as in the real account.
  'eni-ipam:vpcId': 'vpc-00000000000000001',
} as const;

/**
 * Synthesizes the project's CDK app in this process, exactly as `cdk synth` builds it (same app
 * builder, cdk.json context, cdk-nag validation, esbuild bundling of every function), into
 * `outdir`. Takes a few seconds: the bundling is real.
 */
export async function synthesizeStack(options: SynthesizeOptions = {}): Promise<SynthesizedStack> {
  const [{ App }, { buildApp, cdkJsonContext }] = await Promise.all([
    import('aws-cdk-lib'),
    import('../../infra/build-app.ts'),
  ]);
  const outdir = options.outdir ?? mkdtempSync(join(tmpdir(), 'local-cloud-cdk-out-'));
  const { app, stack: construct } = buildApp(
    new App({ outdir, context: { ...cdkJsonContext(), ...LOCAL_SYNTH_CONTEXT, ...options.context } }),
  );
  const assembly = app.synth();
  const stack = assembly.getStackByName(construct.stackName);
  return {
    assemblyDirectory: assembly.directory,
    stackName: construct.stackName,
    template: stack.template as CloudFormationTemplate,
  };
}

/** Reads a stack from an existing cloud assembly (e.g. `npx cdk synth -o <dir>` output). */
export function readSynthesizedStack(assemblyDirectory: string, stackName: string): SynthesizedStack {
  const template = JSON.parse(
    readFileSync(join(assemblyDirectory, `${stackName}.template.json`), 'utf8'),
  ) as CloudFormationTemplate;
  return { assemblyDirectory, stackName, template };
}
