import {
  type AttributeValue,
  DescribeStreamCommand,
  type DynamoDBStreamsClient,
  GetRecordsCommand,
  GetShardIteratorCommand,
  type _Record as StreamRecord,
} from '@aws-sdk/client-dynamodb-streams';
import type { InvocationResult, LambdaErrorPayload } from './lambda-runner.ts';
import type { StreamMappingDefinition } from './template.ts';

/**
 * A DynamoDB-stream event-source mapping, as Lambda runs one (AWS Lambda developer guide,
 * "Using AWS Lambda with Amazon DynamoDB" and "Configuring partial batch response"):
 *
 * - shards are read with GetShardIterator (the mapping's StartingPosition for the shards present
 *   when it starts, TRIM_HORIZON for shards that appear later) and GetRecords, parents before
 *   children, polled `pollIntervalMs` apart (Lambda polls each shard 4 times a second);
 * - records of one shard are split into `ParallelizationFactor` lanes by partition key, so one
 *   key's records stay in order while different keys are processed concurrently; each lane sends
 *   batches of up to `BatchSize` records in Lambda's DynamoDB-stream event shape;
 * - a batch is done when the function succeeds with no `batchItemFailures`; with
 *   ReportBatchItemFailures, a response naming failed sequence numbers retries from the LOWEST of
 *   them (records before it are checkpointed), and a malformed response (empty or unknown
 *   itemIdentifier) fails the whole batch;
 * - a function error retries the batch, first split in two when BisectBatchOnFunctionError is on;
 * - every retry counts against MaximumRetryAttempts (-1: unlimited); a split batch's halves inherit
 *   the count, so bisection narrows a poison record down and still gives up on it. Records given up
 *   on, or older than MaximumRecordAgeInSeconds, go to `discarded` (the on-failure destination) and
 *   the shard moves on; until then a failing batch blocks its lane, as in Lambda.
 */

/** One record as Lambda passes it to the function. */
export interface LambdaStreamRecord {
  readonly eventID: string;
  readonly eventName: 'INSERT' | 'MODIFY' | 'REMOVE';
  readonly eventVersion: '1.1';
  readonly eventSource: 'aws:dynamodb';
  readonly awsRegion: string;
  readonly eventSourceARN: string;
  readonly dynamodb: {
    readonly ApproximateCreationDateTime?: number;
    readonly Keys: Record<string, unknown>;
    readonly NewImage?: Record<string, unknown>;
    readonly OldImage?: Record<string, unknown>;
    readonly SequenceNumber: string;
    readonly SizeBytes?: number;
    readonly StreamViewType?: string;
  };
}

export interface DiscardedBatch {
  readonly reason: 'retries-exhausted' | 'record-age';
  readonly shardId: string;
  readonly sequenceNumbers: readonly string[];
  readonly keys: readonly Record<string, unknown>[];
  readonly attempts: number;
  readonly lastError?:
    | LambdaErrorPayload
    | { readonly errorType: 'BatchItemFailures'; readonly errorMessage: string };
  readonly atEpochMs: number;
}

export interface StreamPollerStats {
  readonly recordsRead: number;
  readonly batchesInvoked: number;
  readonly batchFailures: number;
  readonly recordsDiscarded: number;
}

export interface StreamPollerOptions {
  readonly client: DynamoDBStreamsClient;
  readonly streamArn: string;
  readonly region: string;
  readonly mapping: StreamMappingDefinition;
  readonly invoke: (event: { Records: LambdaStreamRecord[] }) => Promise<InvocationResult>;
  /** Default 250 ms. */
  readonly pollIntervalMs?: number;
  /** Wait before retry number `attempt` (1-based); default 50 ms × attempt, at most 1 s. */
  readonly retryDelayMs?: (attempt: number) => number;
  /**
   * Fault injection, at-least-once delivery: asked after each batch the function processed
   * successfully; `true` delivers the same batch once more (Lambda may redeliver records, e.g.
   * when a checkpoint is lost). Default: never.
   */
  readonly redeliverAfterSuccess?: (records: readonly LambdaStreamRecord[]) => boolean;
}

