import { type Ec2ApiError, ec2Errors } from './errors.ts';
import type { Ec2State } from './state.ts';
import { bucketKeyFor, ThrottleBuckets, type ThrottlingOption } from './throttling.ts';

/**
 * Every fault the EC2 emulator can raise, in one catalogue (`EC2_FAULTS`), and the registry that
 * arms them (`Ec2FaultRegistry`, the emulator's `faults`). A fault is armed in one of three ways:
 *
 * - `per-call`: hits the next calls of one action (optionally only those whose parameters
 *   match), a bounded number of times;
 * - `standing`: a setting in force for every call until it is changed or disarmed;
 * - `hook`: a test's function that runs on every call before it applies.
 *
 * The chaos suite (test/chaos/plan.ts) draws its EC2 faults from this catalogue, and a test there
 * checks that it draws every fault marked `drawn`; a fault it must not draw says why.
 */

export type FaultArming = 'per-call' | 'standing' | 'hook';

export type ChaosDrawing = { readonly drawn: true } | { readonly drawn: false; readonly why: string };

export interface Ec2FaultEntry {
  readonly arming: FaultArming;
  /** What the caller sees. */
  readonly effect: string;
  /** Whether a call the fault hits still applies (when it is otherwise valid). */
  readonly callApplied: 'yes' | 'no' | 'unless-the-hook-throws';
  /** The `faults.arm` form that arms it, and the older ways that delegate to it. */
  readonly armWith: string;
  /** Whether the chaos suite draws it, and if not, why it must not. */
  readonly chaos: ChaosDrawing;
}

/** Per-call faults, armed with `faults.arm` (or `faults.inject`) and consumed one hit at a time. */
export type CallFaultKind = 'server-error' | 'lost-response' | 'throttle';

/** How a `lost-response` loses the answer of the call it applied. */
export type LostResponseForm = 'connection-reset' | 'internal-error';

export interface FaultSpec {
  readonly action: string;
  readonly kind: CallFaultKind;
  /** How many matching calls are hit (default 1; Infinity for all). */
  readonly times?: number;
  /** Only calls whose parameters (the flat Query form) satisfy this are hit. */
  readonly match?: (params: Readonly<Record<string, string>>) => boolean;
  /** For `lost-response`: how the answer is lost (default `connection-reset`). */
  readonly lostResponseAs?: LostResponseForm;
}

/** Runs before a call is applied; may await, or throw an Ec2ApiError to answer the call with it. */
export type BeforeApplyHook = (
  action: string,
  params: Readonly<Record<string, string>>,
) => void | Promise<void>;

export type StandingFault =
  /** A delay of 0 disarms it. */
  | { readonly kind: 'eventual-consistency'; readonly delayMs: number }
  /** `true`: AWS's published buckets; an object overrides single buckets; `false` disarms. */
  | { readonly kind: 'rate-limit'; readonly throttling: ThrottlingOption }
  /** `fragmented: false` makes the subnet whole again (default true). */
  | { readonly kind: 'fragmented-subnet'; readonly subnetId: string; readonly fragmented?: boolean };

/** `hook: undefined` disarms it. */
export type HookFault = { readonly kind: 'before-apply'; readonly hook: BeforeApplyHook | undefined };

/** What `faults.arm` takes: one fault of the catalogue, with what it needs. */
export type Ec2Fault = FaultSpec | StandingFault | HookFault;

const DRAWN_BY_CHAOS = { drawn: true } as const;

/**
 * The catalogue: exactly one entry per kind `faults.arm` accepts (the `satisfies` clause fails the
 * build on a missing or an extra entry).
 */
