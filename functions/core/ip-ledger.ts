import { ipv4ToNumber, isIpv4Address, numberToIpv4 } from './ip-math.ts';
import { bigIntToIpv6, DELEGATED_IPV6_PREFIX_LENGTH, ipv6ToBigInt, isIpv6Address } from './ipv6-math.ts';
import type { NodeRecord } from './model.ts';

/**
 * The IP ledger: every assignment and release of an address by the allocator, derived from two
 * consecutive versions of a node record (the node table's stream carries both images), appended
 * to a table of its own and kept for a retention period. Pure: the entries, their keys and their
 * expiry are functions of the record versions alone, so a redelivered stream record yields the
 * same entries with the same keys, and a conditional put makes the replay write nothing.
 *
 * What is ledgered: the secondary IPv4 addresses, IPv4 /28 prefixes and IPv6 /80 prefixes on ENIs
 * of ours (not on foreign ENIs such as an untagged eth0, which the allocator never assigns to).
 * An address is assigned at the first version that lists it on an ENI, and released at the first
 * version that no longer does, with why:
 * - `released`: the ENI is still there without it (an excess release, a CIDR release);
 * - `eni-deleted`: the ENI left the record (deleted by garbage collection, or detached);
 * - `node-retired`: the record became `retired` (the instance terminated), whatever it still lists;
 * - `record-removed`: the record was deleted while not retired (by hand; a retired record's TTL
 *   expiry releases nothing, its addresses were released at retirement).
 */

type AddressKind = 'ipv4' | 'ipv4-prefix' | 'ipv6-prefix';
type ReleaseReason = 'released' | 'eni-deleted' | 'node-retired' | 'record-removed';

/** One address held by one ENI of a node, as a record version shows it. */
interface Holding {
  /** `10.0.3.17`, `10.0.3.16/28`, `2600:1f14::/80` (as the record writes it). */
  readonly address: string;
  readonly addressKind: AddressKind;
  readonly eniId: string;
  readonly subnetId: string;
}

export interface LedgerEntry extends Holding {
  readonly event: 'assigned' | 'released';
  readonly instanceId: string;
  readonly nodeName: string;
  /** When the record version that shows the change was written. */
  readonly atEpochMs: number;
  /** That record version. */
  readonly recordVersion: number;
  readonly reason?: ReleaseReason;
  /** DynamoDB TTL: `atEpochMs` plus the retention. */
  readonly expiresAtEpochSeconds: number;
}

/** What one stream record says happened to a node record. */
export interface RecordChange {
  readonly oldRecord: NodeRecord | undefined;
  readonly newRecord: NodeRecord | undefined;
  /** When the stream saw a removal (its ApproximateCreationDateTime): a removal has no new version. */
  readonly removedAtEpochMs?: number;
}

/** One record of the node table's stream: a change to ledger, or why it cannot be (logged and skipped). */
export type LedgerStreamRecord =
  | { readonly sequenceNumber: string; readonly action: 'ledger'; readonly change: RecordChange }
  | { readonly sequenceNumber: string; readonly action: 'reject'; readonly reason: string };

/** The addresses a record version holds; none once the node is retired. */
function holdingsOf(record: NodeRecord | undefined): Holding[] {
  if (record === undefined || record.lifecycle === 'retired') return [];
  return record.enis
    .filter((eni) => eni.foreign !== true)
    .flatMap((eni) => {
      const held = (address: string, addressKind: AddressKind): Holding => ({
        address,
        addressKind,
        eniId: eni.id,
        subnetId: eni.subnetId,
      });
      return [
        ...eni.secondaryIps.map((address) => held(address, 'ipv4')),
        ...eni.prefixes.map((address) => held(address, 'ipv4-prefix')),
        ...(eni.ipv6Prefixes ?? []).map((address) => held(address, 'ipv6-prefix')),
      ];
    });
}

