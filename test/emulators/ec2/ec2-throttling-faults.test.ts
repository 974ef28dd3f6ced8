import {
  AttachNetworkInterfaceCommand,
  CreateNetworkInterfaceCommand,
  DescribeNetworkInterfacesCommand,
  DescribeSubnetsCommand,
  EC2Client,
  ModifyNetworkInterfaceAttributeCommand,
} from '@aws-sdk/client-ec2';
import { ConfiguredRetryStrategy } from '@smithy/util-retry';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expectEc2Error } from './expect-ec2-error.ts';
import {
  type ClusterSeed,
  createManualClock,
  EC2_FAULTS,
  Ec2ApiError,
  type Ec2Emulator,
  type Ec2Fault,
  type Ec2FaultKind,
  type ManualClock,
  startEc2Emulator,
} from './index.ts';
import { ec2ClientFor, FAKE_CREDENTIALS } from './sdk-client.ts';

let clock: ManualClock;
let emulator: Ec2Emulator;
let cluster: ClusterSeed;
let ec2: EC2Client;

beforeEach(async () => {
  clock = createManualClock();
  emulator = await startEc2Emulator({ clock: clock.now });
  cluster = emulator.state.seedCluster();
  ec2 = ec2ClientFor(emulator);
});

afterEach(async () => {
  ec2.destroy();
  await emulator.close();
  expect(emulator.unexpectedErrors).toEqual([]);
});

const attachUnknownEni = (client: EC2Client, instanceId: string) =>
  client.send(
    new AttachNetworkInterfaceCommand({
      NetworkInterfaceId: 'eni-0123456789abcdef0',
      InstanceId: instanceId,
      DeviceIndex: 1,
    }),
  );

/** Sends calls one after another and names the error (or `ok`) each got. */
async function outcomes(count: number, call: () => Promise<unknown>): Promise<string[]> {
  const results: string[] = [];
  for (let index = 0; index < count; index++) {
    results.push(
      await call().then(
        () => 'ok',
        (error: unknown) => (error as Error).name,
      ),
    );
  }
  return results;
}

describe('throttling (AWS token buckets, test/README.md)', () => {
  it('AttachNetworkInterface: 50 calls pass, the 51st is RequestLimitExceeded, 1 s refills exactly 5', async () => {
    emulator.setThrottling(true);
    const instance = emulator.state.launchInstance({
      instanceType: 'm5.large',
      subnetId: cluster.subnets.nodesA.subnetId,
    });
    // Every call takes a token whatever its outcome; these fail with NotFound but are not throttled.
    const burst = await outcomes(51, () => attachUnknownEni(ec2, instance.instanceId));
    expect(burst.slice(0, 50).every((name) => name === 'InvalidNetworkInterfaceID.NotFound')).toBe(true);
    expect(burst[50]).toBe('RequestLimitExceeded');

    clock.advance(1000);
    const refill = await outcomes(6, () => attachUnknownEni(ec2, instance.instanceId));
    expect(refill).toEqual([...Array(5).fill('InvalidNetworkInterfaceID.NotFound'), 'RequestLimitExceeded']);
    expect(emulator.calls.throttled('AttachNetworkInterface')).toBe(2);
    expect(emulator.calls.count('AttachNetworkInterface')).toBe(57);
  });

  it('unfiltered DescribeNetworkInterfaces has a 50/10 bucket apart from the filtered 100/20 one', async () => {
    emulator.setThrottling(true);
    const unfiltered = await outcomes(51, () => ec2.send(new DescribeNetworkInterfacesCommand({})));
    expect(unfiltered.filter((name) => name === 'ok')).toHaveLength(50);
    expect(unfiltered[50]).toBe('RequestLimitExceeded');
    const filtered = await outcomes(101, () =>
      ec2.send(
        new DescribeNetworkInterfacesCommand({ Filters: [{ Name: 'vpc-id', Values: [cluster.vpc.vpcId] }] }),
      ),
    );
    expect(filtered.filter((name) => name === 'ok')).toHaveLength(100);
    expect(filtered[100]).toBe('RequestLimitExceeded');
    expect(emulator.throttling.tokens('DescribeSubnets')).toBe(100);
  });

  it('a throttled call changes nothing, and the SDK retry gets through once tokens refill', async () => {
    emulator.setThrottling({ buckets: { CreateNetworkInterface: { burst: 1, refillPerSecond: 1 } } });
    const subnetId = cluster.subnets.podsA.subnetId;
    await ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId }));
    await expectEc2Error(
      ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId })),
      'RequestLimitExceeded',
    );
    expect(emulator.state.networkInterfaces({ subnetId })).toHaveLength(1);
    expect(emulator.state.availableIpAddressCount(subnetId)).toBe(250);

    // The retry backoff waits one simulated second, so the retried attempt finds a refilled token.
    const retrying = new EC2Client({
      region: 'us-east-1',
      endpoint: emulator.url,
      credentials: FAKE_CREDENTIALS,
      retryStrategy: new ConfiguredRetryStrategy(3, () => {
        clock.advance(1000);
        return 5;
      }),
    });
    const created = await retrying.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId }));
    retrying.destroy();
    expect(created.$metadata.attempts).toBe(2);
    expect(emulator.calls.throttled('CreateNetworkInterface')).toBe(2);
    expect(emulator.state.networkInterfaces({ subnetId })).toHaveLength(2);
  });
});