export const EC2_FAULTS = {
  'server-error': {
    arming: 'per-call',
    effect: 'answers 500 InternalError',
    callApplied: 'no',
    armWith: "faults.arm({ kind: 'server-error', action, times?, match? }), or faults.inject",
    chaos: DRAWN_BY_CHAOS,
  },
  'lost-response': {
    arming: 'per-call',
    effect:
      'applies the call, then loses its answer (or the EC2 error it raised): the connection is reset, or with lostResponseAs internal-error the answer is 500 InternalError',
    callApplied: 'yes',
    armWith:
      "faults.arm({ kind: 'lost-response', action, times?, match?, lostResponseAs? }), or faults.inject",
    chaos: DRAWN_BY_CHAOS,
  },
  throttle: {
    arming: 'per-call',
    effect: 'answers 503 RequestLimitExceeded without taking a token from the rate-limit buckets',
    callApplied: 'no',
    armWith: "faults.arm({ kind: 'throttle', action, times?, match? }), or faults.inject",
    chaos: DRAWN_BY_CHAOS,
  },
  'eventual-consistency': {
    arming: 'standing',
    effect:
      'for delayMs after its create a new ENI is invisible to every call (absent from Describe, InvalidNetworkInterfaceID.NotFound elsewhere); for delayMs after an unassign Describe still lists the unassigned addresses and prefixes',
    callApplied: 'yes',
    armWith:
      "faults.arm({ kind: 'eventual-consistency', delayMs }), or setEventualConsistencyMs, or the eventualConsistencyMs option",
    chaos: DRAWN_BY_CHAOS,
  },
  'rate-limit': {
    arming: 'standing',
    effect:
      "AWS's token bucket per action (throttling.ts), or overridden buckets: a call that finds its bucket empty answers 503 RequestLimitExceeded",
    callApplied: 'no',
    armWith: "faults.arm({ kind: 'rate-limit', throttling }), or setThrottling, or the throttling option",
    chaos: DRAWN_BY_CHAOS,
  },
  'fragmented-subnet': {
    arming: 'standing',
    effect:
      'a request for /28 prefixes in the subnet fails with InsufficientCidrBlocks; single addresses still work',
    callApplied: 'no',
    armWith: "faults.arm({ kind: 'fragmented-subnet', subnetId, fragmented? }), or state.setSubnetFragmented",
    chaos: {
      drawn: false,
      why: 'the chaos stack runs with prefix delegation off (cdk.json eni-ipam:prefixDelegation false): none of its calls asks for a prefix, so the fault would change nothing; test/scenarios/prefix-delegation.test.ts covers it',
    },
  },
  'before-apply': {
    arming: 'hook',
    effect:
      'a test function runs once the call passed throttling, per-call faults, IAM and DryRun, just before it applies: it may await (delaying the call), throw an Ec2ApiError (answered instead), or act meanwhile (the chaos suite kills the calling function there)',
    callApplied: 'unless-the-hook-throws',
    armWith: "faults.arm({ kind: 'before-apply', hook }), or setBeforeApply, or the beforeApply option",
    chaos: DRAWN_BY_CHAOS,
  },
} as const satisfies { readonly [Kind in Ec2Fault['kind']]: Ec2FaultEntry };

export type Ec2FaultKind = keyof typeof EC2_FAULTS;

export interface InjectedFault {
  readonly spec: FaultSpec;
  /** Calls this fault has hit so far. */
  readonly hits: number;
  readonly remaining: number;
}

/** Whether a call may go on to authorization and the state, and if so whether its answer is lost. */
export type CallAdmission =
  | { readonly admitted: false; readonly refusal: Ec2ApiError }
  | { readonly admitted: true; readonly loseAnswerAs: LostResponseForm | undefined };

export interface FaultRegistryOptions {
  /** The rate-limit fault from the start (default false). */
  readonly throttling?: ThrottlingOption;
  /** The before-apply hook from the start (default none). */
  readonly beforeApply?: BeforeApplyHook;
}

interface ArmedCallFault {
  spec: FaultSpec;
  hits: number;
  remaining: number;
}

export class Ec2FaultRegistry {
  /** The `rate-limit` fault's token buckets (e.g. `tokens(...)` for a test, `reset()` to refill them). */
  readonly rateLimits: ThrottleBuckets;
  private callFaults: ArmedCallFault[] = [];
  private hook: BeforeApplyHook | undefined;
  /** Subnets fragmented through `arm`, which `disarmAll` makes whole again. */
  private readonly fragmentedSubnetIds = new Set<string>();

  constructor(
    private readonly state: Ec2State,
    options: FaultRegistryOptions = {},
  ) {
    this.rateLimits = new ThrottleBuckets(() => state.now(), options.throttling ?? false);
    this.hook = options.beforeApply;
  }

