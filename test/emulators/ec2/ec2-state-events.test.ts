import { describe, expect, it } from 'vitest';
import { Ec2State, type InstanceStateChange } from './index.ts';

describe('Ec2State.onInstanceStateChange', () => {
  const launchedState = () => {
    const state = new Ec2State();
    const cluster = state.seedCluster();
    const changes: InstanceStateChange[] = [];
    const unsubscribe = state.onInstanceStateChange((change) => changes.push(change));
    return { state, cluster, changes, unsubscribe };
  };

  it('reports a launch as pending then running, as EC2 emits one event per transition', () => {
    const { state, cluster, changes } = launchedState();
    const instance = state.launchInstance({
      instanceType: 'm5.large',
      subnetId: cluster.subnets.nodesA.subnetId,
    });
    expect(changes).toEqual([
      { instanceId: instance.instanceId, state: 'pending' },
      { instanceId: instance.instanceId, state: 'running' },
    ]);
  });

  it('reports a launch into another state after running, and every later transition', () => {
    const { state, cluster, changes } = launchedState();
    const instance = state.launchInstance({
      instanceType: 't3.medium',
      subnetId: cluster.subnets.nodesB.subnetId,
      state: 'stopped',
    });
    state.setInstanceState(instance.instanceId, 'pending');
    state.setInstanceState(instance.instanceId, 'running');
    state.setInstanceState(instance.instanceId, 'shutting-down');
    state.setInstanceState(instance.instanceId, 'terminated');
    expect(changes.map((change) => change.state)).toEqual([
      'pending',
      'running',
      'stopped',
      'pending',
      'running',
      'shutting-down',
      'terminated',
    ]);
  });

  it('reports termination after the ENIs were released, and no event for a no-op transition', () => {
    const { state, cluster, changes } = launchedState();
    const instance = state.launchInstance({
      instanceType: 'm5.large',
      subnetId: cluster.subnets.nodesA.subnetId,
    });
    state.setInstanceState(instance.instanceId, 'running');
    let enisAtTermination: number | undefined;
    state.onInstanceStateChange((change) => {
      if (change.state === 'terminated') {
        enisAtTermination = state.instanceNetworkInterfaces(instance.instanceId).length;
      }
    });
    state.setInstanceState(instance.instanceId, 'terminated');
    expect(changes.map((change) => change.state)).toEqual(['pending', 'running', 'terminated']);
    expect(enisAtTermination).toBe(0);
  });

  it('stops reporting to an unsubscribed listener', () => {
    const { state, cluster, changes, unsubscribe } = launchedState();
    unsubscribe();
    state.launchInstance({ instanceType: 'm5.large', subnetId: cluster.subnets.nodesA.subnetId });
    expect(changes).toEqual([]);
  });
});
