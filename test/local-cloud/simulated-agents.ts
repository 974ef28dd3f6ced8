import type { Ec2Emulator } from '../emulators/ec2/index.ts';
import type { K8sEmulator } from '../emulators/k8s/index.ts';
import { MultiPoolAgentModel } from '../support/cilium-multipool-agent-model.ts';
import { LocalMultiPoolAgent, registerCiliumNode } from './cilium-agent.ts';

/**
 * The cluster's nodes, as far as the functions can tell: when an EC2 instance starts running, its
 * cilium-agent registers the node's CiliumNode (named after the PrivateDnsName) after
 * `agentDelayMs`, and a 1.20 agent then keeps running on it.
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
}

export interface SimulatedAgents {
  /** Registrations waiting for their delay: while any is, the cloud is not settled. */
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
  k8s: K8sEmulator,
  options: SimulatedAgentsOptions,
): SimulatedAgents {
  const registrationTimers = new Set<NodeJS.Timeout>();
  const failures: Error[] = [];
  const multiPoolAgents = new Map<string, LocalMultiPoolAgent>();
  let registeredAgents = 0;
  const register = (nodeName: string, instanceId: string) => {
    try {
      registerCiliumNode(k8s, nodeName, instanceId);
      const version = options.agentVersions ?? '1.19';
      if (version === '1.20' || (version === 'mixed' && registeredAgents % 2 === 1)) {
        multiPoolAgents.set(nodeName, new LocalMultiPoolAgent(k8s, nodeName, new MultiPoolAgentModel()));
      }
      registeredAgents++;
    } catch (error) {
      failures.push(error as Error);
    }
  };
  const unsubscribe = ec2.state.onInstanceStateChange(({ instanceId, state }) => {
    if (state !== 'running' || options.simulateAgents === false) return;
    const nodeName = ec2.state.instance(instanceId)?.privateDnsName ?? instanceId;
    const timer = setTimeout(() => {
      registrationTimers.delete(timer);
      register(nodeName, instanceId);
    }, options.agentDelayMs ?? 0);
    registrationTimers.add(timer);
  });
  return {
    pendingRegistrations: () => registrationTimers.size,
    firstFailure: () => failures[0],
    multiPoolAgent: (nodeName) => multiPoolAgents.get(nodeName),
    stop: () => {
      unsubscribe();
      for (const agent of multiPoolAgents.values()) agent.stop();
      for (const timer of registrationTimers) clearTimeout(timer);
    },
  };
}
