/**
 * EC2's eventual consistency, the emulator's `eventual-consistency` fault (see faults.ts): for
 * `delayMs` after a CreateNetworkInterface the new ENI is invisible to every API call (Describe
 * does not list it, Attach, Modify, Assign and Delete answer InvalidNetworkInterfaceID.NotFound),
 * and for `delayMs` after an UnassignPrivateIpAddresses, Describe still lists the secondary
 * addresses and /28 prefixes that were unassigned. The state itself changes at once (the address
 * is already free in its subnet and gone from the ENI); only what the API shows lags. A delay of 0
 * (the default) turns it off for calls made from then on.
 */
export class EventualConsistency {
  private delayMs: number;
  /** Per ENI id: each address or prefix unassigned while a delay was set, and until when it is still listed. */
  private readonly lingering = new Map<string, Map<string, number>>();

  constructor(
    private readonly now: () => number,
    delayMs = 0,
  ) {
    this.delayMs = delayMs;
  }

  setDelayMs(milliseconds: number): void {
    this.delayMs = milliseconds;
  }

  /** When an ENI created now becomes visible to the API. */
  visibleAtMsOfNewEni(): number {
    return this.now() + this.delayMs;
  }

  isVisible(visibleAtMs: number): boolean {
    return this.now() >= visibleAtMs;
  }

  /** Records addresses and prefixes just unassigned from an ENI, so Describe keeps listing them for a while. */
  recordUnassigned(networkInterfaceId: string, gone: readonly string[]): void {
    if (this.delayMs <= 0 || gone.length === 0) return;
    const lingering = this.lingering.get(networkInterfaceId) ?? new Map<string, number>();
    for (const entry of gone) lingering.set(entry, this.now() + this.delayMs);
    this.lingering.set(networkInterfaceId, lingering);
  }

  /**
   * What Describe still lists for the ENI beyond `current` (what it holds now): the addresses
   * (`prefixes` false) or /28 prefixes (`prefixes` true) unassigned less than the delay ago and not
   * assigned to it again since.
   */
  stillListed(networkInterfaceId: string, current: readonly string[], prefixes: boolean): string[] {
    const lingering = this.lingering.get(networkInterfaceId);
    if (lingering === undefined) return [];
    const now = this.now();
    return [...lingering]
      .filter(
        ([gone, untilMs]) => untilMs > now && gone.includes('/') === prefixes && !current.includes(gone),
      )
      .map(([gone]) => gone);
  }
}
