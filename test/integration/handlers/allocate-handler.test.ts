import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { handler as allocateHandler } from '../../../functions/allocate/index.ts';
import type { handler as sweepHandler } from '../../../functions/sweep/index.ts';
import { buildApp, cdkJsonContext } from '../../../infra/build-app.ts';
import { Ec2ApiError } from '../../emulators/ec2/index.ts';
import {
  type AllocationHarness,
  CLUSTER_NAME,
  startAllocationHarness,
} from '../../support/allocation-harness.ts';
import { stateChange } from '../../support/bad-input.ts';

/**
 * The allocate and sweep Lambda handlers as deployed: module-scope dependencies built from the
 * environment the stack sets, real adapters, the stand-ins reached through the SDK's standard
 * configuration and KUBECONFIG.
 */

let harness: AllocationHarness;
let allocate: typeof allocateHandler;
let sweepFunction: typeof sweepHandler;

async function importHandlers(variables: Record<string, string | undefined>) {
  vi.resetModules();
  vi.stubEnv('POWERTOOLS_LOG_LEVEL', 'SILENT');
  for (const [name, value] of Object.entries(variables)) vi.stubEnv(name, value);
  try {
    return {
      allocate: (await import('../../../functions/allocate/index.ts')).handler,
      sweep: (await import('../../../functions/sweep/index.ts')).handler,
    };
  } finally {
    vi.unstubAllEnvs();
  }
}

const context = (id: string) => ({ awsRequestId: id });

type EmfDocument = Record<string, unknown> & {
  _aws: { CloudWatchMetrics: { Dimensions: string[][]; Metrics: { Name: string }[] }[] };
};

/** Runs `work` and returns the EMF documents it printed to stdout. */
async function emfDocumentsOf(work: () => Promise<unknown>): Promise<EmfDocument[]> {
  const documents: EmfDocument[] = [];
  const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    for (const line of String(chunk).split('\n')) {
      if (line.includes('"_aws"')) documents.push(JSON.parse(line) as EmfDocument);
    }
    return true;
  });
  try {
    await work();
  } finally {
    write.mockRestore();
  }
  return documents;
}

beforeAll(async () => {
  harness = await startAllocationHarness();
  ({ allocate, sweep: sweepFunction } = await importHandlers({
    TABLE_NAME: harness.table.tableName,
    CLUSTER_NAME,
    CLUSTER_TAG_VALUES: 'owned,shared',
    KUBECONFIG: harness.k8s.writeKubeconfig(),
    AWS_ENDPOINT_URL_EC2: harness.ec2.url,
  }));
});
afterAll(async () => {
  await harness.close();
});

describe('the allocate handler', () => {
  it.each([
    { case: 'a non-object', event: 'hello' },
    { case: 'another source', event: { ...stateChange('i-0123456789abcdef0', 'running'), source: 'aws.s3' } },
    { case: 'a malformed instance id', event: stateChange('i-nope', 'running') },
    { case: 'an unknown state', event: stateChange('i-0123456789abcdef0', 'exploded') },
  ])('rejects $case without throwing, mutating or writing', async ({ event }) => {
    const calls = harness.ec2.calls.count();
    const result = await allocate(event, context('bad'));
    expect(result).toMatchObject({ status: 'rejected', reason: expect.any(String) });
    expect(harness.ec2.calls.count()).toBe(calls);
    expect((await harness.table.store.listPage()).records).toEqual([]);
  });

  it('allocates on running, and retires on terminated', async () => {
    const instance = harness.launch('m5.large');
    const allocated = await allocate(stateChange(instance.instanceId, 'running'), context('run-1'));
    expect(allocated).toMatchObject({ status: 'allocated', outcome: { kind: 'reconciled' } });
    // eth0 (index 0) is not ours: the pool is on the ENI we created at index 1.
    expect((await harness.table.store.get(instance.instanceId))?.enis[1]?.secondaryIps).toHaveLength(8);

    harness.ec2.state.setInstanceState(instance.instanceId, 'terminated');
    const retired = await allocate(stateChange(instance.instanceId, 'terminated'), context('term-1'));
    expect(retired).toMatchObject({ status: 'retired', outcome: { kind: 'retired' } });
    expect((await harness.table.store.get(instance.instanceId))?.lifecycle).toBe('retired');
  });

  it('drains on a spot warning to terminate only, and serves a draining node again once it runs', async () => {
    const spotWarning = (instanceId: string, action: string) => ({
      ...stateChange(instanceId, 'running'),
      'detail-type': 'EC2 Spot Instance Interruption Warning',
      detail: { 'instance-id': instanceId, 'instance-action': action },
    });
    const instance = harness.launch('m5.large');
    await allocate(stateChange(instance.instanceId, 'running'), context('spot-1'));
    for (const action of ['stop', 'hibernate']) {
      expect(
        await allocate(spotWarning(instance.instanceId, action), context(`spot-${action}`)),
      ).toMatchObject({
        status: 'skipped',
      });
      expect((await harness.table.store.get(instance.instanceId))?.lifecycle).toBe('active');
    }
    expect(await allocate(spotWarning(instance.instanceId, 'terminate'), context('spot-t'))).toEqual({
      status: 'drained',
      outcome: 'drained',
    });
    expect((await harness.table.store.get(instance.instanceId))?.lifecycle).toBe('draining');

    const again = await allocate(stateChange(instance.instanceId, 'running'), context('spot-2'));
    expect(again).toMatchObject({ status: 'allocated', outcome: { kind: 'reconciled' } });
    expect((await harness.table.store.get(instance.instanceId))?.lifecycle).toBe('active');
  });

  it('skips states it does not act on', async () => {
    const instance = harness.launch('m5.large');
    expect(await allocate(stateChange(instance.instanceId, 'pending'), context('p'))).toMatchObject({
      status: 'skipped',
    });
    expect(await harness.table.store.get(instance.instanceId)).toBeUndefined();
  });

  it('publishes its metrics as an EMF document on every invocation, thrown or not', async () => {
    const documents: Record<string, unknown>[] = [];
    const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      for (const line of String(chunk).split('\n')) {
        if (line.includes('"_aws"')) documents.push(JSON.parse(line) as Record<string, unknown>);
      }
      return true;
    });
    const metricNames = (document: Record<string, unknown>) =>
      (document._aws as { CloudWatchMetrics: { Metrics: { Name: string }[] }[] }).CloudWatchMetrics.flatMap(
        (directive) => directive.Metrics.map((metric) => metric.Name),
      );
    // A module graph of its own with metrics enabled (the suite disables them in vitest.config.ts).
    const { allocate: allocateWithMetrics } = await importHandlers({
      TABLE_NAME: harness.table.tableName,
      CLUSTER_NAME,
      CLUSTER_TAG_VALUES: 'owned,shared',
      KUBECONFIG: harness.k8s.writeKubeconfig(),
      AWS_ENDPOINT_URL_EC2: harness.ec2.url,
      POWERTOOLS_METRICS_DISABLED: 'false',
    });
    const allocate = allocateWithMetrics;
    try {
      const instance = harness.launch('m5.large');
      await allocate('hello', context('emf-1'));
      await allocate(stateChange(instance.instanceId, 'pending'), context('emf-2'));
      await allocate(stateChange(instance.instanceId, 'running'), context('emf-3'));
      harness.ec2.setBeforeApply(() => {
        throw new Ec2ApiError('UnauthorizedOperation', 'You are not authorized to perform this operation.');
      });
      const second = harness.launch('m5.large');
      await expect(allocate(stateChange(second.instanceId, 'running'), context('emf-4'))).rejects.toThrow();
    } finally {
      write.mockRestore();
      harness.ec2.setBeforeApply(undefined);
    }
    expect(documents.map(metricNames)).toEqual([
      ['ipam_allocate_events_rejected'],
      ['ipam_allocate_events_skipped'],
      expect.arrayContaining(['ipam_needed_ips', 'ipam_ip_allocation_ops', 'ipam_allocate_events_allocated']),
      ['ipam_allocate_events_failed'],
    ]);
  });

  it('fails at cold start naming a missing variable', async () => {
    // A fresh module graph per import, so the class is compared by name.
    await expect(
      importHandlers({ TABLE_NAME: 'x', KUBECONFIG: harness.k8s.writeKubeconfig() }),
    ).rejects.toMatchObject({ name: 'ConfigurationError', message: expect.stringMatching(/CLUSTER_NAME/) });
  });
});

