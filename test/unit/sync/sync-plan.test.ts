import { describe, expect, it } from 'vitest';
import {
  type CiliumNode,
  IPAM_IGNORE_ANNOTATION,
  RECORD_VERSION_ANNOTATION,
} from '../../../functions/core/ciliumnode.ts';
import { desiredPool, desiredStatusEnis } from '../../../functions/core/ciliumnode-render.ts';
import type { NodeRecord } from '../../../functions/core/model.ts';
import { planSyncStep, releaseIpsTarget } from '../../../functions/core/sync-plan.ts';
import { appliedRecordVersion } from '../../../functions/core/table-generation.ts';
import { SCHEMA_VERSIONS, type SchemaVersion } from '../../emulators/k8s/schema.ts';
import { eniFixture, nodeRecordFixture } from '../../fixtures/node-records.ts';
import { checkStatusCoversSpec } from '../../support/invariants.ts';
import { crdProblems, FakeCiliumNodeServer, isWrite } from './support.ts';

const instanceId = 'i-0123456789abcdef0';
const eth0 = eniFixture(0, 0);

/** Version `version` of the node's record with the given ENIs. */
function recordAt(
  version: number,
  enis = [eth0, eniFixture(1, 3)],
  overrides: Partial<NodeRecord> = {},
): NodeRecord {
  return nodeRecordFixture({ version, enis, ...overrides });
}

/** A CiliumNode as an agent creates it (spec only, its own fields), before any sync. */
function agentCreatedNode(): CiliumNode {
  return {
    apiVersion: 'cilium.io/v2',
    kind: 'CiliumNode',
    metadata: { name: 'ip-10-0-1-10.ec2.internal', annotations: { 'io.cilium/agent': 'x' } },
    spec: {
      'instance-id': instanceId,
      addresses: [{ type: 'InternalIP', ip: '10.0.16.10' }],
      eni: { 'instance-type': 'm5.large', 'first-interface-index': 0, 'delete-on-termination': true },
      ipam: { 'pre-allocate': 8 },
    },
  };
}

/**
 * Plans and applies steps until a no-op, checking invariant 1 and the CRD schemas at every stored
 * version (all four generations unless `crds` names fewer: a /80 belongs only where the CRD of
 * cilium 1.20.0 or later runs). Returns the kinds of the writes and the final no-op.
 */
function converge(
  record: NodeRecord,
  server: FakeCiliumNodeServer,
  crds: readonly SchemaVersion[] = SCHEMA_VERSIONS,
): string[] {
  const kinds: string[] = [];
  for (let step = 0; step < 10; step++) {
    const planned = planSyncStep(record, server.get());
    kinds.push(
      planned.kind === 'none' || planned.kind === 'refuse'
        ? `${planned.kind}:${planned.reason}`
        : planned.kind,
    );
    if (!isWrite(planned)) return kinds;
    const stored = server.apply(planned);
    expect(checkStatusCoversSpec(stored), `after ${planned.kind}`).toEqual([]);
    expect(crdProblems(stored, crds), `after ${planned.kind}`).toEqual([]);
  }
  throw new Error(`no convergence within 10 steps: ${kinds.join(', ')}`);
}

function expectPublished(cn: CiliumNode | undefined, record: NodeRecord): void {
  expect(cn?.spec?.ipam?.pool).toEqual(desiredPool(record));
  expect(cn?.status?.eni?.enis).toEqual(desiredStatusEnis(record));
  expect(cn && appliedRecordVersion(cn)).toBe(record.version);
}

