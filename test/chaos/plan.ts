import {
  type CallFaultKind,
  EC2_FAULTS,
  type Ec2FaultKind,
  type FaultSpec,
  type StandingFault,
} from '../emulators/ec2/faults.ts';
import type { ThrottlingOption } from '../emulators/ec2/throttling.ts';
import { Prng } from './prng.ts';

/**
 * A chaos run's plan: everything random about a run, drawn up front from its seed, so the same
 * seed gives the same nodes, knobs, faults, crashes and event deliveries. (What the plan cannot fix
 * is the interleaving of concurrent invocations: the same plan may race differently twice.)
 */

const INSTANCE_TYPES = [
  'm5.large',
  't3.medium',
  'c5.xlarge',
  'r5.large',
  'm5.2xlarge',
  't3.small',
  't2.medium',
  'c5.large',
] as const;

/** Where a function dies: just after EC2 applied the named call, or after a sync's status write. */
export type CrashPoint =
  | 'after-create-network-interface'
  | 'after-attach-network-interface'
  | 'after-modify-network-interface-attribute'
  | 'between-status-and-spec-write';

const CRASH_POINTS: readonly CrashPoint[] = [
  'after-create-network-interface',
  'after-attach-network-interface',
  'after-modify-network-interface-attribute',
  'between-status-and-spec-write',
];

type K8sFaultKind =
  | 'server-error'
  | 'conflict'
  | 'drop-connection'
  | 'drop-after-apply'
  | 'too-many-requests';

export interface NodePlan {
  readonly instanceType: string;
  readonly subnet: 'nodesA' | 'nodesB';
  readonly launchAtMs: number;
  /** When the simulated agent registers its CiliumNode, after the launch. */
  readonly agentDelayMs: number;
  /** The knobs the agent's CiliumNode carries (absent: not set, the stack default applies). */
  readonly knobs: {
    readonly firstInterfaceIndex?: number;
    readonly minAllocate?: number;
    readonly preAllocate?: number;
  };
  /** Set for a node terminated during the fault phase. */
  readonly terminateAtMs?: number;
  /** When (after the launch) the agent reports pods on `usedCount` pool IPs in `status.ipam.used`. */
  readonly reportUsed?: { readonly afterMs: number; readonly usedCount: number };
  /** The cilium-agent version the node starts with: the CRD protocol (1.19) or multi-pool (1.20). */
  readonly agentVersion: '1.19' | '1.20';
  /** When (after the launch) the agent is upgraded or downgraded in place to the other version. */
  readonly switchVersionAfterMs?: number;
  /**
   * eth0 launched with our ownership tags (a launch template's), so the allocator may fill it
   * before the agent registers its `first-interface-index`: the knob-change case (0 to 1 after
   * eth0 was filled) that the 1.19 side answers with the release-ips handshake. Drawn only for
   * nodes that stay on 1.19: a 1.20 agent excludes eth0 itself and cannot restore pods holding its
   * IPs after an in-place upgrade, whatever the allocator does (README, limits).
   */
  readonly eth0Ours?: boolean;
}

interface EventDelivery {
  readonly atMs: number;
  readonly node: number;
  readonly state: 'pending' | 'running' | 'shutting-down' | 'terminated';
}

/** A per-call fault of the emulator's catalogue as the plan arms it: plain data, no matcher. */
interface CallFaultPlan extends Omit<FaultSpec, 'match' | 'times'> {
  readonly times: number;
}

/** An EC2 fault of the emulator's catalogue (`EC2_FAULTS`), armed with `faults.arm` for the fault phase. */
type Ec2FaultPlan = CallFaultPlan | StandingFault;

interface K8sFaultPlan {
  readonly verb: 'get' | 'create' | 'patch' | 'list';
  readonly subresource?: 'main' | 'status';
  /** Only the CiliumNode of this node, or any. */
  readonly node?: number;
  readonly kind: K8sFaultKind;
  readonly times: number;
}

export interface CrashPlan {
  readonly point: CrashPoint;
  /** Only an invocation working on this node, or the first one to get there. */
  readonly node?: number;
  readonly times: number;
}

