import { preAgentKnobs } from '../core/cilium-config.ts';
import type { NodeKnobs } from '../core/model.ts';
import type { ConfigMapReader, Log } from '../core/ports.ts';

export interface PreAgentKnobSettings {
  /** The stack's defaults (`eni-ipam:preAllocate`, `firstInterfaceIndex`, ...). */
  readonly stackDefaults: NodeKnobs;
  /** Whether the cluster's agents read the node-level keys (cilium 1.19 and newer). */
  readonly agentReadsNodeKeys: boolean;
}

/**
 * The knobs for a node whose agent has not registered them yet, for ONE invocation: the cluster's
 * `cilium-config` is read at most once (on the first call; later calls share the answer), so an
 * invocation plans every node from one reading. Absent ConfigMap: the stack's defaults. A value the
 * agent would reject rejects the promise (`CiliumConfigError`) before anything is written.
 */
export function preAgentKnobsForInvocation(
  configMap: ConfigMapReader,
  settings: PreAgentKnobSettings,
  log: Log,
): () => Promise<NodeKnobs> {
  let reading: Promise<NodeKnobs> | undefined;
  return () => {
    reading ??= configMap.read().then((data) => {
      const { knobs, fromCiliumConfig } = preAgentKnobs(data, settings.stackDefaults, {
        configMap: configMap.name,
        agentReadsNodeKeys: settings.agentReadsNodeKeys,
      });
      log.debug('knobs for nodes whose agent has not registered', {
        configMap: configMap.name,
        found: data !== undefined,
        fromCiliumConfig,
      });
      return knobs;
    });
    return reading;
  };
}