/** The ledger entries one record change yields, assignments before releases, each in record order. */
export function ledgerEntriesFor(change: RecordChange, retentionDays: number): LedgerEntry[] {
  const { oldRecord, newRecord } = change;
  const node = newRecord ?? oldRecord;
  if (node === undefined) return [];
  const atEpochMs = newRecord?.updatedAtEpochMs ?? change.removedAtEpochMs ?? node.updatedAtEpochMs;
  const recordVersion = newRecord?.version ?? node.version + 1;
  const entry = (holding: Holding, event: LedgerEntry['event'], reason?: ReleaseReason): LedgerEntry => ({
    ...holding,
    event,
    instanceId: node.instanceId,
    nodeName: node.nodeName,
    atEpochMs,
    recordVersion,
    ...(reason === undefined ? {} : { reason }),
    expiresAtEpochSeconds: Math.floor(atEpochMs / 1000) + retentionDays * 86_400,
  });
  const before = holdingsOf(oldRecord);
  const after = holdingsOf(newRecord);
  const key = (holding: Holding) => `${holding.eniId} ${holding.address}`;
  const beforeKeys = new Set(before.map(key));
  const afterKeys = new Set(after.map(key));
  const enisAfter = new Set(newRecord?.enis.map((eni) => eni.id) ?? []);
  const reasonFor = (holding: Holding): ReleaseReason => {
    if (newRecord === undefined)
      return oldRecord?.lifecycle === 'retired' ? 'node-retired' : 'record-removed';
    if (newRecord.lifecycle === 'retired') return 'node-retired';
    return enisAfter.has(holding.eniId) ? 'released' : 'eni-deleted';
  };
  return [
    ...after.filter((holding) => !beforeKeys.has(key(holding))).map((holding) => entry(holding, 'assigned')),
    ...before
      .filter((holding) => !afterKeys.has(key(holding)))
      .map((holding) => entry(holding, 'released', reasonFor(holding))),
  ];
}

/**
 * The entry's sort key within its address: time first (so a query reads an address's history in
 * order), then what makes it unique and deterministic: instance, record version, event, ENI.
 */
export function ledgerSortKey(entry: LedgerEntry): string {
  return [
    String(entry.atEpochMs).padStart(15, '0'),
    entry.instanceId,
    String(entry.recordVersion).padStart(10, '0'),
    entry.event,
    entry.eniId,
  ].join('#');
}

/**
 * The ledger keys under which holders of `ip` are found: the address itself, and the delegated
 * prefix that would contain it (its /28 for IPv4, its /80 for IPv6). Undefined for text that is
 * no IP address.
 */
export function ledgerAddressesCovering(ip: string): string[] | undefined {
  if (isIpv4Address(ip)) {
    const prefixStart = numberToIpv4((ipv4ToNumber(ip) & ~15) >>> 0);
    return [ip, `${prefixStart}/28`];
  }
  if (isIpv6Address(ip)) {
    const hostBits = BigInt(128 - DELEGATED_IPV6_PREFIX_LENGTH);
    const start = (ipv6ToBigInt(ip) >> hostBits) << hostBits;
    return [bigIntToIpv6(ipv6ToBigInt(ip)), `${bigIntToIpv6(start)}/${DELEGATED_IPV6_PREFIX_LENGTH}`];
  }
  return undefined;
}

/** One holding of an address over time, from its assignment to its release (open while held). */
export interface HoldingInterval {
  readonly assigned: LedgerEntry | undefined;
  readonly released: LedgerEntry | undefined;
}

/**
 * An address's entries (any order, any mix of the keys `ledgerAddressesCovering` gives) paired into
 * holdings, oldest first: each release closes the open assignment of the same address and ENI. A
 * release without its assignment (older than the retention) stands alone.
 */
export function holdingIntervals(entries: readonly LedgerEntry[]): HoldingInterval[] {
  const ordered = [...entries].sort((left, right) => ledgerSortKey(left).localeCompare(ledgerSortKey(right)));
  const open = new Map<string, LedgerEntry>();
  const intervals: HoldingInterval[] = [];
  for (const entry of ordered) {
    const key = `${entry.address} ${entry.eniId}`;
    if (entry.event === 'assigned') {
      open.set(key, entry);
      continue;
    }
    intervals.push({ assigned: open.get(key), released: entry });
    open.delete(key);
  }
  for (const assigned of open.values()) intervals.push({ assigned, released: undefined });
  return intervals.sort((left, right) => startOf(left) - startOf(right));
}

const startOf = (interval: HoldingInterval) =>
  interval.assigned?.atEpochMs ?? interval.released?.atEpochMs ?? 0;

/** The holdings in force at `atEpochMs`: assigned at or before it, not released by then. */
export function holdersAt(entries: readonly LedgerEntry[], atEpochMs: number): HoldingInterval[] {
  return holdingIntervals(entries).filter(
    ({ assigned, released }) =>
      assigned !== undefined &&
      assigned.atEpochMs <= atEpochMs &&
      (released === undefined || released.atEpochMs > atEpochMs),
  );
}
