import { describe, expect, it } from 'vitest';
import { applyJsonPatch, JsonPatchError, parseJsonPatch, parsePointer } from './json-patch.ts';
import { applyMergePatch } from './merge-patch.ts';

const document = () => ({
  metadata: { resourceVersion: '7', annotations: { 'cilium.io/a~b': 'x' } },
  spec: { ipam: { pool: { '10.0.1.20': { resource: 'eni-0a' } } }, list: [1, 2, 3] },
});

describe('parsePointer (RFC 6901)', () => {
  it.each([
    { case: 'whole document', pointer: '', tokens: [] },
    { case: 'plain tokens', pointer: '/spec/ipam', tokens: ['spec', 'ipam'] },
    {
      case: '~1 is a slash',
      pointer: '/metadata/annotations/cilium.io~1x',
      tokens: ['metadata', 'annotations', 'cilium.io/x'],
    },
    { case: '~0 is a tilde, decoded after ~1', pointer: '/a~01', tokens: ['a~1'] },
    { case: 'empty token', pointer: '/', tokens: [''] },
  ])('$case', ({ pointer, tokens }) => {
    expect(parsePointer(pointer)).toEqual(tokens);
  });

  it.each([
    { case: 'no leading slash', pointer: 'spec' },
    { case: 'bad escape', pointer: '/a~2' },
    { case: 'dangling tilde', pointer: '/a~' },
  ])('rejects $case', ({ pointer }) => {
    expect(() => parsePointer(pointer)).toThrow(JsonPatchError);
  });
});

describe('applyJsonPatch (RFC 6902)', () => {
  it.each([
    {
      case: 'add a map key',
      patch: [{ op: 'add', path: '/spec/ipam/pool/10.0.1.21', value: { resource: 'eni-0b' } }],
      check: (d: ReturnType<typeof document>) =>
        expect(d.spec.ipam.pool).toEqual({
          '10.0.1.20': { resource: 'eni-0a' },
          '10.0.1.21': { resource: 'eni-0b' },
        }),
    },
    {
      case: 'add inserts into a list',
      patch: [{ op: 'add', path: '/spec/list/1', value: 9 }],
      check: (d: ReturnType<typeof document>) => expect(d.spec.list).toEqual([1, 9, 2, 3]),
    },
    {
      case: 'add with - appends',
      patch: [{ op: 'add', path: '/spec/list/-', value: 4 }],
      check: (d: ReturnType<typeof document>) => expect(d.spec.list).toEqual([1, 2, 3, 4]),
    },
    {
      case: 'remove a list item',
      patch: [{ op: 'remove', path: '/spec/list/0' }],
      check: (d: ReturnType<typeof document>) => expect(d.spec.list).toEqual([2, 3]),
    },
    {
      case: 'replace through an escaped key',
      patch: [{ op: 'replace', path: '/metadata/annotations/cilium.io~1a~0b', value: 'y' }],
      check: (d: ReturnType<typeof document>) =>
        expect(d.metadata.annotations).toEqual({ 'cilium.io/a~b': 'y' }),
    },
    {
      case: 'move',
      patch: [{ op: 'move', from: '/spec/ipam/pool/10.0.1.20', path: '/spec/ipam/pool/10.0.1.30' }],
      check: (d: ReturnType<typeof document>) =>
        expect(d.spec.ipam.pool).toEqual({ '10.0.1.30': { resource: 'eni-0a' } }),
    },
    {
      case: 'copy',
      patch: [{ op: 'copy', from: '/spec/list', path: '/spec/copied' }],
      check: (d: ReturnType<typeof document>) =>
        expect(d.spec).toMatchObject({ list: [1, 2, 3], copied: [1, 2, 3] }),
    },
    {
      case: 'test that holds, then replace',
      patch: [
        { op: 'test', path: '/metadata/resourceVersion', value: '7' },
        { op: 'replace', path: '/spec/list', value: [] },
      ],
      check: (d: ReturnType<typeof document>) => expect(d.spec.list).toEqual([]),
    },
  ])('$case', ({ patch, check }) => {
    const original = document();
    const result = applyJsonPatch(original, parseJsonPatch(patch)) as ReturnType<typeof document>;
    check(result);
    expect(original).toEqual(document());
  });

  it.each([
    { case: 'a failed test', patch: [{ op: 'test', path: '/metadata/resourceVersion', value: '6' }] },
    { case: 'a test of a missing path', patch: [{ op: 'test', path: '/spec/missing', value: null }] },
    { case: 'remove of a missing key', patch: [{ op: 'remove', path: '/spec/missing' }] },
    { case: 'replace of a missing key', patch: [{ op: 'replace', path: '/spec/missing', value: 1 }] },
    { case: 'add under a missing parent', patch: [{ op: 'add', path: '/spec/missing/x', value: 1 }] },
    { case: 'an index past the end', patch: [{ op: 'add', path: '/spec/list/5', value: 1 }] },
    { case: 'a move into its own child', patch: [{ op: 'move', from: '/spec', path: '/spec/inner' }] },
  ])('does not apply $case, and is atomic', ({ patch }) => {
    const original = document();
    const withEarlierChange = [{ op: 'replace', path: '/spec/list', value: ['changed'] }, ...patch];
    expect(() => applyJsonPatch(original, parseJsonPatch(withEarlierChange))).toThrow(
      expect.objectContaining({ kind: 'not-applicable' }),
    );
    expect(original).toEqual(document());
  });

  it('names the failed test like evanphx/json-patch', () => {
    expect(() =>
      applyJsonPatch(
        document(),
        parseJsonPatch([{ op: 'test', path: '/metadata/resourceVersion', value: '6' }]),
      ),
    ).toThrow('testing value /metadata/resourceVersion failed: test failed');
  });

  it.each([
    { case: 'an object body', body: { op: 'add' } },
    { case: 'an unknown op', body: [{ op: 'merge', path: '/a' }] },
    { case: 'add without value', body: [{ op: 'add', path: '/a' }] },
    { case: 'move without from', body: [{ op: 'move', path: '/a' }] },
  ])('refuses $case as malformed', ({ body }) => {
    expect(() => parseJsonPatch(body)).toThrow(expect.objectContaining({ kind: 'malformed' }));
  });
});

describe('applyMergePatch (RFC 7386)', () => {
  it.each([
    {
      case: 'maps merge',
      target: { a: { b: 1, c: 2 } },
      patch: { a: { c: 3, d: 4 } },
      result: { a: { b: 1, c: 3, d: 4 } },
    },
    {
      case: 'null deletes',
      target: { a: { b: 1, c: 2 } },
      patch: { a: { b: null } },
      result: { a: { c: 2 } },
    },
    { case: 'lists replace', target: { a: [1, 2, 3] }, patch: { a: [4] }, result: { a: [4] } },
    { case: 'a map replaces a scalar', target: { a: 'x' }, patch: { a: { b: 1 } }, result: { a: { b: 1 } } },
    { case: 'null for a missing key is a no-op', target: { a: 1 }, patch: { b: null }, result: { a: 1 } },
    {
      case: 'nulls inside a new map are dropped',
      target: {},
      patch: { a: { b: null, c: 1 } },
      result: { a: { c: 1 } },
    },
  ])('$case', ({ target, patch, result }) => {
    const before = structuredClone(target);
    expect(applyMergePatch(target, patch)).toEqual(result);
    expect(target).toEqual(before);
  });
});
