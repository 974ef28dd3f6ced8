import { describe, expect, it } from 'vitest';
import { allocationContent } from '../../../functions/core/allocation-content.ts';
import {
  type AllocationObservation,
  applyStepResult,
  initialAllocationState,
  mayMutate,
  nextAllocationStep,
  UNAUTHORIZED_RETRY_DELAY_MS,
} from '../../../functions/core/allocation-round.ts';
import { tagsForNewEni } from '../../../functions/core/eni-ownership.ts';
import type { NodeRecord } from '../../../functions/core/model.ts';
import { nodeRecordFixture } from '../../fixtures/node-records.ts';
import { eni, INSTANCE_ID, instance, knobs, M5_LARGE, NODE_SUBNET, subnet } from './fixtures.ts';

const CLUSTER = 'test-cluster';
const NOW = 1_700_000_000_000;

function observation(overrides: Partial<AllocationObservation> = {}): AllocationObservation {
  return {
    instance: instance(),
    nodeName: 'ip-10-0-0-4.ec2.internal',
    knobs: knobs({ minAllocate: 8, firstInterfaceIndex: 1 }),
    demand: undefined,
    vpc: { id: 'vpc-0a1b2c', primaryCidr: '10.0.0.0/16', secondaryCidrs: [] },
    limits: M5_LARGE,
    subnets: [NODE_SUBNET, subnet('subnet-pods', 500)],
    securityGroups: [],
    ciliumNode: undefined,
    record: undefined,
    enis: [eni({ deviceIndex: 0 })],
    mayHaveOrphanEnis: false,
    releasedCidrs: new Set(),
    tombstonedCidrs: new Set(),
    table: 'nodes@1',
    clusterName: CLUSTER,
    prefixDelegationEnabled: false,
    ...overrides,
  };
}