  /**
   * Arms one fault of the catalogue. A per-call fault is added after those already armed (the
   * first armed one that matches a call hits it) and returns its handle; a standing fault or the
   * hook replaces the previous setting of its kind (for `fragmented-subnet`: of that subnet).
   */
  arm(fault: FaultSpec): InjectedFault;
  arm(fault: StandingFault | HookFault): void;
  arm(fault: Ec2Fault): InjectedFault | undefined;
  arm(fault: Ec2Fault): InjectedFault | undefined {
    switch (fault.kind) {
      case 'server-error':
      case 'lost-response':
      case 'throttle':
        return this.inject(fault);
      case 'eventual-consistency':
        this.state.setEventualConsistencyMs(fault.delayMs);
        return undefined;
      case 'rate-limit':
        this.rateLimits.configure(fault.throttling);
        return undefined;
      case 'fragmented-subnet': {
        const fragmented = fault.fragmented ?? true;
        this.state.setSubnetFragmented(fault.subnetId, fragmented);
        if (fragmented) this.fragmentedSubnetIds.add(fault.subnetId);
        else this.fragmentedSubnetIds.delete(fault.subnetId);
        return undefined;
      }
      case 'before-apply':
        this.hook = fault.hook;
        return undefined;
    }
  }

  /** Arms a per-call fault (the same as `arm` with a per-call kind). */
  inject(spec: FaultSpec): InjectedFault {
    const fault: ArmedCallFault = { spec, hits: 0, remaining: spec.times ?? 1 };
    this.callFaults.push(fault);
    return fault;
  }

  /** Per-call faults that can still hit. */
  pending(): InjectedFault[] {
    return this.callFaults.filter((fault) => fault.remaining > 0);
  }

  /** Disarms the per-call faults only; standing faults and the hook stay. */
  clear(): void {
    this.callFaults = [];
  }

  /**
   * Disarms every fault: no per-call fault, no eventual consistency, no rate limit (even AWS's
   * buckets armed by the `throttling` option), no hook, and the subnets fragmented through `arm`
   * whole again.
   */
  disarmAll(): void {
    this.clear();
    this.arm({ kind: 'eventual-consistency', delayMs: 0 });
    this.arm({ kind: 'rate-limit', throttling: false });
    this.arm({ kind: 'before-apply', hook: undefined });
    for (const subnetId of [...this.fragmentedSubnetIds]) {
      this.arm({ kind: 'fragmented-subnet', subnetId, fragmented: false });
    }
  }

  /**
   * The fault steps of a call, in order: its rate-limit bucket (a throttled call uses no per-call
   * fault), then the first armed per-call fault that matches it, whose hit is consumed. A refused
   * call must change nothing; an admitted one with `loseAnswerAs` must apply, then lose its answer.
   */
  admit(action: string, params: Readonly<Record<string, string>>): CallAdmission {
    if (!this.rateLimits.tryTake(bucketKeyFor(action, Object.keys(params)))) {
      return { admitted: false, refusal: ec2Errors.requestLimitExceeded() };
    }
    const fault = this.takeCallFault(action, params);
    switch (fault?.kind) {
      case 'throttle':
        return { admitted: false, refusal: ec2Errors.requestLimitExceeded() };
      case 'server-error':
        return { admitted: false, refusal: ec2Errors.internalError() };
      case 'lost-response':
        return { admitted: true, loseAnswerAs: fault.lostResponseAs ?? 'connection-reset' };
      case undefined:
        return { admitted: true, loseAnswerAs: undefined };
    }
  }

  /** Runs the before-apply hook, if armed, for a call about to apply. */
  async beforeApply(action: string, params: Readonly<Record<string, string>>): Promise<void> {
    await this.hook?.(action, params);
  }

  private takeCallFault(action: string, params: Readonly<Record<string, string>>): FaultSpec | undefined {
    const fault = this.callFaults.find(
      (candidate) =>
        candidate.remaining > 0 &&
        candidate.spec.action === action &&
        (candidate.spec.match?.(params) ?? true),
    );
    if (!fault) return undefined;
    fault.remaining -= 1;
    fault.hits += 1;
    return fault.spec;
  }
}
