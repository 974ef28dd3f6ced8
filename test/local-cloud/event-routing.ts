import type { DynamoDBStreamsClient } from '@aws-sdk/client-dynamodb-streams';
import { EC2_STATE_CHANGE_DETAIL_TYPE } from '../../functions/core/events.ts';
import type { Ec2Emulator } from '../emulators/ec2/index.ts';
import {
  type AsyncInvocationFailure,
  AsyncInvoker,
  type BusEvent,
  EventBus,
  type SyncInvoke,
} from './event-bus.ts';
import { LOCAL_ACCOUNT, LOCAL_REGION, physicalName } from './local-account.ts';
import { Scheduler, scheduledEvent } from './scheduler.ts';
import type { NodeTable } from './stand-ins.ts';
import {
  type DiscardedBatch,
  type LambdaStreamRecord,
  StreamPoller,
  type StreamPollerStats,
} from './stream-poller.ts';
import type { SynthesizedStack } from './synthesize.ts';
import { startOrUndo } from './teardown.ts';
import type { StackModel } from './template.ts';

/**
 * How events reach the functions, as the template wires them: the default event bus and its
 * rules (EC2 state changes published as instances change state in the EC2 emulator), the
 * schedule rules, Lambda's asynchronous invocation with its retries, and the node table's stream
 * event-source mapping. Every invocation goes through `invoke` (the function fleet).
 */

export interface EventRoutingOptions {
  /** Schedules divided by this: 60 runs `rate(1 minute)` every second. Default 1. Also scales Lambda's async retry waits. */
  readonly timeScale?: number;
  /**
   * Include the CiliumNode watcher's schedule (default false): its invocations hold a watch for
   * minutes, so `settle()` would wait for them. Tests and the bench invoke `Watch` themselves.
   */
  readonly watchSchedule?: boolean;
  /** Start schedule timers (default true); `fireSchedules()` works either way. */
  readonly runSchedules?: boolean;
  /** Publish EC2 state-change events to the bus as instances change state (default true). */
  readonly ec2Events?: boolean;
  /** Stream polling period (default 250 ms, Lambda's 4 polls a second). */
  readonly streamPollIntervalMs?: number;
  /** Fault injection: asked after each successful stream batch; `true` redelivers it once. Default never. */
  readonly streamRedelivery?: (records: readonly LambdaStreamRecord[]) => boolean;
}

export interface EventRouting {
  /** Puts an event on the bus; resolves when the invocations it caused are done. */
  putEvent(event: BusEvent): Promise<string[]>;
  /** Publishes an `EC2 Instance State-change Notification` for the instance and state. */
  emitEc2Event(instanceId: string, state: string): Promise<string[]>;
  /** Fires every schedule rule now; resolves when the invocations are done. */
  fireSchedules(): Promise<void>;
  /** Lambda's `Event` invocation of the function (queued, retried as Lambda retries); settles once it ran or was given up. */
  invokeAsync(logicalId: string, event: unknown, source: string): Promise<void>;
  /** Processes the table's stream until everything written so far reached its function. */
  drainStream(): Promise<void>;
  /** Waits for the asynchronous invocations queued so far (retries included), then drains the stream. */
  idle(): Promise<void>;
  /** Asynchronous invocations queued or running now. */
  pendingInvocations(): number;
  streamStats(): StreamPollerStats;
  /** Stream records given up on (the mapping's on-failure destination). */
  readonly streamFailures: readonly DiscardedBatch[];
  /** Asynchronous invocations given up on after Lambda's retries. */
  readonly asyncFailures: readonly AsyncInvocationFailure[];
  stop(): Promise<void>;
}

/** What the routing connects: the template's rules and mappings, the stand-ins they read, the functions. */
export interface RoutingSite {
  readonly stack: SynthesizedStack;
  readonly model: StackModel;
  readonly nodeTable: NodeTable;
  readonly streamsClient: DynamoDBStreamsClient;
  readonly ec2: Ec2Emulator;
  readonly invoke: SyncInvoke;
}