describe('planSyncStep scenarios', () => {
  it('missing CiliumNode: create with an empty pool, then status, then spec', () => {
    const server = new FakeCiliumNodeServer();
    const record = recordAt(1);
    expect(converge(record, server)).toEqual(['create', 'status', 'spec', 'none:in-sync']);
    const created = server.versions[0];
    expect(created?.spec).toEqual({ 'instance-id': instanceId, ipam: { pool: {} } });
    expect(created?.metadata.annotations).toEqual({
      [RECORD_VERSION_ANNOTATION]: '1',
      [IPAM_IGNORE_ANNOTATION]: 'true',
    });
    expectPublished(server.get(), record);
  });

  it('agent-created CiliumNode: status then spec (the typical growing sync: 2 writes)', () => {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    const record = recordAt(1);
    expect(converge(record, server)).toEqual(['status', 'spec', 'none:in-sync']);
    expectPublished(server.get(), record);
  });

  it('grow: a new ENI reaches status before any pool IP names it', () => {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    converge(recordAt(1), server);
    const grown = recordAt(2, [eth0, eniFixture(1, 3), eniFixture(2, 4)]);
    expect(converge(grown, server)).toEqual(['status', 'spec', 'none:in-sync']);
    expectPublished(server.get(), grown);
  });

  it('shrink: the pool drops the IPs first (spec-claim), then status (2 writes)', () => {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    converge(recordAt(1, [eth0, eniFixture(1, 3), eniFixture(2, 4)]), server);
    const shrunk = recordAt(2, [eth0, eniFixture(1, 1)]);
    const claim = planSyncStep(shrunk, server.get());
    expect(claim).toMatchObject({
      kind: 'spec-claim',
      removedFromPool: ['10.0.17.12', '10.0.17.13', '10.0.18.11', '10.0.18.12', '10.0.18.13', '10.0.18.14'],
      recordVersion: 2,
    });
    expect(converge(shrunk, server)).toEqual(['spec-claim', 'status', 'none:in-sync']);
    expectPublished(server.get(), shrunk);
  });

  it('mixed: claim removes, status swaps, spec adds (3 writes)', () => {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    converge(recordAt(1, [eth0, eniFixture(1, 3)]), server);
    const mixed = recordAt(2, [eth0, eniFixture(1, 1), eniFixture(2, 2)]);
    expect(converge(mixed, server)).toEqual(['spec-claim', 'status', 'spec', 'none:in-sync']);
    expectPublished(server.get(), mixed);
  });

  it('an IP that moved to another ENI leaves the pool before it reappears under the new ENI', () => {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    converge(recordAt(1, [eth0, eniFixture(1, 2)]), server);
    const moved = recordAt(2, [eth0, eniFixture(1, 1), eniFixture(2, 0, { secondaryIps: ['10.0.17.12'] })]);
    expect(converge(moved, server)).toEqual(['spec-claim', 'status', 'spec', 'none:in-sync']);
    expect(server.get()?.spec?.ipam?.pool?.['10.0.17.12']).toEqual({ resource: eniFixture(2, 0).id });
  });

  it('everything matching: no write', () => {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    const record = recordAt(1);
    converge(record, server);
    const writes = server.versions.length;
    expect(planSyncStep(record, server.get())).toEqual({ kind: 'none', reason: 'in-sync' });
    expect(server.versions).toHaveLength(writes);
  });

  it('stale record (annotation newer): nothing, never backwards', () => {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    converge(recordAt(3), server);
    expect(planSyncStep(recordAt(2, [eth0]), server.get())).toEqual({ kind: 'none', reason: 'stale' });
  });

  it.each([
    { case: 'spec.instance-id', spec: { 'instance-id': 'i-0fffffffffffffff0' } },
    { case: 'obsolete spec.eni.instance-id', spec: { eni: { 'instance-id': 'i-0fffffffffffffff0' } } },
  ])('foreign instance in $case: refuse, whatever else differs', ({ spec }) => {
    const cn: CiliumNode = { metadata: { name: 'ip-10-0-1-10.ec2.internal', resourceVersion: '7' }, spec };
    expect(planSyncStep(recordAt(1), cn)).toMatchObject({ kind: 'refuse', reason: 'refused-foreign' });
  });

  it('claimed, then the status write failed: the next plan writes status, not another claim', () => {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    converge(recordAt(1, [eth0, eniFixture(1, 3), eniFixture(2, 2)]), server);
    const shrunk = recordAt(2, [eth0, eniFixture(1, 3)]);
    const claim = planSyncStep(shrunk, server.get());
    expect(claim.kind).toBe('spec-claim');
    if (isWrite(claim)) server.apply(claim);
    // The status write is lost; a later sync of the same version resumes after the claim.
    expect(planSyncStep(shrunk, server.get()).kind).toBe('status');
    expect(converge(shrunk, server)).toEqual(['status', 'none:in-sync']);
  });

  it('status written, spec write failed: the next sync heals with the spec write alone', () => {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    converge(recordAt(1), server);
    const grown = recordAt(2, [eth0, eniFixture(1, 3), eniFixture(2, 2)]);
    const status = planSyncStep(grown, server.get());
    expect(status.kind).toBe('status');
    if (isWrite(status)) server.apply(status);
    expect(converge(grown, server)).toEqual(['spec', 'none:in-sync']);
    expectPublished(server.get(), grown);
  });

  it('once claimed, pool entries outside the record leave spec before their ENI leaves status', () => {
    // A claimed node whose pool still names a dropped ENI (hand-edited, or an agent-restored pool).
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    const before = recordAt(1, [eth0, eniFixture(1, 2), eniFixture(2, 2)]);
    converge(before, server);
    const after = recordAt(2, [eth0, eniFixture(1, 2)]);
    server.writeAsAgent((cn) => {
      cn.metadata.annotations = { [RECORD_VERSION_ANNOTATION]: '2' };
    });
    // Status may not drop ENI 2 while the pool names it: the spec write drops its IPs first.
    const first = planSyncStep(after, server.get());
    expect(first.kind).toBe('spec');
    if (first.kind === 'spec') expect(Object.keys(first.pool)).toEqual(['10.0.17.11', '10.0.17.12']);
    expect(converge(after, server)).toEqual(['spec', 'status', 'none:in-sync']);
    expectPublished(server.get(), after);
  });

  it("leaves the agent's fields alone: status.ipam.used, its spec, labels and release answers", () => {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    converge(recordAt(1), server);
    server.writeAsAgent((cn) => {
      cn.status = {
        ...cn.status,
        ipam: {
          ...cn.status?.ipam,
          used: { '10.0.17.11': { owner: 'default/pod-a', resource: eniFixture(1, 0).id } },
          'release-ips': { '10.0.17.13': 'ready-for-release' },
        },
      };
    });
    const record = recordAt(2, [eth0, eniFixture(1, 3), eniFixture(2, 1)], {
      excessMarks: { '10.0.17.13': { sinceEpochMs: 1, state: 'marked-for-release' } },
    });
    converge(record, server);
    const final = server.get();
    expect(final?.status?.ipam?.used).toEqual({
      '10.0.17.11': { owner: 'default/pod-a', resource: eniFixture(1, 0).id },
    });
    expect(final?.status?.ipam?.['release-ips']).toEqual({ '10.0.17.13': 'ready-for-release' });
    const { ipam: _ipam, ...agentSpec } = agentCreatedNode().spec ?? {};
    expect(final?.spec).toMatchObject(agentSpec);
    expect(final?.spec?.ipam?.['pre-allocate']).toBe(8);
    expect(final?.metadata.annotations?.['io.cilium/agent']).toBe('x');
  });

  it('an ENI excluded by a later first-interface-index keeps its in-use IPs in the pool (invariant 5)', () => {
    // Found by the chaos suite: the pool was planned with the stack default (index 0), the agent
    // then registered first-interface-index 1 and handed out eth0 addresses before we replanned.
    const eth0WithIps = eniFixture(0, 3);
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    converge(recordAt(1, [eth0WithIps]), server);
    server.writeAsAgent((cn) => {
      cn.status = {
        ...cn.status,
        ipam: {
          ...cn.status?.ipam,
          used: { '10.0.16.11': { owner: 'default/pod-a', resource: eth0WithIps.id } },
        },
      };
    });
    const excluding = recordAt(2, [eth0WithIps, eniFixture(1, 2)], {
      knobs: { ...nodeRecordFixture().knobs, firstInterfaceIndex: 1 },
    });
    converge(excluding, server);
    // The unused eth0 IPs the pool still offers stay until the handshake takes them out (an agent
    // allocating right now must not lose them); nothing new of eth0 is added.
    expect(Object.keys(server.get()?.spec?.ipam?.pool ?? {}).sort()).toEqual([
      '10.0.16.11',
      '10.0.16.12',
      '10.0.16.13',
      '10.0.17.11',
      '10.0.17.12',
    ]);
    const handshaken = recordAt(3, [eth0WithIps, eniFixture(1, 2)], {
      knobs: { ...nodeRecordFixture().knobs, firstInterfaceIndex: 1 },
      excessMarks: {
        '10.0.16.12': { sinceEpochMs: 1, state: 'ready-for-release', cause: 'excluded-eni' },
        '10.0.16.13': { sinceEpochMs: 1, state: 'ready-for-release', cause: 'excluded-eni' },
      },
    });
    converge(handshaken, server);
    expect(Object.keys(server.get()?.spec?.ipam?.pool ?? {}).sort()).toEqual([
      '10.0.16.11',
      '10.0.17.11',
      '10.0.17.12',
    ]);
    // Once out of the pool, the mark's end does not bring them back.
    converge(recordAt(4, [eth0WithIps, eniFixture(1, 2)], { knobs: handshaken.knobs }), server);
    expect(Object.keys(server.get()?.spec?.ipam?.pool ?? {})).not.toContain('10.0.16.12');
  });

  it('release handshake: ready IPs leave the pool first (claim), then status says released', () => {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    const ips = [eth0, eniFixture(1, 3)];
    converge(recordAt(1, ips), server);
    const marked = recordAt(2, ips, {
      excessMarks: { '10.0.17.13': { sinceEpochMs: 1, state: 'marked-for-release' } },
    });
    expect(converge(marked, server)).toEqual(['status', 'spec', 'none:in-sync']);
    expect(server.get()?.status?.ipam?.['release-ips']).toEqual({ '10.0.17.13': 'marked-for-release' });
    server.writeAsAgent((cn) => {
      cn.status = {
        ...cn.status,
        ipam: { ...cn.status?.ipam, 'release-ips': { '10.0.17.13': 'ready-for-release' } },
      };
    });
    const ready = recordAt(3, ips, {
      excessMarks: { '10.0.17.13': { sinceEpochMs: 1, state: 'ready-for-release' } },
    });
    expect(converge(ready, server)).toEqual(['spec-claim', 'none:in-sync']);
    expect(server.get()?.spec?.ipam?.pool?.['10.0.17.13']).toBeUndefined();
    const released = recordAt(4, [eth0, eniFixture(1, 2)], {
      excessMarks: { '10.0.17.13': { sinceEpochMs: 1, state: 'released' } },
    });
    expect(converge(released, server)).toEqual(['spec-claim', 'status', 'none:in-sync']);
    expect(server.get()?.status?.ipam?.['release-ips']).toEqual({ '10.0.17.13': 'released' });
    // The agent's last step: the IP is out of the pool, so it deletes the entry; we leave it deleted.
    server.writeAsAgent((cn) => {
      cn.status = { ...cn.status, ipam: { ...cn.status?.ipam, 'release-ips': {} } };
    });
    expect(converge(released, server)).toEqual(['none:in-sync']);
  });

  it('publishes and clears the operator error', () => {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    converge(
      recordAt(1, undefined, { lastError: { code: 'Throttled', message: 'slow down', atEpochMs: 1 } }),
      server,
    );
    expect(server.get()?.status?.ipam?.['operator-status']).toEqual({ error: 'Throttled: slow down' });
    expect(converge(recordAt(2), server)).toEqual(['status', 'spec', 'none:in-sync']);
    expect(server.get()?.status?.ipam?.['operator-status']).toEqual({});
  });

  it('after an agent restart wiped the annotation, one spec write restores it', () => {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    const record = recordAt(1);
    converge(record, server);
    server.writeAsAgent((cn) => {
      cn.metadata.annotations = {};
    });
    expect(converge(record, server)).toEqual(['spec', 'none:in-sync']);
  });

  it.each([
    { case: 'retired record', record: recordAt(1, undefined, { lifecycle: 'retired' }), expected: 'none' },
    {
      case: 'record without VPC primary CIDR',
      record: recordAt(1, undefined, { vpc: { id: 'vpc-1', primaryCidr: '', secondaryCidrs: [] } }),
      expected: 'refuse',
    },
  ])('$case: nothing is written, not even a create', ({ record, expected }) => {
    expect(planSyncStep(record, undefined).kind).toBe(expected);
    expect(planSyncStep(record, agentCreatedNode()).kind).toBe(expected);
  });

  it('every write tests the resourceVersion it was planned from', () => {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    const current = server.get();
    const step = planSyncStep(recordAt(1), current);
    expect(step.kind).toBe('status');
    if (step.kind === 'status') {
      expect(step.patch[0]).toEqual({ op: 'test', path: '/metadata/resourceVersion', value: '1' });
      server.writeAsAgent(() => {});
      expect(() => server.apply(step)).toThrow(/test failed/);
    }
  });
});

