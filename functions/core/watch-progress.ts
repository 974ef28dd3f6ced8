/**
 * The watcher's resume point. Events arrive in resourceVersion order; some finish at once (nothing
 * to start), others only when the work they started for their node is done, in any order. The
 * checkpoint is the resourceVersion of the last event of the longest finished prefix, so a
 * watcher that resumes from it re-sees every event whose work might not have happened (no node
 * missed) and none before. resourceVersions are opaque: they are only stored, never compared.
 */
export class WatchProgress {
  private readonly entries: { readonly resourceVersion: string; done: boolean }[] = [];
  private lastFinished: string | undefined;

  constructor(resumeFrom?: string) {
    this.lastFinished = resumeFrom;
  }

  /** Records an event; the returned callback marks its work finished (idempotent). */
  add(resourceVersion: string): () => void {
    const entry = { resourceVersion, done: false };
    this.entries.push(entry);
    return () => {
      entry.done = true;
      this.advance();
    };
  }

  /** Records an event whose work is already finished (no work, a bookmark, a relist point). */
  addFinished(resourceVersion: string): void {
    this.add(resourceVersion)();
  }

  /** Where a new watcher must resume: every event up to it is finished. */
  checkpoint(): string | undefined {
    return this.lastFinished;
  }

  /** Events still waiting for their work. */
  pending(): number {
    return this.entries.length;
  }

  private advance(): void {
    while (this.entries[0]?.done) {
      this.lastFinished = (this.entries.shift() as { resourceVersion: string }).resourceVersion;
    }
  }
}
