import type { IpamFunctionId } from './kubernetes-access.ts';

/**
 * The Powertools service name of each function: the `service` dimension of its EMF metrics and the
 * `service` field of its logs. One per function, so an alarm or a graph on one function's metric
 * never mixes in another's points: the garbage collection runs the sweep's code, but as a service
 * of its own.
 */
export const SERVICE_NAMES: Readonly<Record<IpamFunctionId | 'GarbageCollection' | 'Ledger', string>> = {
  Allocate: 'serverless-eni-ipam-allocate',
  Sweep: 'serverless-eni-ipam-sweep',
  GarbageCollection: 'serverless-eni-ipam-garbage-collection',
  Sync: 'serverless-eni-ipam-sync',
  Watch: 'serverless-eni-ipam-watch',
  Ledger: 'serverless-eni-ipam-ledger',
};