export interface RunPlan {
  readonly seed: number;
  readonly nodes: readonly NodePlan[];
  readonly faultPhaseMs: number;
  readonly events: readonly EventDelivery[];
  /**
   * The EC2 faults of the fault phase: per-call faults, then standing ones (eventual consistency,
   * small token buckets). The `before-apply` fault is the crashes at EC2 calls.
   */
  readonly ec2Faults: readonly Ec2FaultPlan[];
  readonly k8sFaults: readonly K8sFaultPlan[];
  readonly crashes: readonly CrashPlan[];
  /** Chance that a successfully processed stream batch is delivered again. */
  readonly streamRedeliveryProbability: number;
  /** Schedule firings (sweep, garbage collection, resync) during the fault phase. */
  readonly scheduleFiringsAtMs: readonly number[];
}

const MUTATING_ACTIONS = [
  'CreateNetworkInterface',
  'AttachNetworkInterface',
  'ModifyNetworkInterfaceAttribute',
  'AssignPrivateIpAddresses',
  'DeleteNetworkInterface',
] as const;
const READ_ACTIONS = [
  'DescribeInstances',
  'DescribeNetworkInterfaces',
  'DescribeSubnets',
  'DescribeVpcs',
  'DescribeInstanceTypes',
] as const;

/** The EC2 calls whose crash points are armed through the emulator's `before-apply` fault. */
export const CRASH_POINT_OF_EC2_ACTION: Readonly<Record<string, CrashPoint>> = {
  CreateNetworkInterface: 'after-create-network-interface',
  AttachNetworkInterface: 'after-attach-network-interface',
  ModifyNetworkInterfaceAttribute: 'after-modify-network-interface-attribute',
};

/** The catalogue's kinds the chaos suite draws (`chaos.drawn` true). */
type DrawnEc2FaultKind = {
  [Kind in Ec2FaultKind]: (typeof EC2_FAULTS)[Kind]['chaos']['drawn'] extends true ? Kind : never;
}[Ec2FaultKind];

/**
 * How often each drawn per-call fault is picked (relative weights) for a mutating and for a read
 * call. A lost read answer is a server error (a read applies nothing), so reads never draw it.
 */
const CALL_FAULT_WEIGHTS: {
  readonly [Kind in Extract<CallFaultKind, DrawnEc2FaultKind>]: {
    readonly mutating: number;
    readonly read: number;
  };
} = {
  'server-error': { mutating: 1, read: 1 },
  'lost-response': { mutating: 2, read: 0 },
  throttle: { mutating: 1, read: 1 },
};

/** Each drawn per-call kind as often as its weight, in the catalogue's order. */
function weightedCallFaultKinds(call: 'mutating' | 'read'): CallFaultKind[] {
  return (Object.keys(CALL_FAULT_WEIGHTS) as (keyof typeof CALL_FAULT_WEIGHTS)[])
    .sort((left, right) => catalogueOrder(left) - catalogueOrder(right))
    .flatMap((kind) => Array.from({ length: CALL_FAULT_WEIGHTS[kind][call] }, () => kind));
}

function catalogueOrder(kind: Ec2FaultKind): number {
  return Object.keys(EC2_FAULTS).indexOf(kind);
}

const MUTATING_CALL_FAULTS = weightedCallFaultKinds('mutating');
const READ_CALL_FAULTS = weightedCallFaultKinds('read');

/**
 * A draw per drawn standing fault, made in this order after every other draw of the plan (so a
 * seed draws what it drew before the catalogue existed); undefined: not armed in this run.
 */
