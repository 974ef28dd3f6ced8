import type { NodeRecord } from './model.ts';

/**
 * The error classes the layers share (a few more live beside the code that throws them:
 * `Ec2Failure` in ec2-failure.ts, the CiliumNode conflicts in ciliumnode.ts, the unreadable records,
 * the sync's and the allocation steps'). Each keeps the underlying error as `cause`. Handlers
 * decide who retries from the class: `InvalidInputError` is logged and dropped (retrying cannot fix
 * bad input); everything else is rethrown so the platform retries.
 */

/** The event or payload is malformed or names something we must not act on. Never retried. */
export class InvalidInputError extends Error {
  override readonly name = 'InvalidInputError';
}

/**
 * A conditional write lost: the node record is no longer at the version the writer read.
 * `current` is the record as DynamoDB holds it now (undefined when it was deleted).
 */
export class VersionConflictError extends Error {
  override readonly name: string = 'VersionConflictError';
  constructor(
    readonly instanceId: string,
    readonly expectedVersion: number | undefined,
    readonly current: NodeRecord | undefined,
    options?: ErrorOptions,
  ) {
    super(
      `node record ${instanceId} is at version ${current?.version ?? 'absent'}, expected ${expectedVersion ?? 'absent'}`,
      options,
    );
  }
}

/**
 * A lease holder found its node lease taken by another invocation (a renewal whose version
 * condition failed): it stops before its next EC2 mutation. A `VersionConflictError`, so the
 * attempt's caller treats it as the lost race it is (`retryLostRaces`: busy when the winner's lease
 * is live, else observe and plan again).
 */
export class LeaseLostError extends VersionConflictError {
  override readonly name = 'LeaseLostError';
}

/** A required configuration value is missing or invalid; names the variable. */
export class ConfigurationError extends Error {
  override readonly name = 'ConfigurationError';
}

/**
 * A value of the cluster's `cilium-config` ConfigMap that cilium-agent would not accept (or that
 * puts the agent outside ENI mode): the allocator cannot know which knobs the agent will register,
 * so it places nothing. Names the ConfigMap and the key.
 */
export class CiliumConfigError extends Error {
  override readonly name = 'CiliumConfigError';
  constructor(
    readonly configMap: string,
    readonly key: string,
    message: string,
  ) {
    super(`ConfigMap ${configMap}, key ${key}: ${message}; nothing is allocated until it is fixed`);
  }
}

/**
 * The cluster's CiliumNode CRD does not declare a field the sync publishes, so the API server
 * dropped it from the object it stored (pruning): the sync cannot converge, and the agent never
 * sees the field. Today: `status.eni.enis[*].ipv6-prefixes`, declared since cilium 1.20.0, which a
 * node only needs when its agent (1.20 or later) asked for IPv6. Retried like any failed sync, so
 * the node converges once the cluster runs the newer CRD.
 */
export class CrdFieldDroppedError extends Error {
  override readonly name = 'CrdFieldDroppedError';
  constructor(
    readonly nodeName: string,
    readonly field: string,
  ) {
    super(
      `CiliumNode ${nodeName}: the API server dropped ${field} from the status we wrote; the cluster's CiliumNode CRD predates it (install the CRD of cilium 1.20.0 or later)`,
    );
  }
}

/**
 * A node record was written by a newer release of serverless-eni-ipam (a higher schema version)
 * than this function understands: reading on could drop fields the newer writer relies on, so the
 * function refuses the record (and writes nothing) until every function runs the new release.
 */
export class NewerRecordSchemaError extends Error {
  override readonly name = 'NewerRecordSchemaError';
  constructor(
    readonly instanceId: string,
    readonly schemaVersion: number,
    readonly understoodSchemaVersion: number,
  ) {
    super(
      `node record ${instanceId} has schema version ${schemaVersion}; this function understands up to ${understoodSchemaVersion}: finish deploying the newer release`,
    );
  }
}

/** The message of a thrown value, whatever was thrown (log fields and recorded errors). */
export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