describe('the sweep handler', () => {
  it('publishes the garbage collection’s metrics under its own service, as the stack deploys it', async () => {
    const app = new App({ context: { ...cdkJsonContext(), 'aws:cdk:bundling-stacks': [] } });
    const template = Template.fromStack(buildApp(app).stack);
    const serviceOf = (prefix: string) =>
      Object.entries(template.findResources('AWS::Lambda::Function')).find(([id]) =>
        id.startsWith(prefix),
      )?.[1].Properties.Environment.Variables.POWERTOOLS_SERVICE_NAME as string;
    const published = async (functionPrefix: string, task: string) => {
      const { sweep } = await importHandlers({
        TABLE_NAME: harness.table.tableName,
        CLUSTER_NAME,
        CLUSTER_TAG_VALUES: 'owned,shared',
        KUBECONFIG: harness.k8s.writeKubeconfig(),
        AWS_ENDPOINT_URL_EC2: harness.ec2.url,
        POWERTOOLS_METRICS_DISABLED: 'false',
        POWERTOOLS_SERVICE_NAME: serviceOf(functionPrefix),
      });
      return emfDocumentsOf(() => sweep({ task }, context(`${functionPrefix}-emf`)));
    };

    const collection = await published('GarbageCollection', 'eni-garbage-collection');
    expect(collection).toHaveLength(1);
    expect(collection[0]).toMatchObject({ service: 'serverless-eni-ipam-garbage-collection' });
    expect(collection[0]?._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([['service']]);
    const sweepRun = await published('Sweep', 'sweep');
    expect(sweepRun.map((document) => document.service)).toEqual(['serverless-eni-ipam-sweep']);
    // The sweep-failure alarm's metric comes from the sweep's documents only.
    const names = (documents: EmfDocument[]) =>
      documents.flatMap((document) =>
        document._aws.CloudWatchMetrics.flatMap((directive) =>
          directive.Metrics.map((metric) => metric.Name),
        ),
      );
    expect(names(sweepRun)).toContain('ipam_sweep_failures');
    expect(names(collection)).not.toContain('ipam_sweep_failures');
  });

  it('sweeps on the scheduled task and refuses anything else', async () => {
    const missed = harness.launch('t3.medium');
    const summary = await sweepFunction({ task: 'sweep' }, context('sweep-1'));
    expect(summary).toMatchObject({ failed: [] });
    expect(await harness.table.store.get(missed.instanceId)).toMatchObject({ instanceType: 't3.medium' });
    await expect(sweepFunction({ task: 'dance' }, context('sweep-2'))).rejects.toThrow(
      /expected \{"task":"sweep"\}/,
    );
  });
});