describe('fault injection', () => {
  it('server-error answers 500 InternalError without applying the call', async () => {
    emulator.faults.inject({ action: 'CreateNetworkInterface', kind: 'server-error' });
    const error = await expectEc2Error(
      ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: cluster.subnets.podsA.subnetId })),
      'InternalError',
    );
    expect(error.$metadata.httpStatusCode).toBe(500);
    expect(emulator.state.networkInterfaceHistory()).toHaveLength(0);
    expect(emulator.calls.log.map((call) => call.outcome)).toEqual(['server-error']);
  });

  it('lost-response applies the call although the caller sees a failure', async () => {
    emulator.faults.inject({ action: 'CreateNetworkInterface', kind: 'lost-response' });
    const outcome = await ec2
      .send(
        new CreateNetworkInterfaceCommand({
          SubnetId: cluster.subnets.podsA.subnetId,
          ClientToken: 'lost-1',
        }),
      )
      .then(
        () => 'answered',
        () => 'failed',
      );
    expect(outcome).toBe('failed');
    expect(emulator.state.networkInterfaces().filter((eni) => eni.clientToken === 'lost-1')).toHaveLength(1);
    expect(emulator.calls.countWithOutcome('lost-response', 'CreateNetworkInterface')).toBe(1);
  });

  it('a retried lost CreateNetworkInterface with the same ClientToken yields one ENI', async () => {
    emulator.faults.inject({ action: 'CreateNetworkInterface', kind: 'lost-response' });
    const retrying = ec2ClientFor(emulator, 3);
    const created = await retrying.send(
      new CreateNetworkInterfaceCommand({
        SubnetId: cluster.subnets.podsA.subnetId,
        ClientToken: 'node-a-slot-1',
      }),
    );
    retrying.destroy();
    expect(created.$metadata.attempts).toBe(2);
    const enis = emulator.state.networkInterfaceHistory();
    expect(enis.map((eni) => eni.networkInterfaceId)).toEqual([created.NetworkInterface?.NetworkInterfaceId]);
  });

  it('match restricts a fault to some calls; times bounds it; lost-response can answer 500', async () => {
    const fault = emulator.faults.inject({
      action: 'CreateNetworkInterface',
      kind: 'lost-response',
      lostResponseAs: 'internal-error',
      times: 2,
      match: (params) => params.SubnetId === cluster.subnets.podsB.subnetId,
    });
    await ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: cluster.subnets.podsA.subnetId }));
    for (let attempt = 0; attempt < 2; attempt++) {
      await expectEc2Error(
        ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: cluster.subnets.podsB.subnetId })),
        'InternalError',
      );
    }
    await ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: cluster.subnets.podsB.subnetId }));
    expect(fault.hits).toBe(2);
    expect(emulator.state.networkInterfaces({ subnetId: cluster.subnets.podsB.subnetId })).toHaveLength(3);
  });

  it('an injected throttle fault is retried by the SDK and counted', async () => {
    emulator.faults.inject({ action: 'DescribeSubnets', kind: 'throttle', times: 2 });
    const retrying = ec2ClientFor(emulator, 3);
    const result = await retrying.send(new DescribeSubnetsCommand({}));
    retrying.destroy();
    expect(result.$metadata.attempts).toBe(3);
    expect(emulator.calls.throttled('DescribeSubnets')).toBe(2);
    expect(emulator.calls.count()).toBe(3);
  });

  it('beforeApply sees every call and can answer an EC2 error instead of applying it', async () => {
    const seen: string[] = [];
    emulator.setBeforeApply((action, params) => {
      seen.push(`${action} ${params.SubnetId ?? ''}`);
      if (params.Description === 'refuse') throw new Ec2ApiError('UnauthorizedOperation', 'not allowed');
    });
    const subnetId = cluster.subnets.podsA.subnetId;
    await ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId }));
    await expectEc2Error(
      ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: subnetId, Description: 'refuse' })),
      'UnauthorizedOperation',
    );
    expect(seen).toEqual([`CreateNetworkInterface ${subnetId}`, `CreateNetworkInterface ${subnetId}`]);
    expect(emulator.state.networkInterfaces()).toHaveLength(1);
  });
});

