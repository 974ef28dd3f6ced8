import { ENI_TAG_KEYS } from '../../../functions/core/eni-ownership.ts';
import type { CallRecord } from '../../emulators/ec2/calls.ts';
import { isNonMutatingAction } from '../../emulators/ec2/throttling.ts';
import { k8sEmulatorOf } from '../../local-cloud/local-cloud.ts';
import type { Denials } from '../../local-cloud/summary.ts';
import { necessaryMutatingCalls, type TokenBucketFloor, tokenBucketFloor } from '../floors.ts';
import { type Figure, figure } from '../report.ts';
import type { TapRecord } from '../tap.ts';
import { type BenchCloud, KUBERNETES_WRITE_VERBS } from './bench-cloud.ts';
import { countBy, formatCounts, totalOf } from './counts.ts';
import type { LaunchBurst } from './launch-burst.ts';
import type { BenchSettings } from './settings.ts';

/**
 * The burst's own traffic, counted between its marks: the demand phases and the steady state after
 * it make calls of their own.
 */
export interface BurstTally {
  readonly ec2CallsByAction: Readonly<Record<string, number>>;
  /** Calls answered RequestLimitExceeded by the emulator's per-action buckets (and retried). */
  readonly ec2ThrottledByAction: Readonly<Record<string, number>>;
  readonly throttledCalls: number;
  /** Accepted (not throttled) mutating calls. */
  readonly mutatingAccepted: number;
  /** Accepted mutating calls other than Assign/UnassignPrivateIpAddresses. */
  readonly eniCalls: number;
  /** Accepted Describe* calls. */
  readonly nonMutatingAccepted: number;
  /** ENIs tagged for the burst's instances that ended up detached. */
  readonly leakedEnis: number;
  /** The token-bucket floor of the calls the burst needed (3 per new ENI, 1 per assign). */
  readonly floor: TokenBucketFloor;
  readonly dynamoDb: {
    readonly putAttempts: number;
    readonly putSucceeded: number;
    readonly conditionFailures: number;
    readonly getItems: number;
  };
  readonly kubernetes: {
    readonly writeRequests: number;
    readonly conflicts: number;
    readonly changingSyncs: number;
  };
}

export function tallyBurst(bench: BenchCloud, burst: LaunchBurst): BurstTally {
  const { cloud } = bench;
  const { startMarks, endMarks } = burst;
  const calls = cloud.ec2.calls.log.slice(startMarks.ec2Calls, endMarks.ec2Calls);
  const accepted = calls.filter((call) => call.outcome !== 'throttled');
  const throttled = calls.filter((call) => call.outcome === 'throttled');
  const mutatingAccepted = accepted.filter((call) => !isNonMutatingAction(call.action));
  const burstInstanceIds = new Set(burst.instanceIds);
  return {
    ec2CallsByAction: countByAction(calls),
    ec2ThrottledByAction: countByAction(throttled),
    throttledCalls: throttled.length,
    mutatingAccepted: mutatingAccepted.length,
    eniCalls: mutatingAccepted.filter((call) => !/PrivateIpAddresses$/.test(call.action)).length,
    nonMutatingAccepted: accepted.filter((call) => isNonMutatingAction(call.action)).length,
    leakedEnis: cloud.ec2.state
      .networkInterfaceHistory()
      .filter(
        (eni) =>
          burstInstanceIds.has(eni.tags[ENI_TAG_KEYS.instanceId] ?? '') && eni.attachment === undefined,
      ).length,
    floor: tokenBucketFloor(necessaryMutatingCalls(burst.newEnis, burst.floorAssigns)),
    // The functions' traffic, through the pass-through (the DynamoDB tap is the second).
    dynamoDb: tallyDynamoDb(bench.taps.dynamoDb.records.slice(startMarks.taps[1], endMarks.taps[1])),
    kubernetes: tallyKubernetes(bench, burst),
  };
}

function countByAction(calls: readonly CallRecord[]): Record<string, number> {
  return countBy(calls.map((call) => call.action));
}