const STANDING_FAULT_DRAWS: {
  readonly [Kind in Extract<StandingFault['kind'], DrawnEc2FaultKind>]: (
    random: Prng,
  ) => Extract<StandingFault, { kind: Kind }> | undefined;
} = {
  'eventual-consistency': (random) => {
    const delayMs = random.pick([0, 0, 200, 800, 1_500]);
    return delayMs === 0 ? undefined : { kind: 'eventual-consistency', delayMs };
  },
  'rate-limit': (random) =>
    random.chance(0.5)
      ? {
          kind: 'rate-limit',
          throttling: {
            buckets: {
              CreateNetworkInterface: { burst: random.int(2, 6), refillPerSecond: random.int(1, 4) },
              AttachNetworkInterface: { burst: random.int(2, 6), refillPerSecond: random.int(1, 4) },
              AssignPrivateIpAddresses: { burst: random.int(2, 6), refillPerSecond: random.int(1, 4) },
              DescribeNetworkInterfaces: { burst: random.int(5, 15), refillPerSecond: random.int(3, 10) },
            },
          },
        }
      : undefined,
};

/** The shapes of Kubernetes fault the plan picks from, in pick order. */
const K8S_FAULT_SHAPES = {
  'status-conflict': { verb: 'patch', subresource: 'status', kind: 'conflict' },
  'main-conflict': { verb: 'patch', subresource: 'main', kind: 'conflict' },
  'status-5xx': { verb: 'patch', subresource: 'status', kind: 'server-error' },
  'get-5xx': { verb: 'get', kind: 'server-error' },
  'create-5xx': { verb: 'create', kind: 'server-error', once: true, anyNode: true },
  'status-drop-after-apply': { verb: 'patch', subresource: 'status', kind: 'drop-after-apply' },
  'main-drop-connection': { verb: 'patch', subresource: 'main', kind: 'drop-connection' },
  'main-drop-after-apply': { verb: 'patch', subresource: 'main', kind: 'drop-after-apply', once: true },
  'list-429': { verb: 'list', kind: 'too-many-requests', once: true, anyNode: true },
} as const satisfies Record<string, K8sFaultShape>;

interface K8sFaultShape {
  readonly verb: K8sFaultPlan['verb'];
  readonly subresource?: 'main' | 'status';
  readonly kind: K8sFaultKind;
  /** Hits once, whatever number of times was drawn. */
  readonly once?: true;
  /** Hits any node's CiliumNode, even when a node was drawn. */
  readonly anyNode?: true;
}

/**
 * Draws a run's plan from its seed, phase by phase in a fixed order (nodes, EC2 events, per-call
 * EC2 faults, Kubernetes faults, crashes, schedule firings, standing EC2 faults, stream
 * redelivery): a phase that draws differently shifts every later phase of a seed.
 */
export function planRun(seed: number): RunPlan {
  const random = new Prng(seed);
  const nodeCount = random.int(3, 8);
  const faultPhaseMs = random.int(2_500, 5_000);
  const nodes = drawNodes(random, nodeCount, faultPhaseMs);
  const events = drawEvents(random, nodes);
  const callFaults = drawCallFaults(random);
  const k8sFaults = drawK8sFaults(random, nodeCount);
  const crashes = drawCrashes(random, nodeCount);
  const scheduleFiringsAtMs = drawScheduleFirings(random, faultPhaseMs);
  const standingFaults = drawStandingFaults(random);
  return {
    seed,
    nodes,
    faultPhaseMs,
    events,
    ec2Faults: [...callFaults, ...standingFaults],
    k8sFaults,
    crashes,
    streamRedeliveryProbability: random.pick([0, 0.2, 0.5]),
    scheduleFiringsAtMs,
  };
}

/** The kinds of the emulator's catalogue a plan arms, the crashes at EC2 calls as `before-apply`. */
export function ec2FaultKindsOf(plan: RunPlan): Set<Ec2FaultKind> {
  const kinds = new Set<Ec2FaultKind>(plan.ec2Faults.map((fault) => fault.kind));
  const ec2CrashPoints = new Set(Object.values(CRASH_POINT_OF_EC2_ACTION));
  if (plan.crashes.some((crash) => ec2CrashPoints.has(crash.point))) kinds.add('before-apply');
  return kinds;
}

