import { Prng } from './prng.ts';

/**
 * A chaos run's plan: everything random about a run, drawn up front from its seed, so the same
 * seed gives the same nodes, knobs, faults, crashes and event deliveries. (What the plan cannot fix
 * is the interleaving of concurrent invocations: the same plan may race differently twice.)
 */

export const INSTANCE_TYPES = [
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

export const CRASH_POINTS: readonly CrashPoint[] = [
  'after-create-network-interface',
  'after-attach-network-interface',
  'after-modify-network-interface-attribute',
  'between-status-and-spec-write',
];

export type Ec2FaultKind = 'server-error' | 'lost-response' | 'throttle';
export type K8sFaultKind =
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

export interface EventDelivery {
  readonly atMs: number;
  readonly node: number;
  readonly state: 'pending' | 'running' | 'shutting-down' | 'terminated';
}

export interface Ec2FaultPlan {
  readonly action: string;
  readonly kind: Ec2FaultKind;
  readonly times: number;
}

export interface K8sFaultPlan {
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
  readonly ec2Faults: readonly Ec2FaultPlan[];
  readonly k8sFaults: readonly K8sFaultPlan[];
  readonly crashes: readonly CrashPlan[];
  /** New ENIs invisible to Describe for this long during the fault phase. */
  readonly eventualConsistencyMs: number;
  /** Small token buckets for the mutating calls during the fault phase, or none. */
  readonly throttling: false | Readonly<Record<string, { burst: number; refillPerSecond: number }>>;
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

export function planRun(seed: number): RunPlan {
  const random = new Prng(seed);
  const nodeCount = random.int(3, 8);
  const faultPhaseMs = random.int(2_500, 5_000);
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
  for (const [index, node] of nodes.entries()) {
    const staysOn119 = node.agentVersion === '1.19' && node.switchVersionAfterMs === undefined;
    if (eth0.chance(0.4) && staysOn119) nodes[index] = { ...node, eth0Ours: true };
  }

  // EC2 events: each delivered 1-3 times at random moments (so shuffled with the other nodes'),
  // sometimes a stale `pending` after `running`, and for a terminated node its termination events
  // (and sometimes a stale `running` after them).
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
  events.sort((left, right) => left.atMs - right.atMs);

  const ec2Faults: Ec2FaultPlan[] = [];
  for (let count = random.int(2, 7); count > 0; count--) {
    const mutating = random.chance(0.7);
    ec2Faults.push({
      action: mutating ? random.pick(MUTATING_ACTIONS) : random.pick(READ_ACTIONS),
      kind: mutating
        ? random.pick(['server-error', 'lost-response', 'lost-response', 'throttle'] as const)
        : random.pick(['server-error', 'throttle'] as const),
      times: random.int(1, 3),
    });
  }

  const k8sFaults: K8sFaultPlan[] = [];
  for (let count = random.int(1, 5); count > 0; count--) {
    const node = random.chance(0.5) ? random.int(0, nodeCount - 1) : undefined;
    const shape = random.pick([
      'status-conflict',
      'main-conflict',
      'status-5xx',
      'get-5xx',
      'create-5xx',
      'status-drop-after-apply',
      'main-drop-connection',
      'main-drop-after-apply',
      'list-429',
    ] as const);
    const times = random.int(1, 3);
    const withNode = node === undefined || shape === 'list-429' ? {} : { node };
    switch (shape) {
      case 'status-conflict':
        k8sFaults.push({ verb: 'patch', subresource: 'status', kind: 'conflict', times, ...withNode });
        break;
      case 'main-conflict':
        k8sFaults.push({ verb: 'patch', subresource: 'main', kind: 'conflict', times, ...withNode });
        break;
      case 'status-5xx':
        k8sFaults.push({ verb: 'patch', subresource: 'status', kind: 'server-error', times, ...withNode });
        break;
      case 'get-5xx':
        k8sFaults.push({ verb: 'get', kind: 'server-error', times, ...withNode });
        break;
      case 'create-5xx':
        k8sFaults.push({ verb: 'create', kind: 'server-error', times: 1 });
        break;
      case 'status-drop-after-apply':
        k8sFaults.push({
          verb: 'patch',
          subresource: 'status',
          kind: 'drop-after-apply',
          times,
          ...withNode,
        });
        break;
      case 'main-drop-connection':
        k8sFaults.push({ verb: 'patch', subresource: 'main', kind: 'drop-connection', times, ...withNode });
        break;
      case 'main-drop-after-apply':
        k8sFaults.push({
          verb: 'patch',
          subresource: 'main',
          kind: 'drop-after-apply',
          times: 1,
          ...withNode,
        });
        break;
      case 'list-429':
        k8sFaults.push({ verb: 'list', kind: 'too-many-requests', times: 1 });
        break;
    }
  }

  const crashes: CrashPlan[] = [];
  for (const point of random.shuffle(CRASH_POINTS).slice(0, random.int(1, 3))) {
    crashes.push({
      point,
      times: random.int(1, 2),
      ...(random.chance(0.5) ? { node: random.int(0, nodeCount - 1) } : {}),
    });
  }

  const scheduleFiringsAtMs: number[] = [];
  for (let count = random.int(0, 3); count > 0; count--)
    scheduleFiringsAtMs.push(random.int(300, faultPhaseMs));
  scheduleFiringsAtMs.sort((left, right) => left - right);

  return {
    seed,
    nodes,
    faultPhaseMs,
    events,
    ec2Faults,
    k8sFaults,
    crashes,
    eventualConsistencyMs: random.pick([0, 0, 200, 800, 1_500]),
    throttling: random.chance(0.5)
      ? {
          CreateNetworkInterface: { burst: random.int(2, 6), refillPerSecond: random.int(1, 4) },
          AttachNetworkInterface: { burst: random.int(2, 6), refillPerSecond: random.int(1, 4) },
          AssignPrivateIpAddresses: { burst: random.int(2, 6), refillPerSecond: random.int(1, 4) },
          DescribeNetworkInterfaces: { burst: random.int(5, 15), refillPerSecond: random.int(3, 10) },
        }
      : false,
    streamRedeliveryProbability: random.pick([0, 0.2, 0.5]),
    scheduleFiringsAtMs,
  };
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
    `ec2 faults: ${plan.ec2Faults.map((fault) => `${fault.action} ${fault.kind} x${fault.times}`).join(', ') || 'none'}; eventual consistency ${plan.eventualConsistencyMs} ms; throttling ${plan.throttling ? 'small buckets' : 'off'}`,
    `k8s faults: ${plan.k8sFaults.map((fault) => `${fault.verb}${fault.subresource ? `/${fault.subresource}` : ''}${fault.node === undefined ? '' : ` #${fault.node}`} ${fault.kind} x${fault.times}`).join(', ')}`,
    `crashes: ${plan.crashes.map((crash) => `${crash.point}${crash.node === undefined ? '' : ` #${crash.node}`} x${crash.times}`).join(', ')}`,
    `events: ${plan.events.length} deliveries (${deliveries} running for ${plan.nodes.length} nodes); stream redelivery ${plan.streamRedeliveryProbability}; ${plan.scheduleFiringsAtMs.length} schedule firings; fault phase ${plan.faultPhaseMs} ms`,
  ];
}
