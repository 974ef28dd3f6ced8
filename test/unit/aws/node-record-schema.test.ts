import { marshall, unmarshall } from '@aws-sdk/util-dynamodb';
import { describe, expect, expectTypeOf, it } from 'vitest';
import * as z from 'zod/mini';
import {
  decodeNodeRecord,
  nodeRecordSchema,
  type SchemaMatchesModel,
} from '../../../functions/aws/node-record-schema.ts';
import type { InstanceView, NodeRecord } from '../../../functions/core/model.ts';
import { nextNodeRecord } from '../../../functions/core/node-record.ts';
import { defaultKnobs, eniFixture, nodeRecordFixture } from '../../fixtures/node-records.ts';

const NOW = 1_700_000_500_000;

const instance: InstanceView = {
  id: 'i-0123456789abcdef0',
  instanceType: 'm6i.large',
  state: 'running',
  availabilityZone: 'us-east-1a',
  vpcId: 'vpc-00000001',
  subnetId: 'subnet-00000001',
  privateDnsName: 'ip-10-0-16-10.ec2.internal',
  privateIp: '10.0.16.10',
  tags: { Name: 'worker' },
};

/**
 * A record as the services write it: the second version over a draining node's first, with a
 * foreign eth0, a freshly filled ENI holding a /80, excess marks in the handshake, multi-pool
 * release entries, a lease, a recorded error, refused knobs and the table stamp.
 */
function writtenRecord(): NodeRecord {
  const previous = nodeRecordFixture({
    instanceId: instance.id,
    lifecycle: 'draining',
    expiresAtEpochSeconds: 1_700_086_400,
    excessMarks: {
      '10.0.17.11': { sinceEpochMs: NOW - 60_000, state: 'ready-for-release' },
      '10.0.17.12': { sinceEpochMs: NOW - 30_000, state: 'marked-for-release', cause: 'excluded-eni' },
      '10.0.17.13': { sinceEpochMs: NOW - 10_000 },
    },
  });
  return nextNodeRecord(
    previous,
    {
      instance,
      nodeName: instance.privateDnsName,
      vpc: { id: 'vpc-00000001', primaryCidr: '10.0.0.0/16', secondaryCidrs: ['100.64.0.0/16'] },
      enis: [
        eniFixture(1, 3, {
          ipv6Prefixes: ['2600:1f18:4a01:ab03:1::/80'],
          prefixes: ['10.0.17.32/28'],
          tags: { 'io.cilium/cilium-managed': 'true' },
          lastMutatedAtEpochMs: NOW - 1_000,
        }),
        eniFixture(0, 0, { foreign: true, deleteOnTermination: false }),
      ],
      knobs: {
        ...defaultKnobs,
        preAllocate: 4,
        subnetTags: { tier: 'pods' },
        excludeInterfaceTags: { 'vpc-cni': 'owned' },
        malformed: ['spec.ipam.max-allocate: expected an integer, got "lots"'],
      },
      prefixDelegation: true,
      lastError: {
        code: 'InsufficientFreeAddressesInSubnet',
        message: 'subnet full',
        atEpochMs: NOW - 5_000,
      },
      lease: { holder: 'allocate/request-1', expiresAtEpochMs: NOW + 30_000 },
      cidrReleases: {
        '10.0.17.14/32': { eniId: 'eni-00000000000000001', state: 'pending', sinceEpochMs: NOW - 2_000 },
        '10.0.17.48/28': {
          eniId: 'eni-00000000000000001',
          state: 'released',
          sinceEpochMs: NOW - 90_000,
          releasedAtEpochMs: NOW - 20_000,
          withdrawnInVersion: 1,
        },
      },
      agentProtocol: 'multi-pool',
      reconciledInTable: 'nodes@2026-01-01T00:00:00.000Z',
    },
    NOW,
  );
}

/** `record` with the value at `path` replaced (or removed, for `undefined`), built afresh. */
function withValueAt(record: NodeRecord, path: readonly (string | number)[], value: unknown): unknown {
  const copy = structuredClone(record) as unknown as Record<string | number, unknown>;
  let parent = copy;
  for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
  const last = path.at(-1) as string | number;
  if (value === undefined) delete parent[last];
  else parent[last] = value;
  return copy;
}

function refusal(attributes: unknown): { field: string; problem: string } {
  const decoded = decodeNodeRecord(attributes as Record<string, unknown>);
  if (decoded.ok) throw new Error('the attributes were read as a record');
  return { field: decoded.field, problem: decoded.problem };
}

