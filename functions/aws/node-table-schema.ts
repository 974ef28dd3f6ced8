/**
 * The node table's key, stream and TTL: the ONE definition that the CDK stack, the DynamoDB
 * adapter and the test setup all build from, so they cannot drift apart.
 */
export const nodeTableSchema = {
  /** Partition key: the EC2 instance id. One item per instance holds the node's whole IPAM state. */
  partitionKey: { name: 'instanceId', type: 'S' },
  /** The sync function reads the item itself (strongly consistent), so the stream needs only new images. */
  streamViewType: 'NEW_IMAGE',
  /** Retired records expire (epoch seconds) after being kept for audit. */
  timeToLiveAttribute: 'expiresAtEpochSeconds',
  /** The optimistic-concurrency counter every write is conditional on. */
  versionAttribute: 'version',
  /**
   * The record layout a writer used. Every write stamps `recordSchemaVersion`; a reader refuses an
   * item with a higher one (a newer release wrote it), so an older function never reads a record it
   * would drop fields of and write back. Items without it are version 1 (the first layout).
   */
  schemaVersionAttribute: 'schemaVersion',
  recordSchemaVersion: 1,
} as const;
