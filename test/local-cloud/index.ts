/**
 * The local cloud's programmatic API, for the bench and chaos suites:
 *
 *   const cloud = await startLocalCloud({ runSchedules: false });
 *   const instance = cloud.launchInstance('m5.large');
 *   await cloud.waitUntil(async () => (await cloud.summary()).readyNodes === 1);
 *   await cloud.invoke('Sync', { all: true });
 *   await cloud.stop();
 */
export type { AsyncInvocationFailure, BusEvent } from './event-bus.ts';
export { compileEventPattern, matchesEventPattern } from './event-pattern.ts';
export type { FunctionStats, InvocationResult, LambdaErrorPayload } from './lambda-runner.ts';
export {
  k8sEmulatorOf,
  LOCAL_ACCOUNT,
  LOCAL_REGION,
  type LocalCloud,
  type LocalCloudOptions,
  startLocalCloud,
} from './local-cloud.ts';
export type { DiscardedBatch, LambdaStreamRecord, StreamPollerStats } from './stream-poller.ts';
export {
  type CloudSummary,
  type Denials,
  type NodeSummary,
  renderDenials,
  renderSummary,
} from './summary.ts';
export { readSynthesizedStack, type SynthesizedStack, synthesizeStack } from './synthesize.ts';
export type { StackModel } from './template.ts';
