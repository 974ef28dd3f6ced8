import { describe, expect, it } from 'vitest';
import {
  loadCiliumNodeSchema,
  prune,
  SCHEMA_VERSIONS,
  type StructuralSchema,
  schemaFromCrd,
  validate,
} from './schema.ts';
import { exampleCiliumNode } from './test-helpers.ts';

const schema: StructuralSchema = {
  type: 'object',
  required: ['metadata', 'spec'],
  properties: {
    apiVersion: { type: 'string' },
    kind: { type: 'string' },
    metadata: { type: 'object' },
    spec: {
      type: 'object',
      required: ['name'],
      properties: {
        name: { type: 'string', minLength: 1, maxLength: 5, pattern: '^[a-z]*$' },
        count: { type: 'integer', minimum: 0, maximum: 10 },
        ratio: { type: 'number', minimum: 0, exclusiveMinimum: true },
        flag: { type: 'boolean' },
        state: { type: 'string', enum: ['on', 'off'] },
        cidr: { type: 'string', format: 'cidr' },
        ip: { type: 'string', format: 'ipv4' },
        port: { 'x-kubernetes-int-or-string': true },
        note: { type: 'string', nullable: true },
        tags: { type: 'object', additionalProperties: { type: 'string' } },
        list: {
          type: 'array',
          items: { type: 'object', properties: { id: { type: 'string' } } },
          maxItems: 2,
        },
        free: {
          type: 'object',
          'x-kubernetes-preserve-unknown-fields': true,
          properties: { known: { type: 'integer' } },
        },
        closed: { type: 'object' },
      },
    },
  },
};

const object = (spec: Record<string, unknown>) => ({
  apiVersion: 'x/v1',
  kind: 'X',
  metadata: { name: 'n' },
  spec: { name: 'ok', ...spec },
});

