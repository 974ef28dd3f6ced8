/**
 * The node table's key, stream and TTL: the ONE definition that the CDK stack, the DynamoDB
 * adapter and the test setup all build from, so they cannot drift apart.
 */
export const nodeTableSchema = {
  /** Partition key: the EC2 instance id. One item per instance holds the node's whole IPAM state. */
  partitionKey: { name: 'instanceId', type: 'S' },
  /**
   * Both images: the IP ledger diffs each version against the one before it (`core/ip-ledger.ts`).
   * The sync needs neither (it reads the item itself, strongly consistent).
   */
  streamViewType: 'NEW_AND_OLD_IMAGES',
  /** Retired records expire (epoch seconds) after being kept for audit. */
  timeToLiveAttribute: 'expiresAtEpochSeconds',
  /** The optimistic-concurrency counter every write is conditional on. */
  versionAttribute: 'version',
  /**
   * The record layout a writer used. A reader refuses an item with a higher version than it knows
   * (a newer release wrote it), so an older function never reads a record it would drop fields of
   * and write back. Items without it are version 1 (the first layout). Every write stamps the
   * LOWEST layout that holds the record (`recordSchemaVersionOf`), so a rollback to a release that
   * reads only layout 1 keeps serving every node that needs nothing newer.
   * - 1: the first layout;
   * - 2: an ENI may carry `ipv6Prefixes` (a 1.20 agent's /80). A layout-1 reader would drop them and
   *   withdraw the /80 from the CiliumNode, which an agent holding IPv6 pods never recovers from.
   */
  schemaVersionAttribute: 'schemaVersion',
  /** The newest layout this release reads and writes. */
  recordSchemaVersion: 2,
} as const;
