import { describe, expect, it } from 'vitest';
import { ledgerItemOf } from '../../../functions/aws/ip-ledger-table.ts';
import { holdersAt, ledgerAddressesCovering, ledgerEntriesFor } from '../../../functions/core/ip-ledger.ts';
import type { NodeRecord } from '../../../functions/core/model.ts';
import { eniFixture, nodeRecordFixture } from '../../fixtures/node-records.ts';
import { dynamoItemSizeBytes } from '../../support/item-size.ts';

const T0 = 1_796_133_600_000;
const at = (version: number, enis: NodeRecord['enis'], extra: Partial<NodeRecord> = {}) =>
  nodeRecordFixture({ version, enis, updatedAtEpochMs: T0 + version * 60_000, ...extra });
const eth0 = eniFixture(0, 0);
const summary = (entries: ReturnType<typeof ledgerEntriesFor>) =>
  entries.map(
    (entry) =>
      `${entry.event} ${entry.address} ${entry.eniId.slice(-1)}${entry.reason ? ` ${entry.reason}` : ''}`,
  );

describe('the IP ledger entries of a record change', () => {
  it.each([
    {
      case: 'a first record: every address of ours assigned, a foreign ENI skipped',
      change: {
        oldRecord: undefined,
        newRecord: at(1, [{ ...eniFixture(0, 1), foreign: true }, eniFixture(1, 2)]),
      },
      expected: ['assigned 10.0.17.11 1', 'assigned 10.0.17.12 1'],
    },
    {
      case: 'an IP released from an ENI that stays',
      change: { oldRecord: at(1, [eth0, eniFixture(1, 2)]), newRecord: at(2, [eth0, eniFixture(1, 1)]) },
      expected: ['released 10.0.17.12 1 released'],
    },
    {
      case: 'an ENI deleted with its /28, an IPv6 /80 added elsewhere',
      change: {
        oldRecord: at(1, [eth0, eniFixture(1, 0), eniFixture(2, 0, { prefixes: ['10.0.3.16/28'] })]),
        newRecord: at(2, [eth0, eniFixture(1, 0, { ipv6Prefixes: ['2600:1f14::/80'] })]),
      },
      expected: ['assigned 2600:1f14::/80 1', 'released 10.0.3.16/28 2 eni-deleted'],
    },
    {
      case: 'the node retired: everything it held, though the record still lists it',
      change: {
        oldRecord: at(1, [eth0, eniFixture(1, 1)]),
        newRecord: at(2, [eth0, eniFixture(1, 1)], { lifecycle: 'retired' }),
      },
      expected: ['released 10.0.17.11 1 node-retired'],
    },
    {
      case: "a retired record's TTL expiry: nothing (released at retirement)",
      change: {
        oldRecord: at(2, [eth0, eniFixture(1, 1)], { lifecycle: 'retired' }),
        newRecord: undefined,
        removedAtEpochMs: T0,
      },
      expected: [],
    },
    {
      case: 'a live record deleted by hand',
      change: { oldRecord: at(2, [eth0, eniFixture(1, 1)]), newRecord: undefined, removedAtEpochMs: T0 },
      expected: ['released 10.0.17.11 1 record-removed'],
    },
    {
      case: 'a lease renewal: no address changed',
      change: { oldRecord: at(1, [eth0, eniFixture(1, 2)]), newRecord: at(2, [eth0, eniFixture(1, 2)]) },
      expected: [],
    },
  ])('$case', ({ change, expected }) => {
    expect(summary(ledgerEntriesFor(change, 90))).toEqual(expected);
  });

  it('derives time, version and expiry from the record alone, so a replay yields the same entries', () => {
    const change = { oldRecord: at(1, [eth0, eniFixture(1, 2)]), newRecord: at(2, [eth0, eniFixture(1, 1)]) };
    const [entry] = ledgerEntriesFor(change, 30);
    expect(entry).toMatchObject({
      atEpochMs: T0 + 120_000,
      recordVersion: 2,
      expiresAtEpochSeconds: (T0 + 120_000) / 1000 + 30 * 86_400,
    });
    expect(ledgerEntriesFor(change, 30)).toEqual(ledgerEntriesFor(change, 30));
  });

  it('stores an entry in under 1 KB: one write unit each', () => {
    const record = at(
      1,
      [eth0, eniFixture(1, 1, { id: 'eni-0123456789abcdef0', subnetId: 'subnet-0123456789abcdef0' })],
      {
        instanceId: 'i-0123456789abcdef0',
        nodeName: 'ip-100-64-123-234.ap-southeast-2.compute.internal',
      },
    );
    const [assigned] = ledgerEntriesFor({ oldRecord: undefined, newRecord: record }, 90);
    const [released] = ledgerEntriesFor(
      { oldRecord: record, newRecord: { ...record, version: 2, lifecycle: 'retired' } },
      90,
    );
    for (const entry of [assigned, released]) {
      if (entry === undefined) throw new Error('no entry');
      expect(dynamoItemSizeBytes(ledgerItemOf(entry))).toBeLessThan(1024);
    }
  });

  it.each([
    { ip: '10.0.3.17', expected: ['10.0.3.17', '10.0.3.16/28'] },
    { ip: '192.168.255.255', expected: ['192.168.255.255', '192.168.255.240/28'] },
    { ip: '2600:1f14:0:0:0:1:2:3', expected: ['2600:1f14::1:2:3', '2600:1f14::/80'] },
    { ip: 'node-1', expected: undefined },
  ])('looks $ip up under $expected', ({ ip, expected }) => {
    expect(ledgerAddressesCovering(ip)).toEqual(expected);
  });

  it('a holding is in force from its assignment up to, not at, its release', () => {
    const entries = [
      ...ledgerEntriesFor({ oldRecord: undefined, newRecord: at(1, [eth0, eniFixture(1, 1)]) }, 90),
      ...ledgerEntriesFor(
        { oldRecord: at(1, [eth0, eniFixture(1, 1)]), newRecord: at(2, [eth0, eniFixture(1, 0)]) },
        90,
      ),
    ];
    expect(holdersAt(entries, T0 + 59_999)).toHaveLength(0);
    expect(holdersAt(entries, T0 + 60_000)).toHaveLength(1);
    expect(holdersAt(entries, T0 + 119_999)).toHaveLength(1);
    expect(holdersAt(entries, T0 + 120_000)).toHaveLength(0);
  });
});
