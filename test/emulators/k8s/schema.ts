import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { deepEqual, isJsonObject, type JsonObject } from './json.ts';
import type { FieldError } from './status.ts';

/**
 * Structural-schema pruning and validation of custom resources, as apiextensions-apiserver does
 * them for a CRD's `openAPIV3Schema`:
 *  - prune: fields the schema does not declare are dropped when the request is decoded
 *    (`pkg/apiserver/schema/pruning`), and `null`s of non-nullable fields without a default are
 *    dropped too (`PruneNonNullableNullsWithoutDefaults`);
 *  - validate: kube-openapi's validator, with errors turned into `field.Error`s whose texts match
 *    the server's (`spec.ipam.pre-allocate in body must be of type integer: "string"`).
 * `metadata` at the root is neither pruned nor validated here: the server handles ObjectMeta itself.
 */

export type SchemaVersion = 'v1.12' | 'v1.19-dev' | 'v1.20' | 'v1.21-dev';
export const SCHEMA_VERSIONS: readonly SchemaVersion[] = ['v1.12', 'v1.19-dev', 'v1.20', 'v1.21-dev'];

/**
 * The emulator's default: all four, v1.19-dev first because the first one prunes and v1.19-dev is
 * the last CRD of the pool protocol this project targets (v1.12 lacks `spec.eni.node-subnet-id`,
 * v1.20 dropped `spec.eni.instance-id`; both are kept, and each other schema still validates).
 * A cluster of 1.20/1.21 agents runs their CRD: `CRD_OF_MULTI_POOL_CLUSTERS` prunes with v1.21-dev
 * (which keeps `status.eni.enis[].ipv6-prefixes`) and still validates against the other three.
 */
export const DEFAULT_SCHEMAS: readonly SchemaVersion[] = ['v1.19-dev', 'v1.12', 'v1.20', 'v1.21-dev'];
export const CRD_OF_MULTI_POOL_CLUSTERS: readonly SchemaVersion[] = [
  'v1.21-dev',
  'v1.19-dev',
  'v1.12',
  'v1.20',
];

export interface StructuralSchema {
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  description?: string;
  properties?: Record<string, StructuralSchema>;
  required?: string[];
  additionalProperties?: StructuralSchema | boolean;
  items?: StructuralSchema;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  minProperties?: number;
  maxProperties?: number;
  pattern?: string;
  format?: string;
  nullable?: boolean;
  default?: unknown;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-int-or-string'?: boolean;
}

/** Keywords this module enforces. A CRD using any other one is refused rather than half-checked. */
const SUPPORTED_KEYWORDS = new Set([
  'type',
  'description',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'enum',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'minLength',
  'maxLength',
  'minItems',
  'maxItems',
  'minProperties',
  'maxProperties',
  'pattern',
  'format',
  'nullable',
  'x-kubernetes-preserve-unknown-fields',
  'x-kubernetes-int-or-string',
]);

function checkSupported(schema: unknown, path: string): void {
  if (!isJsonObject(schema)) throw new Error(`schema at ${path || '<root>'} is not an object`);
  for (const key of Object.keys(schema)) {
    if (!SUPPORTED_KEYWORDS.has(key))
      throw new Error(`unsupported schema keyword "${key}" at ${path || '<root>'}`);
  }
  for (const [name, child] of Object.entries(schema.properties ?? {}))
    checkSupported(child, `${path}.${name}`);
  if (isJsonObject(schema.additionalProperties)) checkSupported(schema.additionalProperties, `${path}.*`);
  if (schema.items !== undefined) checkSupported(schema.items, `${path}[]`);
}

const CRD_FILES: Record<SchemaVersion, string> = {
  'v1.12': 'ciliumnodes.v1.12.yaml',
  'v1.19-dev': 'ciliumnodes.v1.19-dev.yaml',
  'v1.20': 'ciliumnodes.v1.20.yaml',
  'v1.21-dev': 'ciliumnodes.v1.21-dev.yaml',
};

/** Extracts `spec.versions[name=v2].schema.openAPIV3Schema` from a CRD document. */
export function schemaFromCrd(crd: unknown, version = 'v2'): StructuralSchema {
  const versions = isJsonObject(crd) && isJsonObject(crd.spec) ? crd.spec.versions : undefined;
  const entry = Array.isArray(versions)
    ? versions.find((v) => isJsonObject(v) && v.name === version)
    : undefined;
  const schema = isJsonObject(entry) && isJsonObject(entry.schema) ? entry.schema.openAPIV3Schema : undefined;
  if (schema === undefined) throw new Error(`CRD has no openAPIV3Schema for version ${version}`);
  checkSupported(schema, '');
  return schema as StructuralSchema;
}

/** The CiliumNode CRD manifest of one cilium generation (test/fixtures/crds). */
export function ciliumNodeCrdUrl(version: SchemaVersion): URL {
  return new URL(`../../fixtures/crds/${CRD_FILES[version]}`, import.meta.url);
}

const loaded = new Map<SchemaVersion, StructuralSchema>();

