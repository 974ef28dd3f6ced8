import type { EniState, InstanceView, NodeRecord } from '../core/model.ts';
import type { NodeRecordContent } from '../core/node-record.ts';
import type { AllocationDependencies } from './allocate-node.ts';

/**
 * What the two release writers (excess IPs of 1.19 nodes, CIDRs of multi-pool nodes) share: their
 * settings and dependencies, and the record content they write.
 */

/** cilium-operator's `--aws-release-excess-ips` and `--excess-ip-release-delay`. */
export interface ReleaseSettings {
  readonly enabled: boolean;
  readonly delayMs: number;
  /** How long a CIDR released from a multi-pool node is tombstoned; default `tombstoneDurationMs`. */
  readonly tombstoneMs?: number;
}

export interface ReleaseDependencies extends AllocationDependencies {
  readonly release: ReleaseSettings;
}

/**
 * The record content this writer produces: the ENIs as observed and released, everything the
 * allocator owns (knobs, prefix-delegation mode, last error, node name, VPC) kept as recorded.
 */
export function contentOf(
  record: NodeRecord,
  instance: InstanceView,
  enis: readonly EniState[],
  lease: boolean,
  deps: ReleaseDependencies,
): NodeRecordContent {
  return {
    instance,
    nodeName: record.nodeName,
    vpc: record.vpc,
    enis,
    knobs: record.knobs,
    prefixDelegation: record.prefixDelegation,
    ...(record.lastError ? { lastError: record.lastError } : {}),
    ...(lease
      ? {
          lease: {
            holder: deps.invocationId,
            expiresAtEpochMs: deps.clock() + deps.settings.leaseDurationMs,
          },
        }
      : {}),
  };
}