describe('planSyncStep with a /80 (a 1.20 agent with IPv6, in a cluster whose CRD declares ipv6-prefixes)', () => {
  const PREFIX = '2600:1f18:4a01:ab01:1::/80';
  const IPV6_CRD: readonly SchemaVersion[] = ['v1.21-dev'];
  const withPrefix = (version: number) =>
    recordAt(version, [eth0, eniFixture(1, 3, { ipv6Prefixes: [PREFIX] })]);

  it('the /80 reaches status with the record version that holds it; the pool has nothing to say about it', () => {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    converge(recordAt(1), server);
    expect(converge(withPrefix(2), server, IPV6_CRD)).toEqual(['status', 'spec', 'none:in-sync']);
    expect(server.get()?.status?.eni?.enis?.[eniFixture(1, 0).id]?.['ipv6-prefixes']).toEqual([PREFIX]);
    expect(server.get()?.spec?.ipam?.pool).toEqual(desiredPool(withPrefix(2)));
  });

  it('a /80 EC2 no longer has leaves status only after a claim, like every removal (grow-only before it)', () => {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    converge(withPrefix(1), server, IPV6_CRD);
    const lost = recordAt(2);
    expect(converge(lost, server, IPV6_CRD)).toEqual(['spec-claim', 'status', 'none:in-sync']);
    expect(server.get()?.status?.eni?.enis).toEqual(desiredStatusEnis(lost));
  });
});

