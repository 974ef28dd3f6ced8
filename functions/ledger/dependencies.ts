import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoIpLedger } from '../aws/ip-ledger-table.ts';
import { Environment } from '../runtime/environment.ts';

export interface LedgerFunctionDependencies {
  readonly ledger: DynamoIpLedger;
  readonly retentionDays: number;
}

/**
 * The ledger function's dependencies from its environment: `LEDGER_TABLE_NAME` (required) and
 * `LEDGER_RETENTION_DAYS` (default 90). Throws `ConfigurationError` naming the first missing or
 * malformed variable, at cold start.
 */
export function buildLedgerDependencies(
  variables: Readonly<Record<string, string | undefined>>,
): LedgerFunctionDependencies {
  const environment = new Environment(variables);
  const tableName = environment.string('LEDGER_TABLE_NAME');
  const retentionDays = Math.max(1, environment.integer('LEDGER_RETENTION_DAYS'));
  return { ledger: new DynamoIpLedger(new DynamoDBClient({}), tableName), retentionDays };
}
