import { describe, expect, it } from 'vitest';
import type { NodeRecord } from '../../../functions/core/model.ts';
import {
  readAllRecords,
  readRecordPage,
  UnreadableRecordsError,
} from '../../../functions/core/unreadable-records.ts';

const record = (instanceId: string) => ({ instanceId, version: 1 }) as unknown as NodeRecord;

/** A store of two pages; the first holds an unreadable item. */
const pages = {
  listPage: async (pageToken?: string) => {
    if (pageToken === undefined) {
      throw new UnreadableRecordsError({ records: [record('i-1')], nextPageToken: 'p2' }, [
        { instanceId: 'i-bad', error: 'NewerRecordSchemaError: schema version 99' },
      ]);
    }
    return { records: [record('i-2')] };
  },
};

describe('reading the table past unreadable items', () => {
  it('a page keeps its readable records, its continuation and its unreadable items apart', async () => {
    expect(await readRecordPage(pages)).toEqual({
      records: [record('i-1')],
      nextPageToken: 'p2',
      unreadable: [{ instanceId: 'i-bad', error: 'NewerRecordSchemaError: schema version 99' }],
    });
    expect(await readRecordPage(pages, 'p2')).toEqual({ records: [record('i-2')], unreadable: [] });
  });

  it('the whole table: every readable record, and every unreadable item', async () => {
    expect(await readAllRecords(pages)).toEqual({
      records: [record('i-1'), record('i-2')],
      unreadable: [{ instanceId: 'i-bad', error: 'NewerRecordSchemaError: schema version 99' }],
    });
  });

  it('any other failure escapes', async () => {
    const failing = { listPage: async () => Promise.reject(new Error('ProvisionedThroughputExceeded')) };
    await expect(readAllRecords(failing)).rejects.toThrow('ProvisionedThroughputExceeded');
  });

  it('names the first unreadable items in its message', () => {
    const error = new UnreadableRecordsError(
      { records: [] },
      ['a', 'b', 'c', 'd'].map((id) => ({ instanceId: `i-${id}`, error: 'x' })),
    );
    expect(error.message).toBe('4 node record(s) cannot be read: i-a (x); i-b (x); i-c (x); …');
  });
});
