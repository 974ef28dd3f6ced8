import { EC2Client } from '@aws-sdk/client-ec2';
import { ConfiguredRetryStrategy } from '@smithy/util-retry';
import type { Ec2Emulator } from './server.ts';

/** Fixed fake credentials: the emulator only checks that a SigV4 header is present. */
export const FAKE_CREDENTIALS = {
  accessKeyId: 'AKIAEMULATOR0000TEST',
  secretAccessKey: 'emulator-secret-key',
};

/**
 * The real EC2 client pointed at an emulator. `attempts: 1` (the default) surfaces every error
 * as-is; more attempts retry throttling, 5xx and lost connections after 5 ms instead of the
 * SDK's 100 ms+ backoff.
 */
export function ec2ClientFor(emulator: Pick<Ec2Emulator, 'url'>, attempts = 1): EC2Client {
  return new EC2Client({
    region: 'us-east-1',
    endpoint: emulator.url,
    credentials: FAKE_CREDENTIALS,
    ...(attempts === 1
      ? { maxAttempts: 1 }
      : { retryStrategy: new ConfiguredRetryStrategy(attempts, () => 5) }),
  });
}