interface ShardCursor {
  readonly shardId: string;
  readonly parentShardId?: string;
  iterator?: string;
  closed: boolean;
}

interface PendingBatch {
  readonly records: LambdaStreamRecord[];
  readonly retries: number;
  /** Already a redelivery of a processed batch (never redelivered again). */
  readonly redelivery?: boolean;
}

export class StreamPoller {
  readonly discarded: DiscardedBatch[] = [];
  private readonly shards = new Map<string, ShardCursor>();
  private started = false;
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  /** Serializes polling passes: the background timer and `drain` never read a shard twice at once. */
  private passChain: Promise<unknown> = Promise.resolve();
  private counters = { recordsRead: 0, batchesInvoked: 0, batchFailures: 0, recordsDiscarded: 0 };

  constructor(private readonly options: StreamPollerOptions) {}

  /** Starts polling in the background (a disabled mapping never polls). */
  start(): void {
    if (!this.options.mapping.enabled || this.timer !== undefined) return;
    const tick = () => {
      if (this.stopped) return;
      void this.pass()
        .catch((error: unknown) => {
          if (!this.stopped) console.error(`stream poller: ${(error as Error).message}`);
        })
        .finally(() => {
          if (!this.stopped) this.timer = setTimeout(tick, this.options.pollIntervalMs ?? 250);
        });
    };
    this.timer = setTimeout(tick, 0);
  }

