import { EC2ServiceException } from '@aws-sdk/client-ec2';
import { expect } from 'vitest';

/**
 * Awaits a call that must fail with an EC2 error: the real SDK turned the emulator's XML error
 * into an EC2ServiceException whose `name` is the EC2 error code. Returns the exception.
 */
export async function expectEc2Error(
  call: Promise<unknown>,
  code: string,
  messagePattern?: RegExp,
): Promise<EC2ServiceException> {
  const outcome = await call.then(
    (value) => ({ failed: false as const, value }),
    (error: unknown) => ({ failed: true as const, error }),
  );
  if (!outcome.failed)
    throw new Error(`expected ${code}, but the call succeeded: ${JSON.stringify(outcome.value)}`);
  expect(outcome.error).toBeInstanceOf(EC2ServiceException);
  const error = outcome.error as EC2ServiceException;
  expect(error.name).toBe(code);
  if (messagePattern) expect(error.message).toMatch(messagePattern);
  return error;
}
