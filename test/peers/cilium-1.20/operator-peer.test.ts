import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CiliumNode } from '../../../functions/core/ciliumnode.ts';
import { agentCanStart } from '../../bench/peer/side.ts';
import { type Ec2Emulator, seedEksStyleCluster, startEc2Emulator } from '../../emulators/ec2/index.ts';
import { OPERATOR_PEER_USER } from '../../local-cloud/identities.ts';
import { LOCAL_ACCOUNT, LOCAL_REGION } from '../../local-cloud/local-account.ts';
import { type SimulatedAgents, startSimulatedAgents } from '../../local-cloud/simulated-agents.ts';
import { checkStatusCoversSpec } from '../../support/invariants.ts';
import { type KubernetesUnderTest, startKubernetes } from '../../support/kubernetes.ts';
import {
  OPERATOR_PEER_CREDENTIALS,
  type OperatorPeer,
  operatorPeerBinary,
  operatorPeerIamIdentity,
  startOperatorPeer,
} from './operator-peer.ts';

/**
 * cilium-operator's ENI allocator (v1.20.2) against our stand-ins: two nodes launched, their
 * agents registering CiliumNodes on the real kube-apiserver, the peer allocating through the EC2
 * emulator with its own key and cilium's documented IAM permissions, and writing with its own
 * token and cilium-operator's RBAC. Every call it makes must be served and allowed.
 */

let kubernetes: KubernetesUnderTest;
let ec2: Ec2Emulator;
let agents: SimulatedAgents;
let peer: OperatorPeer | undefined;

beforeAll(async () => {
  [kubernetes, ec2] = await Promise.all([
    startKubernetes({ schemas: ['v1.20'] }),
    startEc2Emulator({ identities: {} }),
  ]);
  ec2.setIdentity(OPERATOR_PEER_CREDENTIALS.accessKeyId, operatorPeerIamIdentity(LOCAL_ACCOUNT));
  agents = startSimulatedAgents(ec2, kubernetes, { registerInstanceFacts: true });
});

afterAll(async () => {
  await peer?.stop();
  agents?.stop();
  await Promise.all([kubernetes?.close(), ec2?.close()]);
});

describe('the cilium-operator peer', () => {
  it('refuses an endpoint off loopback with a clear error, before calling anything', () => {
    const result = spawnSync(
      operatorPeerBinary(),
      ['--kubernetes-url=https://10.0.0.1:6443', '--ec2-endpoint=http://127.0.0.1:1'],
      { encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } },
    );
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('--kubernetes-url "https://10.0.0.1:6443": not a loopback address');
    expect(result.stderr).toContain('OPERATOR_PEER_KUBERNETES_TOKEN is required');
  });

  it('makes two nodes ready through calls the stand-ins serve and allow, status always covering the pool', async () => {
    const cluster = seedEksStyleCluster(ec2.state);
    const { controlPlane, operatorPeerToken } = kubernetes;
    if (controlPlane === undefined || operatorPeerToken === undefined)
      throw new Error('needs kube-apiserver');
    peer = await startOperatorPeer({
      kubernetesUrl: kubernetes.url,
      kubernetesCaPem: controlPlane.caPem,
      kubernetesToken: operatorPeerToken,
      ec2Endpoint: ec2.url,
      region: LOCAL_REGION,
      hostVpcId: cluster.vpc.vpcId,
    });
    const nodeNames = ['m5.large', 't3.medium'].map((instanceType, index) => {
      const subnet = index === 0 ? cluster.subnets.nodesA : cluster.subnets.nodesB;
      return ec2.state.launchInstance({
        instanceType,
        subnetId: subnet.subnetId,
        securityGroupIds: [cluster.securityGroups.nodes.groupId],
        tags: { [`kubernetes.io/cluster/${cluster.clusterName}`]: 'owned' },
      }).privateDnsName;
    });
    const deadline = Date.now() + 60_000;
    let history = await kubernetes.history();
    const ready = () =>
      nodeNames.every((name) => history.some((entry) => entry.name === name && agentCanStart(entry.object)));
    while (!ready() && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      history = await kubernetes.history();
    }
    expect(ready(), peer.recentLog.slice(-10).join('\n')).toBe(true);

    const violations = history.flatMap((entry) =>
      checkStatusCoversSpec(entry.object as unknown as CiliumNode),
    );
    expect(violations).toEqual([]);
    const calls = ec2.calls.log;
    expect(calls.filter((call) => call.accessKeyId !== OPERATOR_PEER_CREDENTIALS.accessKeyId)).toEqual([]);
    expect(calls.filter((call) => call.outcome !== 'ok')).toEqual([]);
    expect(new Set(calls.map((call) => call.action))).toEqual(
      new Set([
        'DescribeInstanceTypes',
        'DescribeVpcs',
        'DescribeSubnets',
        'DescribeRouteTables',
        'DescribeSecurityGroups',
        'DescribeNetworkInterfaces',
        'AssignPrivateIpAddresses',
        'CreateNetworkInterface',
        'AttachNetworkInterface',
        'ModifyNetworkInterfaceAttribute',
      ]),
    );
    const requests = await kubernetes.requests({ user: OPERATOR_PEER_USER });
    // Refused by RBAC: none (a 409 Conflict is the operator losing a race to an agent's write, and retrying).
    expect(requests.filter((request) => request.statusCode === 401 || request.statusCode === 403)).toEqual(
      [],
    );
    expect(requests.some((request) => request.verb === 'update' && request.subresource === 'status')).toBe(
      true,
    );
  });
});
