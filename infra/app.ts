import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { readStackConfig } from './config.ts';
import { EniIpamStack } from './stack.ts';

const app = new App();
const config = readStackConfig((key) => app.node.tryGetContext(key));
new EniIpamStack(app, 'ServerlessEniIpam', {
  config,
  description: `serverless-eni-ipam: Cilium ENI IPAM for EKS cluster ${config.clusterName}`,
});
Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { verbose: true }));
app.synth();
