import type { TestProject } from 'vitest/node';
import { startDynamoDbLocal } from './dynamodb-local.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    dynamoDbEndpoint: string;
  }
}

/**
 * Starts DynamoDB Local once per test run. Workers start after this, so they inherit the endpoint
 * variables; the SDK's standard configuration then sends every DynamoDB call to loopback.
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dynamoDb = await startDynamoDbLocal();
  process.env.AWS_ENDPOINT_URL_DYNAMODB = dynamoDb.endpoint;
  process.env.AWS_ENDPOINT_URL_DYNAMODB_STREAMS = dynamoDb.endpoint;
  project.provide('dynamoDbEndpoint', dynamoDb.endpoint);
  return () => dynamoDb.stop();
}
