import { randomBytes } from 'node:crypto';

/**
 * The account the local cloud pretends to be, and the rules every part of it names things by.
 * Nothing leaves 127.0.0.0/8: every endpoint a part hands out is checked with `assertLoopback`.
 */

export const LOCAL_REGION = 'us-east-1';
export const LOCAL_ACCOUNT = '123456789012';

/** CloudFormation-style physical name: `<stack>-<logicalId>-<random suffix>`, at most 64 characters. */
export function physicalName(stackName: string, logicalId: string): string {
  const suffix = randomBytes(6).toString('hex').toUpperCase();
  return `${stackName}-${logicalId}-${suffix}`.slice(0, 64);
}

/** Throws unless `url` points at 127.0.0.0/8. */
export function assertLoopback(url: string): void {
  const { hostname } = new URL(url);
  if (!/^127\.\d+\.\d+\.\d+$/.test(hostname)) {
    throw new Error(`the local cloud only talks to 127.0.0.0/8, not ${url}`);
  }
}
