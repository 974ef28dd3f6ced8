import type { ServerResponse } from 'node:http';
import type { Selector } from './selectors.ts';
import { API_VERSION, ApiError, KIND } from './status.ts';
import type { CiliumNodeObject, CiliumNodeStore, StoredEvent } from './store.ts';

/**
 * Watch streams: `GET …/ciliumnodes?watch=true` answered 200 with chunked newline-delimited JSON
 * `{"type":…,"object":…}` lines, as kube-apiserver's watch handler writes them.
 *  - no resourceVersion (or "0"): synthetic ADDED events for the current objects, then live events;
 *  - resourceVersion=N: every write after N in order (the watcher sees each intermediate version),
 *    then live events; N older than the kept history: one ERROR event carrying a 410 Expired
 *    Status, then the stream ends (the client must re-list);
 *  - selectors: an object that starts matching arrives as ADDED, one that stops matching as
 *    DELETED (the watch cache's behaviour);
 *  - BOOKMARK events (only with allowWatchBookmarks) carry just `metadata.resourceVersion`.
 */

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchRequest {
  /** Undefined, "" or "0": start with the current state. */
  resourceVersion: number | undefined;
  selector: Selector;
  allowWatchBookmarks: boolean;
  sendInitialEvents: boolean;
  timeoutSeconds: number | undefined;
  /** Fault `drop-after-apply`: destroy the connection right after the initial events. */
  dropAfterInitialEvents: boolean;
}

interface OpenStream {
  response: ServerResponse;
  allowWatchBookmarks: boolean;
}

export class WatchHub {
  private readonly store: CiliumNodeStore;
  private readonly streams = new Set<OpenStream>();

  constructor(store: CiliumNodeStore) {
    this.store = store;
  }

  /** Streams that are still open. */
  count(): number {
    return this.streams.size;
  }

  open(response: ServerResponse, request: WatchRequest): void {
    response.writeHead(200, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
    // Send the headers now: the client's watch() resolves only once they arrive, events or not.
    response.flushHeaders();
    const stream: OpenStream = { response, allowWatchBookmarks: request.allowWatchBookmarks };
    const write = (type: WatchEventType, object: unknown) => {
      if (!response.writableEnded && !response.destroyed)
        response.write(`${JSON.stringify({ type, object })}\n`);
    };

    let lastDelivered: number;
    let initial: [WatchEventType, CiliumNodeObject][];
    if (request.resourceVersion === undefined || request.resourceVersion === 0) {
      initial = this.store.list(request.selector).map((object) => ['ADDED', object]);
      lastDelivered = Number(this.store.resourceVersion);
    } else {
      try {
        initial = this.store
          .eventsAfter(request.resourceVersion)
          .flatMap((e) => translate(e, request.selector));
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        write('ERROR', error.status);
        response.end();
        return;
      }
      lastDelivered = Math.max(request.resourceVersion, Number(this.store.resourceVersion));
    }
    for (const [type, object] of initial) write(type, object);
    if (request.sendInitialEvents && request.allowWatchBookmarks) {
      write('BOOKMARK', bookmark(this.store.resourceVersion, { 'k8s.io/initial-events-end': 'true' }));
    }
    if (request.dropAfterInitialEvents) {
      // Cut the connection once the replay has left, without the closing chunk.
      response.write('', () => response.socket?.destroy());
      return;
    }

    // Subscribing happens in the same tick as the replay, so no write can fall in between.
    const unsubscribe = this.store.subscribe((event) => {
      const revision = Number(event.entry.resourceVersion);
      if (revision <= lastDelivered) return;
      lastDelivered = revision;
      for (const [type, object] of translate(event, request.selector)) write(type, object);
    });
    const timer =
      request.timeoutSeconds === undefined
        ? undefined
        : setTimeout(() => response.end(), request.timeoutSeconds * 1000);
    this.streams.add(stream);
    response.on('close', () => {
      unsubscribe();
      clearTimeout(timer);
      this.streams.delete(stream);
    });
  }

  /** Sends a BOOKMARK at the current resourceVersion to every stream that allows them. */
  sendBookmarks(): number {
    let sent = 0;
    for (const { response, allowWatchBookmarks } of this.streams) {
      if (!allowWatchBookmarks || response.writableEnded) continue;
      response.write(
        `${JSON.stringify({ type: 'BOOKMARK', object: bookmark(this.store.resourceVersion) })}\n`,
      );
      sent++;
    }
    return sent;
  }

  /** Ends every stream cleanly (the client's `done(null)`). */
  endAll(): void {
    for (const { response } of this.streams) response.end();
  }

  /** Destroys every stream's connection; returns how many. */
  dropAll(): number {
    const count = this.streams.size;
    for (const { response } of this.streams) response.socket?.destroy();
    return count;
  }
}

function bookmark(resourceVersion: string, annotations?: Record<string, string>) {
  return {
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { resourceVersion, ...(annotations ? { annotations } : {}) },
  };
}

/** A stored write as the events a watcher with `selector` sees. */
function translate(
  { entry, previous }: StoredEvent,
  selector: Selector,
): [WatchEventType, CiliumNodeObject][] {
  const matchesNow = selector(entry.object);
  const matchedBefore = previous !== undefined && selector(previous);
  switch (entry.type) {
    case 'ADDED':
      return matchesNow ? [['ADDED', entry.object]] : [];
    case 'DELETED':
      return matchedBefore ? [['DELETED', entry.object]] : [];
    case 'MODIFIED':
      if (matchesNow && matchedBefore) return [['MODIFIED', entry.object]];
      if (matchesNow) return [['ADDED', entry.object]];
      if (matchedBefore) return [['DELETED', entry.object]];
      return [];
  }
}