describe('validate', () => {
  it.each([
    { case: 'a minimal object', spec: {} },
    {
      case: 'every constraint met',
      spec: { count: 10, ratio: 0.5, flag: true, state: 'on', cidr: '10.0.0.0/16', ip: '10.0.0.1' },
    },
    { case: 'an IPv6 CIDR', spec: { cidr: 'fd00::/8' } },
    { case: 'int-or-string as integer', spec: { port: 80 } },
    { case: 'int-or-string as string', spec: { port: 'http' } },
    { case: 'null where nullable', spec: { note: null } },
    { case: 'a map of strings', spec: { tags: { a: 'b' } } },
    {
      case: 'unknown fields under preserve-unknown-fields',
      spec: { free: { known: 1, other: { deep: true } } },
    },
  ])('accepts $case', ({ spec }) => {
    expect(validate(object(spec), schema)).toEqual([]);
  });

  it.each([
    {
      case: 'wrong type',
      spec: { count: 'three' },
      field: 'spec.count',
      reason: 'FieldValueTypeInvalid',
      message: 'Invalid value: "string": spec.count in body must be of type integer: "string"',
    },
    {
      case: 'a fraction for an integer',
      spec: { count: 1.5 },
      field: 'spec.count',
      reason: 'FieldValueTypeInvalid',
      message: 'Invalid value: "number": spec.count in body must be of type integer: "number"',
    },
    {
      case: 'below minimum',
      spec: { count: -1 },
      field: 'spec.count',
      reason: 'FieldValueInvalid',
      message: 'Invalid value: -1: spec.count in body should be greater than or equal to 0',
    },
    {
      case: 'above maximum',
      spec: { count: 11 },
      field: 'spec.count',
      reason: 'FieldValueInvalid',
      message: 'Invalid value: 11: spec.count in body should be less than or equal to 10',
    },
    {
      case: 'exclusive minimum',
      spec: { ratio: 0 },
      field: 'spec.ratio',
      reason: 'FieldValueInvalid',
      message: 'Invalid value: 0: spec.ratio in body should be greater than 0',
    },
    {
      case: 'not in the enum',
      spec: { state: 'maybe' },
      field: 'spec.state',
      reason: 'FieldValueNotSupported',
      message: 'Unsupported value: "maybe": supported values: "on", "off"',
    },
    {
      case: 'too short',
      spec: { name: '' },
      field: 'spec.name',
      reason: 'FieldValueInvalid',
      message: 'Invalid value: "": spec.name in body should be at least 1 chars long',
    },
    {
      case: 'too long',
      spec: { name: 'abcdef' },
      field: 'spec.name',
      reason: 'FieldValueInvalid',
      message: 'Invalid value: "abcdef": spec.name in body should be at most 5 chars long',
    },
    {
      case: 'pattern mismatch',
      spec: { name: 'AB' },
      field: 'spec.name',
      reason: 'FieldValueInvalid',
      message: `Invalid value: "AB": spec.name in body should match '^[a-z]*$'`,
    },
    {
      case: 'a bad CIDR',
      spec: { cidr: '10.0.0.0/33' },
      field: 'spec.cidr',
      reason: 'FieldValueInvalid',
      message: 'Invalid value: "10.0.0.0/33": spec.cidr in body must be of type cidr: "10.0.0.0/33"',
    },
    {
      case: 'a bad IPv4',
      spec: { ip: '10.0.0.256' },
      field: 'spec.ip',
      reason: 'FieldValueInvalid',
      message: 'Invalid value: "10.0.0.256": spec.ip in body must be of type ipv4: "10.0.0.256"',
    },
    {
      case: 'int-or-string as boolean',
      spec: { port: true },
      field: 'spec.port',
      reason: 'FieldValueTypeInvalid',
      message: 'Invalid value: "boolean": spec.port in body must be of type integer-or-string: "boolean"',
    },
    {
      case: 'null where not nullable',
      spec: { flag: null },
      field: 'spec.flag',
      reason: 'FieldValueTypeInvalid',
      message: 'Invalid value: "null": spec.flag in body must be of type boolean: "null"',
    },
    {
      case: 'a bad map value',
      spec: { tags: { 'a.b': 1 } },
      field: 'spec.tags.a.b',
      reason: 'FieldValueTypeInvalid',
      message: 'Invalid value: "integer": spec.tags.a.b in body must be of type string: "integer"',
    },
    {
      case: 'a bad list item',
      spec: { list: [{ id: 'a' }, { id: 2 }] },
      field: 'spec.list[1].id',
      reason: 'FieldValueTypeInvalid',
      message: 'Invalid value: "integer": spec.list[1].id in body must be of type string: "integer"',
    },
    {
      case: 'too many items',
      spec: { list: [{}, {}, {}] },
      field: 'spec.list',
      reason: 'FieldValueInvalid',
      message: 'Invalid value: 3: spec.list in body should have at most 2 items',
    },
    {
      case: 'a missing required field',
      spec: { name: undefined },
      field: 'spec.name',
      reason: 'FieldValueRequired',
      message: 'Required value',
    },
  ])('reports $case', ({ spec, field, reason, message }) => {
    const value = JSON.parse(JSON.stringify(object(spec)));
    expect(validate(value, schema)).toEqual([{ field, reason, message }]);
  });

  it('does not validate metadata against the schema, only requires it', () => {
    expect(validate({ ...object({}), metadata: { name: 1 } }, schema)).toEqual([]);
    const { metadata: _dropped, ...withoutMetadata } = object({});
    expect(validate(withoutMetadata, schema)).toEqual([
      { field: 'metadata', reason: 'FieldValueRequired', message: 'Required value' },
    ]);
  });
});

