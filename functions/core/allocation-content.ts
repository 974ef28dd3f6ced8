import { type AllocationObservation, type AllocationState, poolDemandOf } from './allocation-round.ts';
import type { CidrRelease, NodeRecord } from './model.ts';
import type { NodeRecordContent } from './node-record.ts';

/**
 * What an allocation invocation writes to the node's record: the content of each write (what it
 * observed, corrected by what EC2 confirmed), and the CIDRs the record says were released, which
 * the observation must not adopt back. The round (allocation-round.ts) decides the steps; this is
 * only what the record holds.
 */

/**
 * The record content of this invocation's writes: what it observed, corrected by what EC2
 * confirmed. Every such write records what this invocation observed from EC2 (or EC2's responses
 * to it), so it is stamped as reconciled in this table; a restored record that differs only in its
 * stamp is rewritten too (`recordWouldChange`), which is what lets the sync publish it.
 */
export function allocationContent(
  observation: AllocationObservation,
  state: AllocationState,
): NodeRecordContent {
  const reassigned = reassignedCidrs(observation, state);
  return {
    instance: observation.instance,
    nodeName: observation.nodeName,
    vpc: observation.vpc,
    enis: state.enis,
    knobs: observation.knobs,
    prefixDelegation: poolDemandOf(observation, state).prefixDelegation,
    ...(observation.demand ? { agentProtocol: observation.demand.protocol } : {}),
    ...(observation.table === undefined ? {} : { reconciledInTable: observation.table }),
    ...(reassigned.size > 0
      ? { cidrReleases: withoutEntries(observation.record?.cidrReleases, reassigned) }
      : {}),
    ...(state.blocked ? { lastError: state.blocked } : {}),
  };
}

/** `ip/32` of every excess IP the record says was released, and every tombstoned multi-pool CIDR. */
export function releasedCidrsOf(
  record: NodeRecord | undefined,
  tombstoned: ReadonlySet<string>,
): Set<string> {
  const released = new Set(tombstoned);
  for (const [ip, mark] of Object.entries(record?.excessMarks ?? {})) {
    if (mark.state === 'released') released.add(`${ip}/32`);
  }
  return released;
}

/** Tombstoned CIDRs EC2 assigned to us again in this invocation (its response is the proof). */
function reassignedCidrs(observation: AllocationObservation, state: AllocationState): Set<string> {
  const reassigned = new Set<string>();
  for (const result of state.results) {
    if (result.kind !== 'assigned') continue;
    for (const cidr of [...result.ips.map((ip) => `${ip}/32`), ...result.prefixes]) {
      if (observation.tombstonedCidrs.has(cidr)) reassigned.add(cidr);
    }
  }
  return reassigned;
}

function withoutEntries(
  releases: Readonly<Record<string, CidrRelease>> | undefined,
  cidrs: ReadonlySet<string>,
): Record<string, CidrRelease> {
  return Object.fromEntries(Object.entries(releases ?? {}).filter(([cidr]) => !cidrs.has(cidr)));
}
