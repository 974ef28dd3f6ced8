import type { NodeRecord } from './model.ts';
import type { NodeRecordStore } from './ports.ts';

/**
 * Table items that cannot be read as node records, and how a whole-table reader goes on past
 * them. Pure. One bad item (a newer release's layout, a hand edit with the wrong types) must never
 * stop the work on every other node: the sweep and the resync count it as that node's failure and
 * serve the rest. A reader that must see EVERY record to be safe (the ENI garbage collection, which
 * deletes what no record names) lets `UnreadableRecordsError` escape instead, and deletes nothing.
 */

/** An item that is no node record: its key and why. */
export interface UnreadableRecord {
  readonly instanceId: string;
  readonly error: string;
}

/**
 * An item whose attributes do not have the shape of a node record (`field` names the first one
 * that does not). Nothing is written over it: it needs a person, or the release that wrote it.
 */
export class MalformedRecordError extends Error {
  override readonly name = 'MalformedRecordError';
  constructor(
    readonly instanceId: string,
    readonly field: string,
    problem: string,
  ) {
    super(`node record ${instanceId} is malformed: ${field} ${problem}; it is left untouched`);
  }
}

/**
 * A page of a table scan held items that are no node records. The page's readable records and its
 * continuation travel with the error, so a reader may go on (`readRecordPage`); one that does not
 * catch it stops, having acted on nothing of the page.
 */
export class UnreadableRecordsError extends Error {
  override readonly name = 'UnreadableRecordsError';
  constructor(
    readonly page: { readonly records: NodeRecord[]; readonly nextPageToken?: string },
    readonly unreadable: readonly UnreadableRecord[],
  ) {
    super(
      `${unreadable.length} node record(s) cannot be read: ${unreadable
        .slice(0, 3)
        .map((item) => `${item.instanceId} (${item.error})`)
        .join('; ')}${unreadable.length > 3 ? '; …' : ''}`,
    );
  }
}

/** One page of the table, its readable records and its unreadable items apart. */
export interface RecordPage {
  readonly records: NodeRecord[];
  readonly unreadable: readonly UnreadableRecord[];
  readonly nextPageToken?: string;
}

/** `store.listPage`, going on past unreadable items (listed in `unreadable`); other errors escape. */
export async function readRecordPage(
  store: Pick<NodeRecordStore, 'listPage'>,
  pageToken?: string,
): Promise<RecordPage> {
  try {
    return { unreadable: [], ...(await store.listPage(pageToken)) };
  } catch (error) {
    if (!(error instanceof UnreadableRecordsError)) throw error;
    return { ...error.page, unreadable: error.unreadable };
  }
}

/** Every readable record of the table, and every unreadable item, page by page. */
export async function readAllRecords(
  store: Pick<NodeRecordStore, 'listPage'>,
): Promise<{ records: NodeRecord[]; unreadable: UnreadableRecord[] }> {
  const records: NodeRecord[] = [];
  const unreadable: UnreadableRecord[] = [];
  let pageToken: string | undefined;
  do {
    const page = await readRecordPage(store, pageToken);
    records.push(...page.records);
    unreadable.push(...page.unreadable);
    pageToken = page.nextPageToken;
  } while (pageToken !== undefined);
  return { records, unreadable };
}