describe('prune', () => {
  it('drops undeclared fields and reports their paths, keeping metadata, apiVersion and kind', () => {
    const value = {
      apiVersion: 'x/v1',
      kind: 'X',
      metadata: { name: 'n', anything: 1 },
      extra: 1,
      spec: {
        name: 'ok',
        bogus: true,
        list: [{ id: 'a', junk: 1 }],
        closed: { gone: 1 },
        free: { kept: 1 },
        tags: { t: 'v' },
      },
    };
    expect(prune(value, schema)).toEqual(['extra', 'spec.bogus', 'spec.list[0].junk', 'spec.closed.gone']);
    expect(value).toEqual({
      apiVersion: 'x/v1',
      kind: 'X',
      metadata: { name: 'n', anything: 1 },
      spec: { name: 'ok', list: [{ id: 'a' }], closed: {}, free: { kept: 1 }, tags: { t: 'v' } },
    });
  });

  it('drops nulls of non-nullable fields silently and keeps nullable ones', () => {
    const value = object({ flag: null, note: null });
    expect(prune(value, schema)).toEqual([]);
    expect(value.spec).toEqual({ name: 'ok', note: null });
  });
});

describe('the CiliumNode CRD schemas', () => {
  it.each(SCHEMA_VERSIONS)('%s loads with only supported keywords', (version) => {
    expect(loadCiliumNodeSchema(version).properties?.spec?.type).toBe('object');
  });

  it('refuses a CRD with a keyword the validator would not enforce', () => {
    const crd = {
      spec: {
        versions: [
          { name: 'v2', schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-validations': [] } } },
        ],
      },
    };
    expect(() => schemaFromCrd(crd)).toThrow('unsupported schema keyword "x-kubernetes-validations"');
  });

  it.each(SCHEMA_VERSIONS)('accepts the minimal CRD-protocol example under %s', (version) => {
    const example = exampleCiliumNode();
    const pruned = prune(example, loadCiliumNodeSchema(version));
    expect(validate(example, loadCiliumNodeSchema(version))).toEqual([]);
    // v1.12 predates spec.eni.node-subnet-id; everything else is known to every generation.
    expect(pruned).toEqual(version === 'v1.12' ? ['spec.eni.node-subnet-id'] : []);
  });

  it.each(SCHEMA_VERSIONS)('rejects a release-ips value outside the handshake states under %s', (version) => {
    const example = exampleCiliumNode();
    const node = {
      ...example,
      status: { ...example.status, ipam: { ...example.status.ipam, 'release-ips': { '10.0.1.21': 'gone' } } },
    };
    expect(validate(node, loadCiliumNodeSchema(version))).toEqual([
      {
        field: 'status.ipam.release-ips.10.0.1.21',
        reason: 'FieldValueNotSupported',
        message:
          'Unsupported value: "gone": supported values: "marked-for-release", "ready-for-release", "do-not-release", "released"',
      },
    ]);
  });

  it.each(SCHEMA_VERSIONS)('rejects a string pre-allocate under %s', (version) => {
    const example = exampleCiliumNode();
    const node = {
      ...example,
      spec: { ...example.spec, ipam: { ...example.spec.ipam, 'pre-allocate': '8' } },
    };
    expect(validate(node, loadCiliumNodeSchema(version))).toEqual([
      expect.objectContaining({ field: 'spec.ipam.pre-allocate', reason: 'FieldValueTypeInvalid' }),
    ]);
  });

  it.each([
    { version: 'v1.12', errors: 0 },
    { version: 'v1.19-dev', errors: 0 },
    { version: 'v1.20', errors: 1 },
    { version: 'v1.21-dev', errors: 1 },
  ] as const)(
    'checks the ENI subnet CIDR format only where the CRD declares it ($version)',
    ({ version, errors }) => {
      const example = exampleCiliumNode();
      example.status.eni.enis['eni-0a'].subnet.cidr = '10.0.1.0';
      const expected = Array.from({ length: errors }, () =>
        expect.objectContaining({ field: 'status.eni.enis.eni-0a.subnet.cidr', reason: 'FieldValueInvalid' }),
      );
      expect(validate(example, loadCiliumNodeSchema(version))).toEqual(expected);
    },
  );
});
