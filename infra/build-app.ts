import { readFileSync } from 'node:fs';
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { readStackConfig } from './config.ts';
import { EniIpamStack } from './stack.ts';

export const STACK_NAME = 'ServerlessEniIpam';

/** The defaults in cdk.json, so tests synthesize with exactly what `cdk synth` uses. */
export function cdkJsonContext(): Record<string, unknown> {
  const cdkJson = JSON.parse(readFileSync(new URL('../cdk.json', import.meta.url), 'utf8')) as {
    context: Record<string, unknown>;
  };
  return cdkJson.context;
}

/**
 * The CDK app: the stack from validated context, with cdk-nag's AWS Solutions checks, so
 * an unacknowledged finding fails synthesis.
 */
export function buildApp(app: App = new App()): { app: App; stack: EniIpamStack } {
  const config = readStackConfig((key) => app.node.tryGetContext(key));
  const stack = new EniIpamStack(app, STACK_NAME, {
    config,
    description: `serverless-eni-ipam: Cilium ENI IPAM for EKS cluster ${config.clusterName}`,
  });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
  return { app, stack };
}