function tallyDynamoDb(records: readonly TapRecord[]): BurstTally['dynamoDb'] {
  const puts = records.filter((record) => record.operation === 'PutItem');
  return {
    putAttempts: puts.length,
    putSucceeded: puts.filter((record) => record.statusCode === 200).length,
    conditionFailures: puts.filter((record) => record.errorType === 'ConditionalCheckFailedException').length,
    getItems: records.filter((record) => record.operation === 'GetItem').length,
  };
}

function tallyKubernetes(bench: BenchCloud, burst: LaunchBurst): BurstTally['kubernetes'] {
  const { startMarks, endMarks } = burst;
  const requests = k8sEmulatorOf(bench.cloud)
    .requests.all()
    .slice(startMarks.k8sRequests, endMarks.k8sRequests);
  const writes = requests.filter((request) => KUBERNETES_WRITE_VERBS.has(request.verb));
  const syncs = bench.functionLog.syncs.slice(startMarks.syncLog, endMarks.syncLog);
  return {
    writeRequests: writes.length,
    conflicts: writes.filter((request) => request.statusCode === 409).length,
    changingSyncs: syncs.filter((entry) => entry.outcome === 'written').length,
  };
}

/** EC2 calls per new ENI and per node, against the calls the design needs; and the throttled ones. */
export function ec2CallFigures(tally: BurstTally, burst: LaunchBurst, settings: BenchSettings): Figure[] {
  const { newEnis, floorAssigns } = burst;
  const { eniCalls, mutatingAccepted, nonMutatingAccepted } = tally;
  const n = settings.nodes;
  return [
    figure({
      id: 'mutating_calls_per_new_eni',
      label: 'mutating EC2 calls per new ENI',
      value: newEnis === 0 ? undefined : eniCalls / newEnis,
      reference: 3,
      unit: 'calls/ENI',
      note: `accepted (not throttled) mutating calls other than Assign/UnassignPrivateIpAddresses (${eniCalls}) over ENIs attached at device index >= 1 to the launched instances at the end (${newEnis}); floor 3 = create (IPs and tags in the call), attach, set delete-on-termination. n/a when no node needed a new ENI.`,
    }),
    figure({
      id: 'mutating_calls_per_node',
      label: 'mutating EC2 calls per node',
      value: mutatingAccepted / n,
      reference: (3 * newEnis + floorAssigns) / n,
      unit: 'calls/node',
      note: `accepted mutating calls (${mutatingAccepted}) over ${n} nodes; floor (3 x ${newEnis} new ENIs + ${floorAssigns} assigns) / ${n}, where an assign is needed once per pre-existing ENI (eth0) that ended up holding secondary IPs or prefixes.`,
    }),
    figure({
      id: 'non_mutating_calls_per_node',
      label: 'non-mutating EC2 calls per node',
      value: nonMutatingAccepted / n,
      reference: 2,
      unit: 'calls/node',
      note: `accepted Describe* calls (${nonMutatingAccepted}) over ${n} nodes. Floor 2: one filtered DescribeInstances (state, type, subnet and the cluster tag, which events do not carry) and one filtered DescribeNetworkInterfaces (the attached ENIs: EC2, not the record, is the truth). VPC, subnets, route tables and instance types are cluster-wide or static and could be cached across nodes; the orphan check before a create is covered by the ClientToken.`,
    }),
    figure({
      id: 'throttled_retries',
      label: 'throttled EC2 calls (retried)',
      value: tally.throttledCalls,
      reference: 0,
      unit: 'calls',
      note: `calls answered RequestLimitExceeded by the emulator's per-action buckets during the burst: ${formatCounts(tally.ec2ThrottledByAction)}.`,
    }),
  ];
}

/**
 * Calls the stand-ins refused for authorization over the whole run (setup, burst, steady state):
 * every one is a call the synthesized roles forbid. (The watcher's invokes of the allocate
 * function are authorized by its role too.)
 */
