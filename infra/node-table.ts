import { RemovalPolicy } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { Construct } from 'constructs';
import { nodeTableSchema } from '../functions/aws/node-table-schema.ts';

/**
 * The node table: one item per instance, built from `nodeTableSchema` (the same definition the
 * DynamoDB adapter and the tests use). On-demand, stream with new images for the sync function,
 * point-in-time recovery, TTL for retired records, retained when the stack is deleted.
 */
export interface ExistingNodeTable {
  readonly tableName: string;
  readonly streamArn: string;
}

export class NodeTable extends Construct {
  readonly table: dynamodb.ITable;

  /**
   * `existing`: use that table (a restore or a table a destroyed stack left behind) instead of
   * creating one; the stack never deletes or changes it. The sync counts its CiliumNode record
   * versions per table name, so the nodes are adopted from its records, not frozen.
   */
  constructor(scope: Construct, id: string, existing?: ExistingNodeTable) {
    super(scope, id);
    if (existing) {
      this.table = dynamodb.Table.fromTableAttributes(this, 'Table', {
        tableName: existing.tableName,
        tableStreamArn: existing.streamArn,
      });
      return;
    }
    const { partitionKey, streamViewType, timeToLiveAttribute } = nodeTableSchema;
    this.table = new dynamodb.Table(this, 'Table', {
      partitionKey: { name: partitionKey.name, type: dynamodb.AttributeType.STRING },
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      stream: dynamodb.StreamViewType[streamViewType],
      timeToLiveAttribute,
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: true,
      removalPolicy: RemovalPolicy.RETAIN,
    });
  }
}
