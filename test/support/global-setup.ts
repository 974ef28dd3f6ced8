import { resolve } from 'node:path';
import type { TestProject } from 'vitest/node';
import { startDynamoDbLocal } from './dynamodb-local.ts';
import { warmStackPolicyCache } from './stack-policies.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    dynamoDbEndpoint: string;
  }
}

/**
 * Starts DynamoDB Local once per test run, then synthesizes the stack policies the
 * fixtures' identities use (cached on disk; see stack-policies.ts). Workers start after this, so they inherit the endpoint
 * variables; the SDK's standard configuration then sends every DynamoDB call to loopback.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  // aws-cdk-lib writes its fingerprint cache under the home directory: the workers' one (vitest.config.ts).
  process.env.HOME = resolve('.home');
  const dynamoDb = await startDynamoDbLocal();
  // Synthesis blocks this thread: only once DynamoDB Local answers (its start is awaited by polling).
  await warmStackPolicyCache();
  process.env.AWS_ENDPOINT_URL_DYNAMODB = dynamoDb.endpoint;
  process.env.AWS_ENDPOINT_URL_DYNAMODB_STREAMS = dynamoDb.endpoint;
  project.provide('dynamoDbEndpoint', dynamoDb.endpoint);
  return () => dynamoDb.stop();
}
