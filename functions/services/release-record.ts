import type { EniState, InstanceView, NodeKnobs, NodeRecord } from '../core/model.ts';
import { type NodeRecordContent, recordedContent } from '../core/node-record.ts';
import type { AssignedAddresses, CiliumNodeReader, Ec2NetworkPort } from '../core/ports.ts';
import type { LeaseHolderDependencies } from './node-lease.ts';

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

/** What the release writers read of the deployment's settings (the allocation's, by name). */
interface ReleaseNodeSettings {
  readonly clusterName: string;
  readonly clusterTagValues: readonly string[];
  /** Knobs for fields the node's CiliumNode does not set. */
  readonly defaultKnobs: NodeKnobs;
  readonly prefixDelegationEnabled: boolean;
  readonly leaseDurationMs: number;
  /** How long after our own mutation a disagreeing Describe is not trusted. */
  readonly consistencyGraceMs: number;
}

/** What the release writers read and write through: the record, EC2 and the CiliumNode. */
export interface ReleaseDependencies extends LeaseHolderDependencies {
  readonly ec2: Ec2NetworkPort;
  readonly ciliumNodes: CiliumNodeReader;
  readonly settings: ReleaseNodeSettings;
  /** The node table's generation, as the allocation stamps it (`AllocationDependencies`). */
  readonly tableGeneration: () => Promise<string | undefined>;
  readonly release: ReleaseSettings;
}

/**
 * The record content the release writers produce: the ENIs as observed and released, everything
 * the allocator owns (knobs, prefix-delegation mode, last error, node name, VPC) kept as recorded.
 */
export function releaseContent(
  record: NodeRecord,
  instance: InstanceView,
  enis: readonly EniState[],
): NodeRecordContent {
  return { ...recordedContent(record), instance, enis };
}

/**
 * Unassigns each entry in turn, per ENI, until one EC2 call fails (the release services' shared
 * step: what EC2 confirmed is recorded, the rest stays marked for the next plan). `stillWanted`,
 * awaited right before each call, may skip an entry. Answers what EC2 confirmed, and the failure
 * that stopped it (undefined when every call went through).
 */
export async function unassignInTurn<Entry extends AssignedAddresses & { readonly eniId: string }>(
  entries: readonly Entry[],
  ec2: Pick<Ec2NetworkPort, 'unassignIps'>,
  stillWanted: (entry: Entry) => Promise<boolean> = async () => true,
): Promise<{ readonly confirmed: Entry[]; readonly failure: unknown }> {
  const confirmed: Entry[] = [];
  for (const entry of entries) {
    if (!(await stillWanted(entry))) continue;
    try {
      await ec2.unassignIps(entry.eniId, { ips: entry.ips, prefixes: entry.prefixes });
      confirmed.push(entry);
    } catch (error) {
      return { confirmed, failure: error };
    }
  }
  return { confirmed, failure: undefined };
}
