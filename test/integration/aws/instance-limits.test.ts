import { afterEach, describe, expect, it } from 'vitest';
import {
  InstanceLimitsCatalog,
  type InstanceLimitsCatalogOptions,
  type LimitsFallbackEvent,
  STATIC_INSTANCE_LIMITS,
} from '../../../functions/aws/instance-limits.ts';
import { isEc2Failure } from '../../../functions/core/ec2-failure.ts';
import type { InstanceLimits } from '../../../functions/core/model.ts';
import { type Ec2Fixture, startEc2Fixture } from './ec2-fixture.ts';

let fixture: Ec2Fixture | undefined;

afterEach(async () => {
  await fixture?.close();
  fixture = undefined;
});

/** A type in our static table that the emulated EC2 does not offer. */
const LEGACY_TYPE = 'legacy9.large';
const LEGACY_LIMITS: InstanceLimits = {
  maxInterfaces: 4,
  ipv4PerInterface: 12,
  hypervisor: 'xen',
  bareMetal: false,
};
const M5_LARGE: InstanceLimits = {
  maxInterfaces: 3,
  ipv4PerInterface: 10,
  ipv6PerInterface: 10,
  hypervisor: 'nitro',
  bareMetal: false,
};

async function catalogOverEmulator(options: Partial<InstanceLimitsCatalogOptions> = {}) {
  fixture = await startEc2Fixture({ retry: { maxAttempts: 2 } });
  const f = fixture;
  let nowMs = 1_000_000;
  const fallbacks: LimitsFallbackEvent[] = [];
  const catalog = new InstanceLimitsCatalog({
    describeInstanceLimits: (instanceType) => f.adapter.describeInstanceLimits(instanceType),
    nowMs: () => nowMs,
    unknownTypeTtlMs: 60_000,
    retryAfterFailureMs: 5_000,
    staticTable: new Map([...STATIC_INSTANCE_LIMITS, [LEGACY_TYPE, LEGACY_LIMITS]]),
    onFallback: (event) => fallbacks.push(event),
    ...options,
  });
  return {
    catalog,
    fallbacks,
    emulator: f.emulator,
    describeCalls: () => f.emulator.calls.count('DescribeInstanceTypes'),
    advanceMs: (milliseconds: number) => {
      nowMs += milliseconds;
    },
  };
}

describe('InstanceLimitsCatalog', () => {
  it('asks EC2 once per type per container, also for concurrent askers', async () => {
    const { catalog, describeCalls, advanceMs, fallbacks } = await catalogOverEmulator();

    const concurrent = await Promise.all([catalog.limitsFor('m5.large'), catalog.limitsFor('m5.large')]);
    advanceMs(24 * 3_600_000);
    const later = await catalog.limitsFor('m5.large');

    expect(concurrent).toEqual([M5_LARGE, M5_LARGE]);
    expect(later).toEqual(M5_LARGE);
    expect(describeCalls()).toBe(1);
    expect(fallbacks).toEqual([]);
  });

  it('answers from EC2 over the static table, bare metal included', async () => {
    const { catalog, emulator } = await catalogOverEmulator();
    emulator.state.defineInstanceType('m5.large', {
      maxInterfaces: 4,
      ipv4PerInterface: 11,
      hypervisor: 'nitro',
    });

    expect(await catalog.limitsFor('m5.large')).toEqual({
      ...M5_LARGE,
      maxInterfaces: 4,
      ipv4PerInterface: 11,
      ipv6PerInterface: 11,
    });
    expect(await catalog.limitsFor('c5.metal')).toEqual({
      maxInterfaces: 15,
      ipv4PerInterface: 50,
      ipv6PerInterface: 50,
      hypervisor: '',
      bareMetal: true,
    });
  });

  it('falls back to the static table for a type EC2 does not know, and remembers that for a bounded time', async () => {
    const { catalog, describeCalls, advanceMs, fallbacks } = await catalogOverEmulator();

    expect(await catalog.limitsFor(LEGACY_TYPE)).toEqual(LEGACY_LIMITS);
    advanceMs(59_000);
    expect(await catalog.limitsFor(LEGACY_TYPE)).toEqual(LEGACY_LIMITS);
    expect(describeCalls()).toBe(1);

    advanceMs(2_000);
    expect(await catalog.limitsFor(LEGACY_TYPE)).toEqual(LEGACY_LIMITS);
    expect(describeCalls()).toBe(2);
    expect(fallbacks.map((event) => [event.reason, event.staticHit])).toEqual([
      ['unknown-to-ec2', true],
      ['unknown-to-ec2', true],
    ]);
  });

  it('answers undefined, and caches that, for a type nobody knows', async () => {
    const { catalog, describeCalls } = await catalogOverEmulator();

    expect(await catalog.limitsFor('zz9.plural')).toBeUndefined();
    expect(await catalog.limitsFor('zz9.plural')).toBeUndefined();
    expect(describeCalls()).toBe(1);
  });

  it('falls back to the static table when DescribeInstanceTypes fails, and asks EC2 again later', async () => {
    const { catalog, emulator, describeCalls, advanceMs, fallbacks } = await catalogOverEmulator();
    const fault = emulator.faults.inject({ action: 'DescribeInstanceTypes', kind: 'server-error', times: 2 });

    expect(await catalog.limitsFor('m5.large')).toEqual(M5_LARGE);
    expect(fault.hits).toBe(2);
    expect(fallbacks).toHaveLength(1);
    expect(fallbacks[0]).toMatchObject({
      instanceType: 'm5.large',
      reason: 'describe-failed',
      staticHit: true,
    });
    expect(isEc2Failure(fallbacks[0]?.error, 'server-fault')).toBe(true);

    expect(await catalog.limitsFor('m5.large')).toEqual(M5_LARGE);
    expect(describeCalls()).toBe(2);
    advanceMs(5_000);
    expect(await catalog.limitsFor('m5.large')).toEqual(M5_LARGE);
    expect(describeCalls()).toBe(3);
  });

  it('rethrows the failure, uncached, when the static table does not know the type either', async () => {
    const { catalog, emulator, describeCalls } = await catalogOverEmulator({ staticTable: new Map() });
    emulator.faults.inject({ action: 'DescribeInstanceTypes', kind: 'server-error', times: 2 });

    await expect(catalog.limitsFor('m5.large')).rejects.toMatchObject({ kind: 'server-fault' });
    expect(await catalog.limitsFor('m5.large')).toEqual(M5_LARGE);
    expect(describeCalls()).toBe(3);
  });

  it('ships the static table with bare metal derived from the type name, and IPv6 per interface (0 without IPv6)', () => {
    expect(STATIC_INSTANCE_LIMITS.get('m5.24xlarge')).toEqual({
      maxInterfaces: 15,
      ipv4PerInterface: 50,
      ipv6PerInterface: 50,
      hypervisor: 'nitro',
      bareMetal: false,
    });
    expect(STATIC_INSTANCE_LIMITS.get('c7a.metal-48xl')).toMatchObject({ hypervisor: '', bareMetal: true });
    expect(STATIC_INSTANCE_LIMITS.get('m3.medium')).toMatchObject({
      ipv4PerInterface: 6,
      ipv6PerInterface: 0,
    });
  });
});