describe('one allocation round, as values', () => {
  it('repairs a missing delete-on-termination before anything else', () => {
    const ours = {
      ...eni({ deviceIndex: 1, secondaryCount: 9, tags: tagsForNewEni(CLUSTER, INSTANCE_ID, {}) }),
      deleteOnTermination: false,
    };
    const observed = observation({
      enis: [eni({ deviceIndex: 0 }), ours],
      knobs: knobs({ minAllocate: 8, deleteOnTermination: true }),
    });
    const step = nextAllocationStep(observed, initialAllocationState(observed, NOW));
    // Left by a crash (not attached in this invocation): EC2 lists the attachment by now.
    expect(step).toEqual({ kind: 'repair', eni: ours, justAttached: false });

    const repaired = applyStepResult(
      initialAllocationState(observed, NOW),
      { kind: 'repaired', eniId: ours.id },
      NOW,
    );
    expect(repaired.enis.find((candidate) => candidate.id === ours.id)).toMatchObject({
      deleteOnTermination: true,
      lastMutatedAtEpochMs: NOW,
    });
    expect(nextAllocationStep(observed, repaired).kind).not.toBe('repair');
  });

  it('creates an ENI for a node with only eth0, repairs it once recorded, and is then done', () => {
    const observed = observation();
    const start = initialAllocationState(observed, NOW);
    const step = nextAllocationStep(observed, start);
    expect(step.kind).toBe('create');
    if (step.kind !== 'create') return;

    const created = applyStepResult(
      start,
      {
        kind: 'created',
        eni: {
          id: 'eni-new',
          mac: '02:00:00:00:00:09',
          primaryIp: '10.0.64.4',
          secondaryIps: Array.from({ length: step.ipCount ?? 0 }, (_, host) => `10.0.64.${10 + host}`),
          prefixes: [],
          subnetId: step.subnetCandidates[0] ?? '',
          securityGroupIds: step.securityGroupIds,
          tags: tagsForNewEni(CLUSTER, INSTANCE_ID, {}),
          description: step.description,
          status: 'available',
        },
        deviceIndex: step.deviceIndex,
        attachmentId: 'eni-attach-new',
        fresh: true,
      },
      NOW,
    );
    expect(created.enis.map((candidate) => candidate.id)).toEqual(['eni-0', 'eni-new']);
    // The subnet's free count is the state's, not the observation's: the planner's next round
    // sees the addresses taken, and the observation it was given is untouched.
    const takenFrom = step.subnetCandidates[0];
    const before = observed.subnets.find((candidate) => candidate.id === takenFrom)?.availableAddresses ?? 0;
    const after = created.subnets.find((candidate) => candidate.id === takenFrom)?.availableAddresses ?? 0;
    expect(before - after).toBe(1 + (step.ipCount ?? 0));
    // The attach is confirmed without delete-on-termination: the next round sets it, on an
    // attachment EC2 may not list yet.
    expect(created.enis.find((candidate) => candidate.id === 'eni-new')?.deleteOnTermination).toBe(false);
    const repair = nextAllocationStep(observed, created);
    expect(repair).toMatchObject({ kind: 'repair', eni: { id: 'eni-new' }, justAttached: true });
    const repaired = applyStepResult(created, { kind: 'repaired', eniId: 'eni-new' }, NOW);
    expect(nextAllocationStep(observed, repaired)).toMatchObject({ kind: 'done' });
    // The confirmed answers, in order: the create, then the flag on the ENI just created.
    expect(repaired.results).toMatchObject([
      { kind: 'created', eni: { id: 'eni-new' }, deviceIndex: step.deviceIndex, fresh: true },
      { kind: 'repaired', eniId: 'eni-new' },
    ]);
  });

  it('routes around a subnet that refused, for the rest of the invocation', () => {
    const observed = observation();
    const start = initialAllocationState(observed, NOW);
    const first = nextAllocationStep(observed, start);
    if (first.kind !== 'create') throw new Error(`expected a create, got ${first.kind}`);
    const refusedSubnet = first.subnetCandidates[0] ?? '';
    const afterRefusal = applyStepResult(
      start,
      { kind: 'refused', subnetId: refusedSubnet, refusal: 'subnet-full' },
      NOW,
    );
    expect(afterRefusal.refusals.fullSubnetIds).toEqual([refusedSubnet]);
    const second = nextAllocationStep(observed, afterRefusal);
    expect(second.kind === 'create' ? second.subnetCandidates : []).not.toContain(refusedSubnet);
    expect(afterRefusal.results).toEqual([
      { kind: 'refused', subnetId: refusedSubnet, refusal: 'subnet-full' },
    ]);
  });

  it('reports a plan that cannot be carried out as blocked, and records it as the last error', () => {
    const observed = observation({ limits: undefined });
    const step = nextAllocationStep(observed, initialAllocationState(observed, NOW));
    expect(step).toMatchObject({ kind: 'blocked', code: 'UnknownInstanceLimits' });
  });

  it('an IAM denial younger than the retry delay stands: no mutation in this invocation', () => {
    const denied: NodeRecord = nodeRecordFixture({
      lastError: { code: 'UnauthorizedOperation', message: 'denied', atEpochMs: NOW - 1_000 },
    });
    expect(mayMutate(initialAllocationState(observation({ record: denied }), NOW))).toBe(false);
    const later = NOW + UNAUTHORIZED_RETRY_DELAY_MS;
    expect(mayMutate(initialAllocationState(observation({ record: denied }), later))).toBe(true);
  });

  it('drops the tombstone of a CIDR EC2 assigned to us again, and only that one', () => {
    const record = nodeRecordFixture({
      cidrReleases: {
        '10.0.0.10/32': {
          eniId: 'eni-0',
          state: 'released',
          sinceEpochMs: NOW - 10,
          releasedAtEpochMs: NOW - 5,
        },
        '10.0.0.11/32': {
          eniId: 'eni-0',
          state: 'released',
          sinceEpochMs: NOW - 10,
          releasedAtEpochMs: NOW - 5,
        },
      },
    });
    const observed = observation({ record, tombstonedCidrs: new Set(['10.0.0.10/32', '10.0.0.11/32']) });
    const assigned = applyStepResult(
      initialAllocationState(observed, NOW),
      { kind: 'assigned', eniId: 'eni-0', ips: ['10.0.0.10', '10.0.0.12'], prefixes: [] },
      NOW,
    );
    expect(Object.keys(allocationContent(observed, assigned).cidrReleases ?? {})).toEqual(['10.0.0.11/32']);
    expect(assigned.results).toEqual([
      { kind: 'assigned', eniId: 'eni-0', ips: ['10.0.0.10', '10.0.0.12'], prefixes: [] },
    ]);
  });

  it('applying a result never changes the state it was given', () => {
    const observed = observation();
    const start = initialAllocationState(observed, NOW);
    const snapshot = structuredClone({ ...start });
    applyStepResult(start, { kind: 'assigned', eniId: 'eni-0', ips: ['10.0.0.10'], prefixes: [] }, NOW);
    applyStepResult(start, { kind: 'eni-full', eniId: 'eni-0' }, NOW);
    expect({ ...start }).toEqual(snapshot);
  });
});