/** The CiliumNode v2 schema of one Cilium generation, read from test/fixtures/crds (cached). */
export function loadCiliumNodeSchema(version: SchemaVersion): StructuralSchema {
  let schema = loaded.get(version);
  if (schema === undefined) {
    schema = schemaFromCrd(parse(readFileSync(ciliumNodeCrdUrl(version), 'utf8')));
    loaded.set(version, schema);
  }
  return schema;
}

const childPath = (path: string, key: string) => (path === '' ? key : `${path}.${key}`);
const itemPath = (path: string, index: number) => `${path}[${index}]`;

/** Schema of `key` inside an object schema (a declared property, else the map value schema). */
function fieldSchema(schema: StructuralSchema, key: string): StructuralSchema | undefined {
  const declared = schema.properties?.[key];
  if (declared !== undefined) return declared;
  return isJsonObject(schema.additionalProperties) ? schema.additionalProperties : undefined;
}

/**
 * Prunes `value` in place and returns the paths of the dropped unknown fields (the server turns
 * them into `unknown field "…"` warnings, or a 400 with `fieldValidation=Strict`).
 */
export function prune(value: JsonObject, schema: StructuralSchema): string[] {
  const dropped: string[] = [];
  pruneObject(value, schema, '', dropped);
  return dropped;
}

function pruneValue(value: unknown, schema: StructuralSchema, path: string, dropped: string[]): void {
  if (isJsonObject(value)) pruneObject(value, schema, path, dropped);
  else if (Array.isArray(value) && schema.items !== undefined) {
    value.forEach((item, index) => {
      pruneValue(item, schema.items!, itemPath(path, index), dropped);
    });
  }
}

function pruneObject(value: JsonObject, schema: StructuralSchema, path: string, dropped: string[]): void {
  const preserveUnknown = schema['x-kubernetes-preserve-unknown-fields'] === true;
  const mapAllowsAny = schema.additionalProperties === true;
  for (const [key, child] of Object.entries(value)) {
    // ObjectMeta is the server's own business; apiVersion and kind are always kept.
    if (path === '' && (key === 'metadata' || key === 'apiVersion' || key === 'kind')) continue;
    const childSchema = fieldSchema(schema, key);
    if (childSchema === undefined) {
      if (!preserveUnknown && !mapAllowsAny) {
        delete value[key];
        dropped.push(childPath(path, key));
      }
      continue;
    }
    if (child === null && childSchema.nullable !== true && childSchema.default === undefined) {
      delete value[key];
      continue;
    }
    pruneValue(child, childSchema, childPath(path, key), dropped);
  }
}

/** Go's `%v`/`%q` rendering of a value in a field error. */
function show(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (value === null) return 'null';
  if (typeof value === 'object') return JSON.stringify(value);
  return String(value);
}

function jsonType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function hasType(value: unknown, type: NonNullable<StructuralSchema['type']>): boolean {
  switch (type) {
    case 'object':
      return isJsonObject(value);
    case 'array':
      return Array.isArray(value);
    case 'string':
      return typeof value === 'string';
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value);
    case 'number':
      return typeof value === 'number';
    case 'boolean':
      return typeof value === 'boolean';
  }
}

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

function isIpv6(text: string): boolean {
  if (!/^[0-9a-fA-F:.]+$/.test(text) || !text.includes(':')) return false;
  const halves = text.split('::');
  if (halves.length > 2) return false;
  const groups = halves.flatMap((half) => (half === '' ? [] : half.split(':')));
  const last = groups.at(-1) ?? '';
  const embeddedV4 = IPV4.test(last);
  const hexGroups = embeddedV4 ? groups.slice(0, -1) : groups;
  if (!hexGroups.every((g) => /^[0-9a-fA-F]{1,4}$/.test(g))) return false;
  const width = hexGroups.length + (embeddedV4 ? 2 : 0);
  return halves.length === 2 ? width < 8 : width === 8;
}

/** Formats the server checks (kube-openapi strfmt); unknown formats are ignored, as there. */
const FORMATS: Record<string, (text: string) => boolean> = {
  ipv4: (text) => IPV4.test(text),
  ipv6: isIpv6,
  cidr: (text) => {
    const [ip, bits, extra] = text.split('/');
    if (ip === undefined || bits === undefined || extra !== undefined || !/^\d{1,3}$/.test(bits))
      return false;
    if (IPV4.test(ip)) return Number(bits) <= 32;
    return isIpv6(ip) && Number(bits) <= 128;
  },
};

/** Validates `value` against `schema`; returns every field error (empty when valid). */
export function validate(value: JsonObject, schema: StructuralSchema): FieldError[] {
  const errors: FieldError[] = [];
  const { metadata: _metadata, ...rest } = value;
  // ObjectMeta is validated by the server, not by the schema; only its presence counts here.
  validateValue(_metadata === undefined ? rest : { ...rest, metadata: {} }, schema, '', errors);
  return errors;
}