describe('nodeRecordSchema', () => {
  it('reads a record the services wrote exactly as written, also after a DynamoDB round trip', () => {
    const record = writtenRecord();
    // The record under test carries every optional part of the model.
    expect(Object.keys(record).sort()).toEqual(Object.keys(nodeRecordSchema.def.shape).sort());
    expect(record.enis.map((eni) => eni.deviceIndex)).toEqual([0, 1]);
    const stored = unmarshall(marshall(record, { removeUndefinedValues: true }));

    expect(decodeNodeRecord(structuredClone(record) as unknown as Record<string, unknown>)).toStrictEqual({
      ok: true,
      record,
    });
    expect(decodeNodeRecord(stored)).toStrictEqual({ ok: true, record });
  });

  it('reads a first-layout record (no /80s, none of the later optional fields) without adding any', () => {
    const old = nodeRecordFixture();
    expect(decodeNodeRecord(unmarshall(marshall(old)))).toStrictEqual({ ok: true, record: old });
  });

  it.each([
    {
      case: 'an ENI id a number',
      path: ['enis', 0, 'id'],
      value: 7,
      field: 'enis[0].id',
      problem: 'has the wrong type: expected string, found 7',
    },
    {
      case: 'an ENI without its secondary IPs',
      path: ['enis', 1, 'secondaryIps'],
      value: undefined,
      field: 'enis[1].secondaryIps',
      problem: 'is missing (expected array)',
    },
    {
      case: 'one /80 a number',
      path: ['enis', 1, 'ipv6Prefixes', 0],
      value: 80,
      field: 'enis[1].ipv6Prefixes[0]',
      problem: 'has the wrong type: expected string, found 80',
    },
    {
      case: 'foreign a string',
      path: ['enis', 0, 'foreign'],
      value: 'yes',
      field: 'enis[0].foreign',
      problem: 'has the wrong type: expected boolean, found "yes"',
    },
    {
      case: 'an ENI tag value a number',
      path: ['enis', 1, 'tags', 'io.cilium/cilium-managed'],
      value: 1,
      field: 'enis[1].tags.io.cilium/cilium-managed',
      problem: 'has the wrong type: expected string, found 1',
    },
    {
      case: 'a subnet tag knob a list',
      path: ['knobs', 'subnetTags', 'tier'],
      value: ['pods'],
      field: 'knobs.subnetTags.tier',
      problem: 'has the wrong type: expected string, found ["pods"]',
    },
    {
      case: 'a refused knob not text',
      path: ['knobs', 'malformed', 0],
      value: { field: 'max-allocate' },
      field: 'knobs.malformed[0]',
      problem: 'has the wrong type: expected string, found {"field":"max-allocate"}',
    },
    {
      case: 'secondary VPC CIDRs a string',
      path: ['vpc', 'secondaryCidrs'],
      value: '100.64.0.0/16',
      field: 'vpc.secondaryCidrs',
      problem: 'has the wrong type: expected array, found "100.64.0.0/16"',
    },
    {
      case: 'an excess mark of an unknown state',
      path: ['excessMarks', '10.0.17.11', 'state'],
      value: 'gone',
      field: 'excessMarks.10.0.17.11.state',
      problem:
        'has the wrong value: expected "marked-for-release" or "ready-for-release" or "do-not-release" or "released", found "gone"',
    },
    {
      case: 'an excess mark of an unknown cause',
      path: ['excessMarks', '10.0.17.12', 'cause'],
      value: 'excess',
      field: 'excessMarks.10.0.17.12.cause',
      problem: 'has the wrong value: expected "excluded-eni", found "excess"',
    },
    {
      case: 'a release entry withdrawn in version "1"',
      path: ['cidrReleases', '10.0.17.48/28', 'withdrawnInVersion'],
      value: '1',
      field: 'cidrReleases.10.0.17.48/28.withdrawnInVersion',
      problem: 'has the wrong type: expected number, found "1"',
    },
    {
      case: 'a lease without its expiry',
      path: ['lease', 'expiresAtEpochMs'],
      value: undefined,
      field: 'lease.expiresAtEpochMs',
      problem: 'is missing (expected number)',
    },
    {
      case: 'a recorded error code null',
      path: ['lastError', 'code'],
      value: null,
      field: 'lastError.code',
      problem: 'has the wrong type: expected string, found null',
    },
    {
      case: 'an unknown agent protocol',
      path: ['agentProtocol'],
      value: 'cni',
      field: 'agentProtocol',
      problem: 'has the wrong value: expected "crd" or "multi-pool", found "cni"',
    },
    {
      case: 'an unknown lifecycle',
      path: ['lifecycle'],
      value: 'gone',
      field: 'lifecycle',
      problem: 'has the wrong value: expected "active" or "draining" or "retired", found "gone"',
    },
    {
      case: 'no lifecycle',
      path: ['lifecycle'],
      value: undefined,
      field: 'lifecycle',
      problem: 'is missing (expected "active" or "draining" or "retired")',
    },
    {
      case: 'version 0',
      path: ['version'],
      value: 0,
      field: 'version',
      problem: 'must be positive, found 0',
    },
    {
      case: 'a fractional version',
      path: ['version'],
      value: 1.5,
      field: 'version',
      problem: 'has the wrong type: expected int, found 1.5',
    },
    {
      case: 'an empty node name',
      path: ['nodeName'],
      value: '',
      field: 'nodeName',
      problem: 'must not be empty, found ""',
    },
    {
      case: 'the TTL a string',
      path: ['expiresAtEpochSeconds'],
      value: '1700086400',
      field: 'expiresAtEpochSeconds',
      problem: 'has the wrong type: expected number, found "1700086400"',
    },
  ])('refuses $case, naming the field and what was found', ({ path, value, field, problem }) => {
    expect(refusal(withValueAt(writtenRecord(), path, value))).toEqual({ field, problem });
  });

  it('names the first problem in the declared order and the further ones by their path', () => {
    const handEdit = { instanceId: 'i-0123456789abcdef0', version: 2, nodeName: 'n', knobs: {}, enis: 'x' };
    const { field, problem } = refusal(handEdit);
    expect(field).toBe('enis');
    expect(problem).toMatch(
      /^has the wrong type: expected array, found "x" \(and \d+ more: instanceType, availabilityZone, nodeSubnetId, …\)$/,
    );
    expect(refusal({ ...writtenRecord(), nodeName: '', vpc: undefined })).toEqual({
      field: 'nodeName',
      problem: 'must not be empty, found "" (and 1 more: vpc)',
    });
  });

  it('refuses what is no object at all', () => {
    expect(refusal(['not', 'a', 'record'])).toEqual({
      field: 'the payload',
      problem: 'has the wrong type: expected object, found ["not","a","record"]',
    });
  });

  // Dropped, not refused: a field added within a layout is one an older release may lose (see the
  // schema's module comment); refusing it would make a rolled-back release unable to read any
  // record the newer one wrote.
  it('drops attributes it does not declare, at every depth, __proto__ among them', () => {
    const record = writtenRecord();
    const [eth0, eth1] = record.enis;
    const written = JSON.parse(
      JSON.stringify({
        ...record,
        futureField: { from: 'a newer release' },
        enis: [eth0, { ...eth1, futureEniField: 1 }],
        knobs: { ...record.knobs, futureKnob: true },
        lease: { ...record.lease, futureLeaseField: 'x' },
      }).replace('"futureField"', '"__proto__":{"polluted":true},"futureField"'),
    ) as Record<string, unknown>;
    expect(Object.hasOwn(written, '__proto__')).toBe(true);

    const decoded = decodeNodeRecord(written);
    expect(decoded).toStrictEqual({ ok: true, record });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('matches the model exactly, and the check it is held to sees a missing optional field', () => {
    const lacking = z.omit(nodeRecordSchema, { expiresAtEpochSeconds: true });
    // Compile-time (tsc): the schema is the model; one without an optional field is not, though
    // it is assignable to the model.
    expectTypeOf<SchemaMatchesModel<z.infer<typeof nodeRecordSchema>, NodeRecord>>().toEqualTypeOf<true>();
    expectTypeOf<SchemaMatchesModel<z.infer<typeof lacking>, NodeRecord>>().toEqualTypeOf<false>();
    expectTypeOf<z.infer<typeof lacking>>().toExtend<NodeRecord>();
    // At run time, what such a schema would cost: the field is gone, and the next write loses it.
    const retired = { ...writtenRecord(), lifecycle: 'retired' as const };
    expect(z.parse(lacking, retired)).not.toHaveProperty('expiresAtEpochSeconds');
    expect(z.parse(nodeRecordSchema, retired)).toHaveProperty('expiresAtEpochSeconds', 1_700_086_400);
  });
});