/** Wires the bus, the schedules and the stream to the functions, and starts the timers and pollers. */
export function startEventRouting(options: EventRoutingOptions, site: RoutingSite): Promise<EventRouting> {
  return startOrUndo(async (teardown) => {
    const timeScale = options.timeScale ?? 1;
    // Lambda's async retry waits (about 1 and 2 minutes), on the cloud's time scale.
    const asyncInvoker = new AsyncInvoker(site.invoke, {
      retryDelaysMs: [60_000 / timeScale, 120_000 / timeScale],
    });
    teardown.add(() => asyncInvoker.stop());
    const envelope = { account: LOCAL_ACCOUNT, region: LOCAL_REGION };
    const bus = new EventBus(site.model.rules, asyncInvoker, envelope);
    const scheduler = schedulerOf(options, site, asyncInvoker);
    teardown.add(() => scheduler.stop());
    const pollers = streamPollersOf(options, site);
    teardown.add(() => Promise.all(pollers.map((poller) => poller.stop())).then(() => {}));

    const emitEc2Event = (instanceId: string, state: string) =>
      bus.put({
        source: 'aws.ec2',
        'detail-type': EC2_STATE_CHANGE_DETAIL_TYPE,
        resources: [`arn:aws:ec2:${LOCAL_REGION}:${LOCAL_ACCOUNT}:instance/${instanceId}`],
        detail: { 'instance-id': instanceId, state },
      });
    if (options.ec2Events !== false) {
      teardown.add(
        site.ec2.state.onInstanceStateChange(({ instanceId, state }) => void emitEc2Event(instanceId, state)),
      );
    }
    if (options.runSchedules !== false) scheduler.start();
    for (const poller of pollers) poller.start();

    const drainStream = async () => {
      for (const poller of pollers) await poller.drain();
    };
    return {
      putEvent: (event) => bus.put(event),
      emitEc2Event,
      fireSchedules: () => scheduler.fireAll(),
      invokeAsync: (logicalId, event, source) => asyncInvoker.send(logicalId, event, source),
      drainStream,
      idle: async () => {
        await asyncInvoker.idle();
        await drainStream();
      },
      pendingInvocations: () => asyncInvoker.pending(),
      streamStats: () => {
        const all = pollers.map((poller) => poller.stats());
        return {
          recordsRead: sum(all.map((stats) => stats.recordsRead)),
          batchesInvoked: sum(all.map((stats) => stats.batchesInvoked)),
          batchFailures: sum(all.map((stats) => stats.batchFailures)),
          recordsDiscarded: sum(all.map((stats) => stats.recordsDiscarded)),
        };
      },
      get streamFailures() {
        return pollers.flatMap((poller) => poller.discarded);
      },
      asyncFailures: asyncInvoker.failures,
      stop: () => teardown.run(),
    };
  });
}

/**
 * The schedule rules, each sending its target's `Input` (or the scheduled event) as an
 * asynchronous invocation. The watcher's schedule starts invocations that live for minutes: it is
 * included only when asked for.
 */
function schedulerOf(
  options: EventRoutingOptions,
  { stack, model }: RoutingSite,
  asyncInvoker: AsyncInvoker,
) {
  const envelope = { account: LOCAL_ACCOUNT, region: LOCAL_REGION };
  const scheduledRules = model.rules.filter(
    (rule) =>
      options.watchSchedule === true ||
      !rule.targets.some((target) => target.functionLogicalId.startsWith('Watch')),
  );
  return new Scheduler(
    scheduledRules,
    async (rule) => {
      const ruleArn = `arn:aws:events:${LOCAL_REGION}:${LOCAL_ACCOUNT}:rule/${physicalName(stack.stackName, rule.logicalId)}`;
      await Promise.all(
        rule.targets.map((target) =>
          asyncInvoker.send(
            target.functionLogicalId,
            target.input === undefined ? scheduledEvent(ruleArn, envelope) : structuredClone(target.input),
            `rule:${rule.logicalId}`,
          ),
        ),
      );
    },
    options.timeScale ?? 1,
  );
}

/** A poller per event-source mapping of the node table's stream, invoking its function. */
function streamPollersOf(options: EventRoutingOptions, site: RoutingSite): StreamPoller[] {
  return site.model.streamMappings
    .filter((mapping) => mapping.tableLogicalId === site.nodeTable.logicalId)
    .map(
      (mapping) =>
        new StreamPoller({
          client: site.streamsClient,
          streamArn: site.nodeTable.streamArn,
          region: LOCAL_REGION,
          mapping,
          invoke: (event) => site.invoke(mapping.functionLogicalId, event),
          ...(options.streamPollIntervalMs === undefined
            ? {}
            : { pollIntervalMs: options.streamPollIntervalMs }),
          ...(options.streamRedelivery === undefined
            ? {}
            : { redeliverAfterSuccess: options.streamRedelivery }),
        }),
    );
}

function sum(values: readonly number[]): number {
  return values.reduce((total, value) => total + value, 0);
}