function validateValue(value: unknown, schema: StructuralSchema, path: string, errors: FieldError[]): void {
  const where = path === '' ? 'body' : `${path} in body`;
  if (value === null) {
    if (schema.nullable === true || schema.type === undefined) return;
    errors.push(typeError(path, value, `${where} must be of type ${schema.type}: "null"`));
    return;
  }
  if (schema['x-kubernetes-int-or-string'] === true) {
    if (!hasType(value, 'integer') && !hasType(value, 'string')) {
      errors.push(typeError(path, value, `${where} must be of type integer-or-string: "${jsonType(value)}"`));
      return;
    }
  } else if (schema.type !== undefined && !hasType(value, schema.type)) {
    errors.push(typeError(path, value, `${where} must be of type ${schema.type}: "${jsonType(value)}"`));
    return;
  }
  if (schema.enum !== undefined && !schema.enum.some((allowed) => deepEqual(allowed, value))) {
    errors.push({
      reason: 'FieldValueNotSupported',
      field: path,
      message: `Unsupported value: ${show(value)}: supported values: ${schema.enum.map(show).join(', ')}`,
    });
  }
  if (typeof value === 'string') validateString(value, schema, path, where, errors);
  else if (typeof value === 'number') validateNumber(value, schema, path, where, errors);
  else if (Array.isArray(value)) validateArray(value, schema, path, where, errors);
  else if (isJsonObject(value)) validateObject(value, schema, path, where, errors);
}

function typeError(path: string, value: unknown, detail: string): FieldError {
  return {
    reason: 'FieldValueTypeInvalid',
    field: path,
    message: `Invalid value: "${jsonType(value)}": ${detail}`,
  };
}

function invalidValue(path: string, value: unknown, detail: string): FieldError {
  return { reason: 'FieldValueInvalid', field: path, message: `Invalid value: ${show(value)}: ${detail}` };
}

function validateString(
  value: string,
  schema: StructuralSchema,
  path: string,
  where: string,
  errors: FieldError[],
) {
  const length = [...value].length; // Go counts runes
  if (schema.minLength !== undefined && length < schema.minLength) {
    errors.push(invalidValue(path, value, `${where} should be at least ${schema.minLength} chars long`));
  }
  if (schema.maxLength !== undefined && length > schema.maxLength) {
    errors.push(invalidValue(path, value, `${where} should be at most ${schema.maxLength} chars long`));
  }
  if (schema.pattern !== undefined && !new RegExp(schema.pattern, 'u').test(value)) {
    errors.push(invalidValue(path, value, `${where} should match '${schema.pattern}'`));
  }
  const checkFormat = schema.format === undefined ? undefined : FORMATS[schema.format];
  if (checkFormat !== undefined && !checkFormat(value)) {
    errors.push(invalidValue(path, value, `${where} must be of type ${schema.format}: ${show(value)}`));
  }
}

function validateNumber(
  value: number,
  schema: StructuralSchema,
  path: string,
  where: string,
  errors: FieldError[],
) {
  if (schema.minimum !== undefined) {
    const ok = schema.exclusiveMinimum === true ? value > schema.minimum : value >= schema.minimum;
    if (!ok) {
      const relation = schema.exclusiveMinimum === true ? 'greater than' : 'greater than or equal to';
      errors.push(invalidValue(path, value, `${where} should be ${relation} ${schema.minimum}`));
    }
  }
  if (schema.maximum !== undefined) {
    const ok = schema.exclusiveMaximum === true ? value < schema.maximum : value <= schema.maximum;
    if (!ok) {
      const relation = schema.exclusiveMaximum === true ? 'less than' : 'less than or equal to';
      errors.push(invalidValue(path, value, `${where} should be ${relation} ${schema.maximum}`));
    }
  }
}

function validateArray(
  value: unknown[],
  schema: StructuralSchema,
  path: string,
  where: string,
  errors: FieldError[],
) {
  if (schema.minItems !== undefined && value.length < schema.minItems) {
    errors.push(invalidValue(path, value.length, `${where} should have at least ${schema.minItems} items`));
  }
  if (schema.maxItems !== undefined && value.length > schema.maxItems) {
    errors.push(invalidValue(path, value.length, `${where} should have at most ${schema.maxItems} items`));
  }
  if (schema.items !== undefined) {
    value.forEach((item, index) => {
      validateValue(item, schema.items!, itemPath(path, index), errors);
    });
  }
}

function validateObject(
  value: JsonObject,
  schema: StructuralSchema,
  path: string,
  where: string,
  errors: FieldError[],
) {
  const count = Object.keys(value).length;
  if (schema.minProperties !== undefined && count < schema.minProperties) {
    errors.push(
      invalidValue(path, count, `${where} should have at least ${schema.minProperties} properties`),
    );
  }
  if (schema.maxProperties !== undefined && count > schema.maxProperties) {
    errors.push(invalidValue(path, count, `${where} should have at most ${schema.maxProperties} properties`));
  }
  for (const key of schema.required ?? []) {
    if (!Object.hasOwn(value, key)) {
      errors.push({ reason: 'FieldValueRequired', field: childPath(path, key), message: 'Required value' });
    }
  }
  for (const [key, child] of Object.entries(value)) {
    const childSchema = fieldSchema(schema, key);
    if (childSchema !== undefined) validateValue(child, childSchema, childPath(path, key), errors);
  }
}
