import type { Ec2Emulator } from '../emulators/ec2/index.ts';
import { MultiPoolAgentModel } from '../support/cilium-multipool-agent-model.ts';
import { type AgentKubernetesApi, LocalMultiPoolAgent, registerCiliumNode } from './cilium-agent.ts';

/**
 * The cluster's nodes, as far as the functions can tell: when an EC2 instance starts running, its
 * cilium-agent registers the node's CiliumNode (named after the PrivateDnsName) after
 * `agentDelayMs` (through the Kubernetes API, as the agent does), and a 1.20 agent then keeps
 * running on it.
 */

export interface SimulatedAgentsOptions {
  /** Register a CiliumNode, as cilium-agent would, when an instance starts running (default true). */
  readonly simulateAgents?: boolean;
  /** Delay between `running` and the simulated agent's registration (default 0). */
  readonly agentDelayMs?: number;
  /**
   * Which cilium-agent the simulated nodes run (default `1.19`): `1.20` runs a multi-pool agent
   * model on every node (it writes `spec.ipam.pools`, clears `status.ipam.used`), `mixed` on every
   * other node, in launch order.
   */
  readonly agentVersions?: '1.19' | '1.20' | 'mixed';
  /**
   * Register `spec.eni` as cilium-agent's nodediscovery does from the instance metadata (cilium
   * v1.20.2 pkg/nodediscovery/eni/eni.go): instance type, zone, VPC and node subnet, with the
   * agent's defaults for first-interface-index 0, use-primary-address, disable-prefix-delegation
   * and delete-on-termination. cilium-operator reads the instance type from there (its limits).
   * Default false: `spec.instance-id` only.
   */
  readonly registerInstanceFacts?: boolean;
}

export interface SimulatedAgents {
  /**
   * Registrations waiting for their delay or under way, and 1.20 agents in a pass: while any is,
   * the cloud is not settled.
   */
  pendingRegistrations(): number;
  /** The first registration that failed, if one did (`waitUntil` rethrows it). */
  firstFailure(): Error | undefined;
  /** The running 1.20 agent of a node, if that node runs one. */
  multiPoolAgent(nodeName: string): LocalMultiPoolAgent | undefined;
  /** Stops reacting to EC2, stops the 1.20 agents and drops the registrations not yet made. */
  stop(): void;
}

export function startSimulatedAgents(
  ec2: Ec2Emulator,
  k8s: AgentKubernetesApi,
  options: SimulatedAgentsOptions,
): SimulatedAgents {
  const registrationTimers = new Set<NodeJS.Timeout>();
  let registrationsUnderWay = 0;
  const failures: Error[] = [];
  const multiPoolAgents = new Map<string, LocalMultiPoolAgent>();
  let registeredAgents = 0;
  let stopped = false;
  const register = async (nodeName: string, instanceId: string) => {
    // Which agent a node runs is decided in launch order, before its registration's round trips.
    const version = options.agentVersions ?? '1.19';
    const multiPool = version === '1.20' || (version === 'mixed' && registeredAgents % 2 === 1);
    registeredAgents++;
    registrationsUnderWay++;
    try {
      await registerCiliumNode(
        k8s,
        nodeName,
        instanceId,
        options.registerInstanceFacts === true ? { eni: instanceFacts(ec2, instanceId) } : {},
      );
      if (multiPool && !stopped) {
        multiPoolAgents.set(nodeName, new LocalMultiPoolAgent(k8s, nodeName, new MultiPoolAgentModel()));
      }
    } catch (error) {
      failures.push(error as Error);
    } finally {
      registrationsUnderWay--;
    }
  };
  const unsubscribe = ec2.state.onInstanceStateChange(({ instanceId, state }) => {
    if (state !== 'running' || options.simulateAgents === false) return;
    const nodeName = ec2.state.instance(instanceId)?.privateDnsName ?? instanceId;
    const timer = setTimeout(() => {
      registrationTimers.delete(timer);
      void register(nodeName, instanceId);
    }, options.agentDelayMs ?? 0);
    registrationTimers.add(timer);
  });
  return {
    pendingRegistrations: () =>
      registrationTimers.size +
      registrationsUnderWay +
      [...multiPoolAgents.values()].filter((agent) => agent.busy()).length,
    firstFailure: () => failures[0],
    multiPoolAgent: (nodeName) => multiPoolAgents.get(nodeName),
    stop: () => {
      stopped = true;
      unsubscribe();
      for (const agent of multiPoolAgents.values()) agent.stop();
      for (const timer of registrationTimers) clearTimeout(timer);
    },
  };
}

/** `spec.eni` as the agent registers it from the instance's metadata (see `registerInstanceFacts`). */
function instanceFacts(ec2: Ec2Emulator, instanceId: string): Record<string, unknown> {
  const instance = ec2.state.instance(instanceId);
  return {
    'instance-type': instance?.instanceType,
    'availability-zone': instance?.availabilityZone,
    'vpc-id': instance?.vpcId,
    'node-subnet-id': instance?.subnetId,
    'first-interface-index': 0,
    'use-primary-address': false,
    'disable-prefix-delegation': false,
    'delete-on-termination': true,
  };
}