describe('planSyncStep for a 1.20 agent while a CIDR is withdrawing', () => {
  /** The CRDs that declare spec.ipam.pools. */
  const POOLS_CRDS: readonly SchemaVersion[] = ['v1.20', 'v1.21-dev'];
  const eth1 = eniFixture(1, 3);
  const WITHDRAWN = `${eth1.secondaryIps[2]}/32`;
  const allCidrs = eth1.secondaryIps.map((ip) => `${ip}/32`);
  const withdrawingRecord = recordAt(2, [eth0, eth1], {
    cidrReleases: {
      [WITHDRAWN]: { eniId: eth1.id, state: 'withdrawing', sinceEpochMs: 0, withdrawnInVersion: 2 },
    },
  });

  /** The node published from version 1 (every CIDR), then the agent's `pools`: `allocated` as given. */
  function multiPoolNode(allocated: readonly string[]): FakeCiliumNodeServer {
    const server = new FakeCiliumNodeServer(agentCreatedNode());
    converge(recordAt(1, [eth0, eth1]), server);
    server.writeAsAgent((cn) => {
      cn.spec = {
        ...cn.spec,
        ipam: {
          ...cn.spec?.ipam,
          pools: {
            requested: [{ pool: 'default', needed: { 'ipv4-addrs': 2 } }],
            allocated: [{ pool: 'default', cidrs: [...allocated] }],
          },
        },
      };
    });
    return server;
  }

  const statusAddresses = (server: FakeCiliumNodeServer) =>
    server.get()?.status?.eni?.enis?.[eth1.id]?.addresses ?? [];

  // Guards the sync-side `allocated` filter: a 1.20 agent that sees a CIDR it holds leave
  // status.eni.enis takes it for removed for the life of its process. The planner normally drops
  // the entry first, but a sync may read the record before that.
  it('keeps a withdrawing CIDR that allocated lists in status and the pool', () => {
    const server = multiPoolNode(allCidrs);
    expect(converge(withdrawingRecord, server, POOLS_CRDS)).toEqual(['spec', 'none:in-sync']);
    expect(statusAddresses(server)).toContain(eth1.secondaryIps[2]);
    expect(Object.keys(server.get()?.spec?.ipam?.pool ?? {})).toContain(eth1.secondaryIps[2]);
  });

  it('withdraws it (pool first, then status) from a version whose allocated lacks it', () => {
    const server = multiPoolNode(allCidrs.filter((cidr) => cidr !== WITHDRAWN));
    expect(converge(withdrawingRecord, server, POOLS_CRDS)).toEqual(['spec-claim', 'status', 'none:in-sync']);
    expect(statusAddresses(server)).not.toContain(eth1.secondaryIps[2]);
    expect(Object.keys(server.get()?.spec?.ipam?.pool ?? {})).not.toContain(eth1.secondaryIps[2]);
  });
});

