import type { CiliumNode } from '../../../functions/core/ciliumnode.ts';
import type { SyncStep, SyncWriteStep } from '../../../functions/core/sync-plan.ts';
import { applyJsonPatch } from '../../emulators/k8s/json-patch.ts';
import {
  loadCiliumNodeSchema,
  prune,
  SCHEMA_VERSIONS,
  type SchemaVersion,
  validate,
} from '../../emulators/k8s/schema.ts';

/**
 * A minimal in-memory model of one CiliumNode on an API server, for planning tests: writes carry
 * their JSON Patch (whose resourceVersion `test` must hold), `/status` writes keep only the status
 * change and main-resource writes keep everything but the status, as the real server does.
 */
export class FakeCiliumNodeServer {
  private current: CiliumNode | undefined;
  private revision = 0;
  /** Every version ever stored, oldest first. */
  readonly versions: CiliumNode[] = [];

  constructor(initial?: CiliumNode) {
    if (initial !== undefined) this.store(initial);
  }

  get(): CiliumNode | undefined {
    return this.current === undefined ? undefined : structuredClone(this.current);
  }

  /** Applies a planned write; throws when its resourceVersion `test` fails (a conflict). */
  apply(step: SyncWriteStep): CiliumNode {
    if (step.kind === 'create') {
      if (this.current !== undefined) throw new Error('AlreadyExists');
      return this.store(step.object);
    }
    if (this.current === undefined) throw new Error('NotFound');
    const patched = applyJsonPatch(this.current, step.patch) as CiliumNode;
    if (step.kind === 'status') {
      return this.store({ ...this.current, status: patched.status } as CiliumNode);
    }
    const { status: _ignored, ...mainOnly } = patched;
    return this.store({ ...mainOnly, ...(this.current.status ? { status: this.current.status } : {}) });
  }

  /** Another writer (an agent) changes the object through `mutate`. */
  writeAsAgent(mutate: (cn: CiliumNode) => void): CiliumNode {
    const next = this.get();
    if (next === undefined) throw new Error('NotFound');
    mutate(next);
    return this.store(next);
  }

  private store(object: CiliumNode): CiliumNode {
    this.revision += 1;
    const stored = structuredClone(object);
    stored.metadata = { ...stored.metadata, resourceVersion: String(this.revision) };
    this.current = stored;
    this.versions.push(structuredClone(stored));
    return structuredClone(stored);
  }
}

export function isWrite(step: SyncStep): step is SyncWriteStep {
  return (
    step.kind === 'create' || step.kind === 'spec-claim' || step.kind === 'status' || step.kind === 'spec'
  );
}

/**
 * Field errors and pruned (unknown) fields of `object` under each CRD generation we must satisfy
 * (by default all: v1.12, v1.19-dev, v1.20, v1.21-dev). Empty when every one accepts it unchanged.
 */
export function crdProblems(
  object: CiliumNode,
  versions: readonly SchemaVersion[] = SCHEMA_VERSIONS,
): string[] {
  const problems: string[] = [];
  for (const version of versions) {
    const schema = loadCiliumNodeSchema(version);
    const copy = structuredClone(object) as unknown as Record<string, unknown>;
    for (const error of validate(copy, schema)) problems.push(`${version}: ${error.field}: ${error.message}`);
    for (const dropped of prune(copy, schema)) problems.push(`${version}: unknown field ${dropped}`);
  }
  return problems;
}