function drawNodes(random: Prng, nodeCount: number, faultPhaseMs: number): NodePlan[] {
  const nodes: NodePlan[] = [];
  // Agent versions come from their own stream, so adding them left every other draw of a seed as it was.
  const agents = random.fork('agent-versions');
  const terminated = random.chance(0.3) ? random.int(0, nodeCount - 1) : undefined;
  for (let index = 0; index < nodeCount; index++) {
    const launchAtMs = random.int(0, 600);
    nodes.push({
      instanceType: random.pick(INSTANCE_TYPES),
      subnet: random.chance(0.5) ? 'nodesA' : 'nodesB',
      launchAtMs,
      agentDelayMs: random.pick([0, 0, 100, 400, 1_200, 2_500]),
      knobs: {
        ...(random.chance(0.5) ? { firstInterfaceIndex: random.int(0, 1) } : {}),
        ...(random.chance(0.4) ? { minAllocate: random.pick([4, 10, 20]) } : {}),
        ...(random.chance(0.3) ? { preAllocate: random.pick([2, 8, 12]) } : {}),
      },
      ...(index === terminated ? { terminateAtMs: launchAtMs + random.int(800, faultPhaseMs - 300) } : {}),
      ...(random.chance(0.5)
        ? { reportUsed: { afterMs: random.int(800, 3_000), usedCount: random.int(1, 6) } }
        : {}),
      agentVersion: agents.chance(0.5) ? '1.20' : '1.19',
      ...(agents.chance(0.3) ? { switchVersionAfterMs: agents.int(1_500, 4_000) } : {}),
    });
  }

  // eth0 ownership from its own stream too, so every earlier draw of a seed is as it was.
  const eth0 = random.fork('eth0-ownership');
  return nodes.map((node) => {
    const staysOn119 = node.agentVersion === '1.19' && node.switchVersionAfterMs === undefined;
    return eth0.chance(0.4) && staysOn119 ? { ...node, eth0Ours: true } : node;
  });
}

/**
 * EC2 events: each delivered 1-3 times at random moments (so shuffled with the other nodes'),
 * sometimes a stale `pending` after `running`, and for a terminated node its termination events
 * (and sometimes a stale `running` after them).
 */
function drawEvents(random: Prng, nodes: readonly NodePlan[]): EventDelivery[] {
  const events: EventDelivery[] = [];
  for (const [node, plan] of nodes.entries()) {
    const deliveries = random.int(1, 3);
    for (let copy = 0; copy < deliveries; copy++) {
      events.push({ atMs: plan.launchAtMs + random.int(0, 1_500), node, state: 'running' });
    }
    if (random.chance(0.3)) {
      events.push({ atMs: plan.launchAtMs + random.int(300, 2_000), node, state: 'pending' });
    }
    if (plan.terminateAtMs !== undefined) {
      for (const state of ['shutting-down', 'terminated'] as const) {
        const copies = random.int(1, 2);
        for (let copy = 0; copy < copies; copy++) {
          events.push({ atMs: plan.terminateAtMs + random.int(0, 800), node, state });
        }
      }
      if (random.chance(0.5)) {
        events.push({ atMs: plan.terminateAtMs + random.int(200, 1_000), node, state: 'running' });
      }
    }
  }
  return events.sort((left, right) => left.atMs - right.atMs);
}

/** 2-7 per-call EC2 faults, seven in ten on a mutating call. */
function drawCallFaults(random: Prng): CallFaultPlan[] {
  const faults: CallFaultPlan[] = [];
  for (let count = random.int(2, 7); count > 0; count--) {
    const mutating = random.chance(0.7);
    faults.push({
      action: mutating ? random.pick(MUTATING_ACTIONS) : random.pick(READ_ACTIONS),
      kind: random.pick(mutating ? MUTATING_CALL_FAULTS : READ_CALL_FAULTS),
      times: random.int(1, 3),
    });
  }
  return faults;
}

/** 1-5 Kubernetes faults, half of them on one node's CiliumNode. */
function drawK8sFaults(random: Prng, nodeCount: number): K8sFaultPlan[] {
  const faults: K8sFaultPlan[] = [];
  for (let count = random.int(1, 5); count > 0; count--) {
    const node = random.chance(0.5) ? random.int(0, nodeCount - 1) : undefined;
    const shape: K8sFaultShape =
      K8S_FAULT_SHAPES[random.pick(Object.keys(K8S_FAULT_SHAPES) as (keyof typeof K8S_FAULT_SHAPES)[])];
    const times = random.int(1, 3);
    faults.push({
      verb: shape.verb,
      ...(shape.subresource === undefined ? {} : { subresource: shape.subresource }),
      kind: shape.kind,
      times: shape.once ? 1 : times,
      ...(node === undefined || shape.anyNode ? {} : { node }),
    });
  }
  return faults;
}