describe('releaseIpsTarget', () => {
  it.each([
    {
      case: 'marked, no answer yet',
      state: 'marked-for-release',
      published: undefined,
      expected: 'marked-for-release',
    },
    {
      case: 'marked, agent answered ready',
      state: 'marked-for-release',
      published: 'ready-for-release',
      expected: 'ready-for-release',
    },
    {
      case: 'marked, agent answered do-not',
      state: 'marked-for-release',
      published: 'do-not-release',
      expected: 'do-not-release',
    },
    { case: 'released overrides', state: 'released', published: 'ready-for-release', expected: 'released' },
    {
      case: 'released, entry deleted by the agent: not re-created',
      state: 'released',
      published: undefined,
      expected: undefined,
    },
    {
      case: 'record copied ready: agent value kept',
      state: 'ready-for-release',
      published: 'ready-for-release',
      expected: 'ready-for-release',
    },
    {
      case: 'record copied ready, entry gone: not re-created',
      state: 'ready-for-release',
      published: undefined,
      expected: undefined,
    },
    {
      case: 'still within the release delay: not published',
      state: undefined,
      published: undefined,
      expected: undefined,
    },
  ] as const)('$case', ({ state, published, expected }) => {
    const record = recordAt(1, undefined, {
      excessMarks: { '10.0.17.11': { sinceEpochMs: 1, ...(state ? { state } : {}) } },
    });
    const target = releaseIpsTarget(record, published ? { '10.0.17.11': published } : {});
    expect(target['10.0.17.11']).toBe(expected);
  });

  it('drops entries for IPs the record no longer marks', () => {
    expect(releaseIpsTarget(recordAt(1), { '10.0.17.11': 'do-not-release' })).toEqual({});
  });
});
