import type { LocalCloud } from '../../local-cloud/local-cloud.ts';
import { nowMs } from '../tap.ts';

/**
 * EC2's instance state-change events, delivered by the bench rather than by the local cloud so
 * that a fraction of them can be delivered twice (EventBridge delivers at least once): while
 * `duplicateRate` is above 0, each event is, with that probability, delivered again 0..200 ms
 * later. Also notes when each instance's first `running` event was delivered, where a node's
 * round trips begin.
 */
export class Ec2EventDelivery {
  /** Fraction of events delivered twice, drawn per event from the seeded `random`; 0 until the burst. */
  duplicateRate = 0;
  private runningDelivered = 0;
  private runningDuplicated = 0;
  private readonly firstRunningAt = new Map<string, number>();
  private readonly duplicateTimers = new Set<NodeJS.Timeout>();
  private readonly unsubscribe: () => void;

  constructor(
    private readonly cloud: LocalCloud,
    private readonly random: () => number,
  ) {
    this.unsubscribe = cloud.ec2.state.onInstanceStateChange(({ instanceId, state: eventState }) =>
      this.onStateChange(instanceId, eventState),
    );
  }

  /** `running` events delivered, duplicates included. */
  get eventsDelivered(): number {
    return this.runningDelivered;
  }

  /** `running` events drawn for a second delivery. */
  get eventsDuplicated(): number {
    return this.runningDuplicated;
  }

  /** When each instance's first `running` event was delivered (epoch ms, the taps' clock). */
  get runningEventAt(): ReadonlyMap<string, number> {
    return this.firstRunningAt;
  }

  /** Stops delivering: no new events, and no duplicate still waiting. */
  stop(): void {
    this.unsubscribe();
    for (const timer of this.duplicateTimers) clearTimeout(timer);
  }

  private onStateChange(instanceId: string, eventState: string): void {
    if (eventState === 'running' && !this.firstRunningAt.has(instanceId))
      this.firstRunningAt.set(instanceId, nowMs());
    this.deliver(instanceId, eventState);
    if (this.duplicateRate > 0 && this.random() < this.duplicateRate) {
      if (eventState === 'running') this.runningDuplicated++;
      const timer = setTimeout(
        () => {
          this.duplicateTimers.delete(timer);
          this.deliver(instanceId, eventState);
        },
        Math.floor(this.random() * 200),
      );
      this.duplicateTimers.add(timer);
    }
  }

  /** Hands the event to the Allocate function; its failures are the function's own to log. */
  private deliver(instanceId: string, eventState: string): void {
    if (eventState === 'running') this.runningDelivered++;
    void this.cloud.emitEc2Event(instanceId, eventState).catch(() => {});
  }
}