export function denialFigures(denials: Denials): Figure[] {
  return [
    figure({
      id: 'denied_ec2_calls',
      label: 'EC2 calls denied by IAM',
      value: totalOf(denials.ec2),
      reference: 0,
      unit: 'calls',
      note: `calls of the whole run the EC2 emulator answered UnauthorizedOperation after evaluating the caller's synthesized role policies: ${formatCounts(denials.ec2)}. Floor 0: the allocator never attempts a call its role may not make.`,
    }),
    figure({
      id: 'denied_k8s_requests',
      label: 'Kubernetes requests denied (401/403)',
      value: totalOf(denials.kubernetes),
      reference: 0,
      unit: 'requests',
      note: `requests of the whole run the Kubernetes emulator refused for authentication (401) or RBAC (403, each function's own group): ${formatCounts(denials.kubernetes)}. Floor 0.`,
    }),
    figure({
      id: 'denied_lambda_invokes',
      label: 'Lambda invokes denied by IAM',
      value: totalOf(denials.lambda),
      reference: 0,
      unit: 'invokes',
      note: `function-to-function invokes of the whole run (the watcher's of the allocate function) the local Lambda API refused after evaluating the caller's synthesized role policies: ${formatCounts(denials.lambda)}. Floor 0.`,
    }),
  ];
}

/** Simulated seconds until the last node of the burst was ready, against its token-bucket floor. */
export function timeToLastReadyFigure(
  tally: BurstTally,
  burst: LaunchBurst,
  settings: BenchSettings,
): Figure {
  const { floor } = tally;
  const { readyAt, timedOut, timeoutMs } = burst;
  const n = settings.nodes;
  const readySeconds = [...readyAt.values()];
  const lastReady = readySeconds.length === n ? Math.max(...readySeconds) : undefined;
  return figure({
    id: 'time_to_last_ready',
    label: 'time until the last node is ready',
    value: lastReady,
    reference: floor.seconds,
    unit: 'simulated s',
    note: `simulated seconds (EC2 clock, ${settings.scale}x real time) from the launch to the moment the last node was first seen ready (record active with addresses, CiliumNode pool non-empty and published from the latest record version, no invariant violation; polled every 0.4 real s). Floor: max over actions of max(0, (calls - burst) / refill) for the necessary calls: ${floor.actions.map((action) => `${action.action} ${action.calls} calls (${action.burst}/${action.refillPerSecond}) ${action.seconds.toFixed(1)} s`).join('; ')}. ${timedOut ? `TIMED OUT after ${Math.round(timeoutMs / 1000)} real s with ${readyAt.size}/${n} ready.` : ''}`,
  });
}

/** Lost races per DynamoDB write, and Kubernetes writes per sync that changed its CiliumNode. */
export function storeWriteFigures(tally: BurstTally, settings: BenchSettings): Figure[] {
  const { putAttempts, putSucceeded, conditionFailures } = tally.dynamoDb;
  const { writeRequests, conflicts, changingSyncs } = tally.kubernetes;
  const n = settings.nodes;
  return [
    figure({
      id: 'ddb_condition_failures_per_write',
      label: 'DynamoDB conditional-check failures per successful write',
      value: putSucceeded === 0 ? undefined : conditionFailures / putSucceeded,
      reference: 0,
      unit: 'failures/write',
      note: `PutItem answers seen by a pass-through in front of DynamoDB Local during the burst: ${conditionFailures} ConditionalCheckFailedException over ${putSucceeded} successful writes (${putAttempts} attempts, ${(putSucceeded / n).toFixed(2)} successful writes per node). Every write is conditional on the version read, so a failure is a lost race (a duplicate event, the sweep, a lease).`,
    }),
    figure({
      id: 'k8s_writes_per_changing_sync',
      label: 'Kubernetes writes per changing sync',
      value: changingSyncs === 0 ? undefined : writeRequests / changingSyncs,
      reference: 2,
      unit: 'writes/sync',
      note: `write requests (create, update, patch; 409s included) in the Kubernetes emulator's request log during the burst (${writeRequests}, ${conflicts} conflicts) over syncs that reported outcome written in the sync function's log (${changingSyncs}). Floor 2: status first, then spec.`,
    }),
  ];
}