describe('eventual consistency', () => {
  it('hides a new ENI from Describe, Attach and Modify until eventualConsistencyMs has passed', async () => {
    emulator.setEventualConsistencyMs(2000);
    const instance = emulator.state.launchInstance({
      instanceType: 'm5.large',
      subnetId: cluster.subnets.nodesA.subnetId,
    });
    const created = await ec2.send(
      new CreateNetworkInterfaceCommand({ SubnetId: cluster.subnets.podsA.subnetId }),
    );
    const eniId = created.NetworkInterface?.NetworkInterfaceId ?? '';

    await expectEc2Error(
      ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [eniId] })),
      'InvalidNetworkInterfaceID.NotFound',
    );
    const listed = await ec2.send(
      new DescribeNetworkInterfacesCommand({
        Filters: [{ Name: 'subnet-id', Values: [cluster.subnets.podsA.subnetId] }],
      }),
    );
    expect(listed.NetworkInterfaces).toEqual([]);
    await expectEc2Error(
      ec2.send(
        new AttachNetworkInterfaceCommand({
          NetworkInterfaceId: eniId,
          InstanceId: instance.instanceId,
          DeviceIndex: 1,
        }),
      ),
      'InvalidNetworkInterfaceID.NotFound',
    );
    await expectEc2Error(
      ec2.send(
        new ModifyNetworkInterfaceAttributeCommand({
          NetworkInterfaceId: eniId,
          Description: { Value: 'x' },
        }),
      ),
      'InvalidNetworkInterfaceID.NotFound',
    );

    clock.advance(1999);
    await expectEc2Error(
      ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [eniId] })),
      'InvalidNetworkInterfaceID.NotFound',
    );
    clock.advance(1);
    const attached = await ec2.send(
      new AttachNetworkInterfaceCommand({
        NetworkInterfaceId: eniId,
        InstanceId: instance.instanceId,
        DeviceIndex: 1,
      }),
    );
    expect(attached.AttachmentId).toMatch(/^eni-attach-/);
  });
});

/** One way to meet a fault of the catalogue: how it is armed, the call it hits and what that call left. */
interface FaultExample {
  readonly fault: () => Ec2Fault;
  /** Calls made before the one the fault hits (e.g. one that empties a bucket). */
  readonly prepare?: () => Promise<unknown>;
  /** The call the fault hits (and, for a fault seen later, the call that sees it): its error name, or `ok`. */
  readonly call: () => Promise<string>;
  readonly expectedOutcome: string;
  /** Whether the faulted call's change is in the state. */
  readonly applied: () => boolean;
}

const outcomeOf = (call: Promise<unknown>): Promise<string> =>
  call.then(
    () => 'ok',
    (error: unknown) => (error as Error).name,
  );
const createPodEni = (parameters: { ClientToken?: string; Ipv4PrefixCount?: number } = {}) =>
  ec2.send(new CreateNetworkInterfaceCommand({ SubnetId: cluster.subnets.podsA.subnetId, ...parameters }));
