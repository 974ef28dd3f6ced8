import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import type { StackConfig } from './config.ts';
import { NodeTable } from './node-table.ts';

export interface EniIpamStackProps extends StackProps {
  readonly config: StackConfig;
}

/** Everything serverless-eni-ipam installs, in one stack. */
export class EniIpamStack extends Stack {
  readonly nodeTable: NodeTable;

  constructor(scope: Construct, id: string, props: EniIpamStackProps) {
    super(scope, id, props);
    this.nodeTable = new NodeTable(this, 'Nodes');
    new CfnOutput(this, 'NodeTableName', { value: this.nodeTable.table.tableName });
  }
}