/** 1-3 distinct crash points, each armed once or twice, half of them for one node. */
function drawCrashes(random: Prng, nodeCount: number): CrashPlan[] {
  return random
    .shuffle(CRASH_POINTS)
    .slice(0, random.int(1, 3))
    .map((point) => ({
      point,
      times: random.int(1, 2),
      ...(random.chance(0.5) ? { node: random.int(0, nodeCount - 1) } : {}),
    }));
}

/** 0-3 schedule firings (sweep, garbage collection, resync) during the fault phase. */
function drawScheduleFirings(random: Prng, faultPhaseMs: number): number[] {
  const firings: number[] = [];
  for (let count = random.int(0, 3); count > 0; count--) firings.push(random.int(300, faultPhaseMs));
  return firings.sort((left, right) => left - right);
}

function drawStandingFaults(random: Prng): StandingFault[] {
  return Object.values(STANDING_FAULT_DRAWS).flatMap((draw) => draw(random) ?? []);
}

/** One line per aspect of the plan, for the run's report. */
export function describePlan(plan: RunPlan): string[] {
  const nodes = plan.nodes.map((node, index) => {
    const knobs = Object.entries(node.knobs)
      .map(([name, value]) => `${name}=${value}`)
      .join(',');
    const agent = `${node.agentVersion}${node.switchVersionAfterMs === undefined ? '' : `→${node.agentVersion === '1.19' ? '1.20' : '1.19'}`}`;
    return `#${index} ${node.instanceType} agent ${agent}${knobs ? ` {${knobs}}` : ''}${node.eth0Ours ? ' eth0 ours' : ''}${node.terminateAtMs === undefined ? '' : ' (terminated)'}`;
  });
  const deliveries = plan.events.filter((event) => event.state === 'running').length;
  return [
    `nodes: ${nodes.join('; ')}`,
    `ec2 faults: ${plan.ec2Faults.map(describeEc2Fault).join(', ') || 'none'}`,
    `k8s faults: ${plan.k8sFaults.map((fault) => `${fault.verb}${fault.subresource ? `/${fault.subresource}` : ''}${fault.node === undefined ? '' : ` #${fault.node}`} ${fault.kind} x${fault.times}`).join(', ')}`,
    `crashes: ${plan.crashes.map((crash) => `${crash.point}${crash.node === undefined ? '' : ` #${crash.node}`} x${crash.times}`).join(', ')}`,
    `events: ${plan.events.length} deliveries (${deliveries} running for ${plan.nodes.length} nodes); stream redelivery ${plan.streamRedeliveryProbability}; ${plan.scheduleFiringsAtMs.length} schedule firings; fault phase ${plan.faultPhaseMs} ms`,
  ];
}

function describeEc2Fault(fault: Ec2FaultPlan): string {
  switch (fault.kind) {
    case 'server-error':
    case 'lost-response':
    case 'throttle':
      return `${fault.action} ${fault.kind}${fault.lostResponseAs ? ` as ${fault.lostResponseAs}` : ''} x${fault.times}`;
    case 'eventual-consistency':
      return `eventual consistency ${fault.delayMs} ms`;
    case 'rate-limit':
      return `rate limit ${describeThrottling(fault.throttling)}`;
    case 'fragmented-subnet':
      return `${fault.subnetId} fragmented`;
  }
}

function describeThrottling(throttling: ThrottlingOption): string {
  if (typeof throttling === 'boolean') return throttling ? "AWS's buckets" : 'off';
  return Object.entries(throttling.buckets ?? {})
    .map(([bucket, spec]) => `${bucket} ${spec.burst}+${spec.refillPerSecond}/s`)
    .join(' ');
}