const podEniCount = () =>
  emulator.state.networkInterfaces({ subnetId: cluster.subnets.podsA.subnetId }).length;

/** Typed over the catalogue, so a fault added to it without an example here fails the build. */
const FAULT_EXAMPLES: { readonly [Kind in Ec2FaultKind]: FaultExample } = {
  'server-error': {
    fault: () => ({ kind: 'server-error', action: 'CreateNetworkInterface' }),
    call: () => outcomeOf(createPodEni()),
    expectedOutcome: 'InternalError',
    applied: () => podEniCount() === 1,
  },
  'lost-response': {
    fault: () => ({ kind: 'lost-response', action: 'CreateNetworkInterface' }),
    call: () => outcomeOf(createPodEni()),
    // The SDK reports the reset connection as a TimeoutError (a transient error it retries).
    expectedOutcome: 'TimeoutError',
    applied: () => podEniCount() === 1,
  },
  throttle: {
    fault: () => ({ kind: 'throttle', action: 'CreateNetworkInterface' }),
    call: () => outcomeOf(createPodEni()),
    expectedOutcome: 'RequestLimitExceeded',
    applied: () => podEniCount() === 1,
  },
  'eventual-consistency': {
    fault: () => ({ kind: 'eventual-consistency', delayMs: 1_000 }),
    call: async () => {
      const created = await createPodEni();
      const id = created.NetworkInterface?.NetworkInterfaceId ?? '';
      return outcomeOf(ec2.send(new DescribeNetworkInterfacesCommand({ NetworkInterfaceIds: [id] })));
    },
    expectedOutcome: 'InvalidNetworkInterfaceID.NotFound',
    applied: () => podEniCount() === 1,
  },
  'rate-limit': {
    fault: () => ({
      kind: 'rate-limit',
      throttling: { buckets: { CreateNetworkInterface: { burst: 1, refillPerSecond: 1 } } },
    }),
    prepare: () => createPodEni(),
    call: () => outcomeOf(createPodEni()),
    expectedOutcome: 'RequestLimitExceeded',
    applied: () => podEniCount() === 2,
  },
  'fragmented-subnet': {
    fault: () => ({ kind: 'fragmented-subnet', subnetId: cluster.subnets.podsA.subnetId }),
    call: () => outcomeOf(createPodEni({ Ipv4PrefixCount: 1 })),
    expectedOutcome: 'InsufficientCidrBlocks',
    applied: () => podEniCount() === 1,
  },
  'before-apply': {
    fault: () => ({
      kind: 'before-apply',
      hook: (action) => {
        if (action === 'CreateNetworkInterface') throw new Ec2ApiError('InvalidParameterValue', 'refused');
      },
    }),
    call: () => outcomeOf(createPodEni()),
    expectedOutcome: 'InvalidParameterValue',
    applied: () => podEniCount() === 1,
  },
};

describe('the fault catalogue (EC2_FAULTS), armed through faults.arm', () => {
  it.each(Object.keys(EC2_FAULTS) as Ec2FaultKind[])(
    '%s: raised as catalogued, the call applied as catalogued, and gone after disarmAll',
    async (kind) => {
      const example = FAULT_EXAMPLES[kind];
      emulator.faults.arm(example.fault());
      await example.prepare?.();
      expect(await example.call()).toBe(example.expectedOutcome);
      // The before-apply example's hook throws, so its call must not apply.
      expect(example.applied()).toBe(EC2_FAULTS[kind].callApplied === 'yes');

      emulator.faults.disarmAll();
      clock.advance(1_000);
      expect(await example.call()).toBe('ok');
      expect(emulator.faults.pending()).toEqual([]);
    },
  );

  it('every fault the chaos suite must not draw says why', () => {
    for (const entry of Object.values(EC2_FAULTS)) {
      if (!entry.chaos.drawn) expect(entry.chaos.why.length).toBeGreaterThan(20);
    }
  });

  it('disarmAll leaves a subnet fragmented outside the registry as it is', async () => {
    emulator.state.setSubnetFragmented(cluster.subnets.podsA.subnetId, true);
    emulator.faults.disarmAll();
    expect(await outcomeOf(createPodEni({ Ipv4PrefixCount: 1 }))).toBe('InsufficientCidrBlocks');
  });
});
