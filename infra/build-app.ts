import { readFileSync } from 'node:fs';
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks, ServerlessChecks } from 'cdk-nag';
import { readStackConfig } from './config.ts';
import { EniIpamStack } from './stack.ts';

/**
 * One stack per cluster, named after it, so deploying for a second cluster in the same account and
 * region creates a second stack instead of silently retargeting the first. CloudFormation stack
 * names allow letters, digits and hyphens: an underscore of an EKS cluster name becomes a hyphen.
 */
export function stackNameFor(clusterName: string): string {
  return `ServerlessEniIpam-${clusterName.replaceAll('_', '-')}`;
}

/** The defaults in cdk.json, so tests synthesize with exactly what `cdk synth` uses. */
export function cdkJsonContext(): Record<string, unknown> {
  const cdkJson = JSON.parse(readFileSync(new URL('../cdk.json', import.meta.url), 'utf8')) as {
    context: Record<string, unknown>;
  };
  return cdkJson.context;
}

/**
 * The CDK app: the stack from validated context, with cdk-nag's AWS Solutions and Serverless checks, so
 * an unacknowledged finding fails synthesis.
 */
export function buildApp(app: App = new App()): { app: App; stack: EniIpamStack } {
  const config = readStackConfig((key) => app.node.tryGetContext(key));
  const stack = new EniIpamStack(app, stackNameFor(config.clusterName), {
    config,
    // Explicit: the cluster's region (checked against the endpoint), and the account when given
    // (eni-ipam:account, else the CLI's credentials); never "wherever the CLI points".
    env: {
      region: config.region,
      account: config.account ?? process.env.CDK_DEFAULT_ACCOUNT,
    },
    description: `serverless-eni-ipam: Cilium ENI IPAM for EKS cluster ${config.clusterName}`,
  });
  Validations.of(app).addPlugins(
    new AwsSolutionsChecks(app, { verbose: true }),
    new ServerlessChecks(app, { verbose: true }),
  );
  return { app, stack };
}
