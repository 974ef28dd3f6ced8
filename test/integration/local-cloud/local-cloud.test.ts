import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { nodeTableSchema } from '../../../functions/aws/node-table-schema.ts';
import type { CiliumNode } from '../../../functions/core/ciliumnode.ts';
import { type LocalCloud, startLocalCloud } from '../../local-cloud/local-cloud.ts';
import { checkStatusCoversSpec } from '../../support/invariants.ts';

/**
 * The local cloud end to end: the stack synthesized in-process (bundling included), its bundled
 * functions run in worker threads against DynamoDB Local, the EC2 emulator and kube-apiserver,
 * wired by the template's rules and stream mapping. Two launched instances must end up recorded
 * and published, with status covering spec at every CiliumNode version ever stored.
 */
describe('local cloud running the synthesized stack', () => {
  let cloud: LocalCloud;

  beforeAll(async () => {
    cloud = await startLocalCloud({ dynamoDbEndpoint: inject('dynamoDbEndpoint'), runSchedules: false });
  }, 240_000);

  afterAll(async () => {
    await cloud?.stop();
  });

  it('creates the node table the template declares, which is the schema the adapter uses', () => {
    const [table] = cloud.model.tables;
    expect(table?.keySchema).toEqual([{ AttributeName: nodeTableSchema.partitionKey.name, KeyType: 'HASH' }]);
    expect(table?.streamViewType).toBe(nodeTableSchema.streamViewType);
    expect(table?.timeToLiveAttribute).toBe(nodeTableSchema.timeToLiveAttribute);
    expect(cloud.model.functions.every((definition) => definition.entryFile.endsWith('/index.mjs'))).toBe(
      true,
    );
  });

  it('allocates and publishes two launched instances through EC2 events, the table stream and the sync', async () => {
    const instances = [cloud.launchInstance('m5.large'), cloud.launchInstance('t3.medium')];
    const instanceIds = instances.map((instance) => instance.instanceId);
    await cloud.waitUntil(async () => (await cloud.summary(instanceIds)).readyNodes === 2, {
      timeoutMs: 20_000,
      description: 'both nodes ready',
    });
    await cloud.settle();

    const records = await cloud.records();
    for (const instance of instances) {
      const record = records.get(instance.instanceId);
      expect(record?.lifecycle).toBe('active');
      // The record holds exactly the ENIs EC2 has attached to the instance, with their IPs.
      const attached = cloud.ec2.state.instanceNetworkInterfaces(instance.instanceId);
      expect(record?.enis.map((eni) => eni.id).sort()).toEqual(
        attached.map((eni) => eni.networkInterfaceId).sort(),
      );
      const recordedIps = (record?.enis ?? []).flatMap((eni) => eni.secondaryIps);
      expect(recordedIps.length).toBeGreaterThan(0);

      const ciliumNode = (await cloud.k8s.getCiliumNode(instance.privateDnsName)) as unknown as
        | CiliumNode
        | undefined;
      expect(ciliumNode?.spec?.['instance-id']).toBe(instance.instanceId);
      const pool = Object.keys(ciliumNode?.spec?.ipam?.pool ?? {});
      expect(pool.length).toBeGreaterThan(0);
      expect(recordedIps).toEqual(expect.arrayContaining(pool));

      const history = (await cloud.k8s.history(instance.privateDnsName)).filter(
        (entry) => entry.type !== 'DELETED',
      );
      expect(history.length).toBeGreaterThan(1);
      for (const entry of history) {
        expect({
          resourceVersion: entry.resourceVersion,
          violations: checkStatusCoversSpec(entry.object as unknown as CiliumNode),
        }).toEqual({
          resourceVersion: entry.resourceVersion,
          violations: [],
        });
      }
    }

    // The rule only routes running/shutting-down/terminated: each launch's `pending` went nowhere.
    expect(
      cloud.functionStats()[
        cloud.model.functions.find((f) => f.logicalId.startsWith('Allocate'))?.logicalId ?? ''
      ]?.invocations,
    ).toBe(2);
    expect(cloud.streamStats().recordsRead).toBeGreaterThan(0);
    expect(cloud.streamFailures).toEqual([]);
    expect(cloud.asyncFailures).toEqual([]);
  });

  it('answers a manual resync of every node with nothing left to write', async () => {
    const result = await cloud.invoke('Sync', { all: true });
    expect(result.status).toBe('succeeded');
    expect(result).toMatchObject({ payload: { writes: 0, failed: [] } });
  });

  it('runs every schedule rule on demand without a failed invocation', async () => {
    await cloud.fireSchedules();
    await cloud.settle();
    const summary = await cloud.summary();
    expect(summary.violations).toBe(0);
    expect(summary.readyNodes).toBe(2);
    expect(cloud.asyncFailures).toEqual([]);
  });

  it('authorizes each function by its own Kubernetes identity and group, and none was forbidden', async () => {
    expect(cloud.k8s.backend).toBe('kube-apiserver');
    const requests = await cloud.k8s.requests();
    const usersOf = (verbs: readonly string[]) =>
      new Set(requests.filter((request) => verbs.includes(request.verb)).map((request) => request.user));
    // The allocating functions publish what they wrote (the stream's sync then finds nothing to
    // do); only the groups that may write ever do.
    const writers = [...usersOf(['create', 'patch'])];
    expect(writers).toEqual(expect.arrayContaining([expect.stringMatching(/assumed-role\/AllocateRole\//)]));
    for (const writer of writers) expect(writer).toMatch(/assumed-role\/(Allocate|Sweep|Sync)Role\//);
    expect([...usersOf(['get', 'list'])].sort()).toEqual([
      expect.stringMatching(/AllocateRole/),
      expect.stringMatching(/SweepRole/),
      expect.stringMatching(/SyncRole/),
    ]);
    expect(requests.filter((request) => request.statusCode === 401 || request.statusCode === 403)).toEqual(
      [],
    );
  });
});