  /** Polls until a full pass over every shard reads no record, i.e. everything written so far was processed. */
  async drain(): Promise<void> {
    while ((await this.pass()) > 0) {
      // keep reading: records processed may have caused new writes
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    await this.passChain.catch(() => {});
  }

  stats(): StreamPollerStats {
    return { ...this.counters };
  }

  /** One serialized pass over the readable shards; resolves to the number of records read. */
  private pass(): Promise<number> {
    const run = this.passChain.then(() => this.readAllShards());
    this.passChain = run.catch(() => {});
    return run;
  }

  private async readAllShards(): Promise<number> {
    if (this.stopped) return 0;
    await this.discoverShards();
    let read = 0;
    const visited = new Set<string>();
    for (let progressed = true; progressed; ) {
      progressed = false;
      for (const shard of this.shards.values()) {
        if (shard.closed || visited.has(shard.shardId)) continue;
        const parent = shard.parentShardId === undefined ? undefined : this.shards.get(shard.parentShardId);
        if (parent !== undefined && !parent.closed) continue; // parents first: per-key order
        visited.add(shard.shardId);
        read += await this.readShard(shard);
        // A shard that just closed makes its children readable in this same pass.
        if (shard.closed) progressed = true;
      }
    }
    return read;
  }

  private async discoverShards(): Promise<void> {
    const { client, streamArn, mapping } = this.options;
    let exclusiveStartShardId: string | undefined;
    const firstDiscovery = !this.started;
    do {
      const page = await client.send(
        new DescribeStreamCommand({ StreamArn: streamArn, ExclusiveStartShardId: exclusiveStartShardId }),
      );
      for (const shard of page.StreamDescription?.Shards ?? []) {
        if (shard.ShardId === undefined || this.shards.has(shard.ShardId)) continue;
        const iteratorType = firstDiscovery ? mapping.startingPosition : 'TRIM_HORIZON';
        const { ShardIterator } = await client.send(
          new GetShardIteratorCommand({
            StreamArn: streamArn,
            ShardId: shard.ShardId,
            ShardIteratorType: iteratorType,
          }),
        );
        this.shards.set(shard.ShardId, {
          shardId: shard.ShardId,
          ...(shard.ParentShardId ? { parentShardId: shard.ParentShardId } : {}),
          ...(ShardIterator ? { iterator: ShardIterator } : {}),
          closed: ShardIterator === undefined,
        });
      }
      exclusiveStartShardId = page.StreamDescription?.LastEvaluatedShardId;
    } while (exclusiveStartShardId !== undefined);
    this.started = true;
  }

  private async readShard(shard: ShardCursor): Promise<number> {
    const { mapping } = this.options;
    const page = await this.options.client.send(
      new GetRecordsCommand({
        ShardIterator: shard.iterator,
        Limit: Math.min(1000, mapping.batchSize * mapping.parallelizationFactor),
      }),
    );
    if (page.NextShardIterator === undefined) shard.closed = true;
    else shard.iterator = page.NextShardIterator;
    const records = (page.Records ?? []).map((record) => this.toLambdaRecord(record));
    if (records.length === 0) return 0;
    this.counters.recordsRead += records.length;
    const lanes = splitIntoLanes(records, mapping.parallelizationFactor);
    await Promise.all(lanes.map((lane) => this.processLane(shard.shardId, lane)));
    return records.length;
  }

  private async processLane(shardId: string, records: LambdaStreamRecord[]): Promise<void> {
    const { batchSize } = this.options.mapping;
    for (let start = 0; start < records.length; start += batchSize) {
      await this.processBatch(shardId, records.slice(start, start + batchSize));
    }
  }

  private async processBatch(shardId: string, records: LambdaStreamRecord[]): Promise<void> {
    const { mapping } = this.options;
    const work: PendingBatch[] = [{ records, retries: 0 }];
    while (work.length > 0 && !this.stopped) {
      const batch = work.shift() as PendingBatch;
      const fresh = this.dropExpired(shardId, batch);
      if (fresh.length === 0) continue;
      this.counters.batchesInvoked++;
      const result = await this.options.invoke({ Records: fresh });
      const failedFrom = result.status === 'succeeded' ? this.firstFailedIndex(fresh, result.payload) : 0;
      if (failedFrom === undefined) {
        // The whole batch succeeded: checkpoint past it (unless a redelivery is injected).
        if (!batch.redelivery && this.options.redeliverAfterSuccess?.(fresh)) {
          work.unshift({ records: fresh, retries: batch.retries, redelivery: true });
        }
        continue;
      }
      this.counters.batchFailures++;
      const error =
        result.status === 'failed'
          ? result.error
          : {
              errorType: 'BatchItemFailures' as const,
              errorMessage: `batchItemFailures from ${fresh[failedFrom]?.dynamodb.SequenceNumber ?? '(malformed response)'}`,
            };
      const remaining = fresh.slice(failedFrom);
      const retries = batch.retries + 1;
      if (mapping.maximumRetryAttempts >= 0 && batch.retries >= mapping.maximumRetryAttempts) {
        this.discard(shardId, 'retries-exhausted', remaining, batch.retries + 1, error);
        continue;
      }
      await this.sleep((this.options.retryDelayMs ?? defaultRetryDelayMs)(retries));
      const bisect = result.status === 'failed' && mapping.bisectBatchOnFunctionError && remaining.length > 1;
      if (bisect) {
        const half = Math.ceil(remaining.length / 2);
        work.unshift(
          { records: remaining.slice(0, half), retries },
          { records: remaining.slice(half), retries },
        );
      } else {
        work.unshift({ records: remaining, retries });
      }
    }
  }

  /**
   * Where the retry starts, or `undefined` when the batch succeeded. Without
   * ReportBatchItemFailures any successful response counts as success.
   */
  private firstFailedIndex(records: readonly LambdaStreamRecord[], payload: unknown): number | undefined {
    if (!this.options.mapping.reportBatchItemFailures) return undefined;
    const failures = (payload as { batchItemFailures?: unknown } | null)?.batchItemFailures;
    if (failures === undefined || failures === null) return undefined;
    if (!Array.isArray(failures)) return 0;
    if (failures.length === 0) return undefined;
    let lowest: number | undefined;
    for (const failure of failures) {
      const identifier = (failure as { itemIdentifier?: unknown } | null)?.itemIdentifier;
      const index = records.findIndex((record) => record.dynamodb.SequenceNumber === identifier);
      if (typeof identifier !== 'string' || identifier === '' || index < 0) return 0; // malformed: whole batch
      lowest = lowest === undefined ? index : Math.min(lowest, index);
    }
    return lowest;
  }

  private dropExpired(shardId: string, batch: PendingBatch): LambdaStreamRecord[] {
    const maxAgeSeconds = this.options.mapping.maximumRecordAgeSeconds;
    if (maxAgeSeconds < 0) return batch.records;
    const oldestAllowed = Date.now() / 1000 - maxAgeSeconds;
    const expired = batch.records.filter(
      (record) => (record.dynamodb.ApproximateCreationDateTime ?? Infinity) < oldestAllowed,
    );
    if (expired.length > 0) this.discard(shardId, 'record-age', expired, batch.retries);
    return batch.records.filter((record) => !expired.includes(record));
  }

  private discard(
    shardId: string,
    reason: DiscardedBatch['reason'],
    records: readonly LambdaStreamRecord[],
    attempts: number,
    lastError?: DiscardedBatch['lastError'],
  ): void {
    this.counters.recordsDiscarded += records.length;
    this.discarded.push({
      reason,
      shardId,
      sequenceNumbers: records.map((record) => record.dynamodb.SequenceNumber),
      keys: records.map((record) => record.dynamodb.Keys),
      attempts,
      ...(lastError === undefined ? {} : { lastError }),
      atEpochMs: Date.now(),
    });
  }

  private toLambdaRecord(record: StreamRecord): LambdaStreamRecord {
    const stream = record.dynamodb ?? {};
    const created = stream.ApproximateCreationDateTime;
    return {
      eventID: record.eventID ?? '',
      eventName: record.eventName as LambdaStreamRecord['eventName'],
      eventVersion: '1.1',
      eventSource: 'aws:dynamodb',
      awsRegion: this.options.region,
      eventSourceARN: this.options.streamArn,
      dynamodb: {
        ...(created ? { ApproximateCreationDateTime: Math.floor(created.getTime() / 1000) } : {}),
        Keys: toJsonAttributeMap(stream.Keys),
        ...(stream.NewImage ? { NewImage: toJsonAttributeMap(stream.NewImage) } : {}),
        ...(stream.OldImage ? { OldImage: toJsonAttributeMap(stream.OldImage) } : {}),
        SequenceNumber: stream.SequenceNumber ?? '',
        ...(stream.SizeBytes === undefined ? {} : { SizeBytes: stream.SizeBytes }),
        ...(stream.StreamViewType ? { StreamViewType: stream.StreamViewType } : {}),
      },
    };
  }

  private sleep(milliseconds: number): Promise<void> {
    return new Promise((resolve) => setTimeout(resolve, milliseconds));
  }
}

function defaultRetryDelayMs(attempt: number): number {
  return Math.min(1_000, 50 * attempt);
}

/**
 * Splits records into `factor` lanes by partition key (a stable hash of the Keys), keeping the
 * shard order within each lane, as Lambda does with ParallelizationFactor.
 */
export function splitIntoLanes(
  records: readonly LambdaStreamRecord[],
  factor: number,
): LambdaStreamRecord[][] {
  const lanes: LambdaStreamRecord[][] = Array.from({ length: Math.max(1, factor) }, () => []);
  for (const record of records) {
    const key = JSON.stringify(record.dynamodb.Keys);
    let hash = 0;
    for (let index = 0; index < key.length; index++) hash = (hash * 31 + key.charCodeAt(index)) >>> 0;
    lanes[hash % lanes.length]?.push(record);
  }
  return lanes.filter((lane) => lane.length > 0);
}

/** AttributeValues as Lambda's JSON carries them (binary as base64), not as SDK objects. */
function toJsonAttributeMap(map: Record<string, AttributeValue> | undefined): Record<string, unknown> {
  return Object.fromEntries(Object.entries(map ?? {}).map(([name, value]) => [name, toJsonAttribute(value)]));
}

function toJsonAttribute(value: unknown): unknown {
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  if (Array.isArray(value)) return value.map(toJsonAttribute);
  if (value instanceof Set) return [...value].map(toJsonAttribute);
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, toJsonAttribute(inner)]));
  }
  return value;
}
