import { createHash } from 'node:crypto';

/**
 * Deterministic `ClientToken` for `CreateNetworkInterface`.
 *
 * Why deterministic: EC2 makes a create idempotent per ClientToken. A Lambda invocation that is
 * retried, an EventBridge event delivered twice, or a crash after EC2 created the ENI but before we
 * recorded it all replay the SAME create (same instance, same device slot, same record version),
 * so they send the same token and EC2 returns the ENI it already created instead of a second one
 * (invariant 4, no duplicate). A random token would leak an ENI on every replay.
 *
 * Why the inputs: `instanceId` and `deviceIndex` name the slot; `recordVersion` (the node record
 * version the plan was made from) makes a later, legitimately new create for the same slot (after
 * the first ENI was detached or deleted) a different request; `attempt` is a salt the caller bumps
 * when it has undone a created ENI (e.g. deleted it after a failed attach) and must create afresh
 * within the same record version, since EC2 would otherwise hand back the deleted ENI's result.
 * EC2 rejects a reused token with different parameters (`IdempotentParameterMismatch`), so the
 * caller must send identical parameters for identical inputs, which a pure plan does.
 */

export interface EniClientTokenInputs {
  readonly instanceId: string;
  readonly deviceIndex: number;
  readonly recordVersion: number;
  readonly attempt: number;
}

/** Prefix that makes our tokens recognisable in CloudTrail. */
const TOKEN_PREFIX = 'cilium-eni-';

/** EC2 accepts at most 64 ASCII characters. */
export const MAX_CLIENT_TOKEN_LENGTH = 64;

/**
 * `cilium-eni-` + the first 53 hex characters of SHA-256 over the four inputs: 64 ASCII characters,
 * the same for the same inputs, different (with overwhelming probability) when any input differs.
 * Throws `RangeError` for an empty instance id or a negative or fractional number.
 */
export function eniClientToken(inputs: EniClientTokenInputs): string {
  if (inputs.instanceId.length === 0) throw new RangeError('instanceId must not be empty');
  for (const [name, value] of [
    ['deviceIndex', inputs.deviceIndex],
    ['recordVersion', inputs.recordVersion],
    ['attempt', inputs.attempt],
  ] as const) {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new RangeError(`${name} must be a non-negative integer, got ${value}`);
    }
  }
  const material = JSON.stringify([
    inputs.instanceId,
    inputs.deviceIndex,
    inputs.recordVersion,
    inputs.attempt,
  ]);
  const digest = createHash('sha256').update(material).digest('hex');
  return TOKEN_PREFIX + digest.slice(0, MAX_CLIENT_TOKEN_LENGTH - TOKEN_PREFIX.length);
}
