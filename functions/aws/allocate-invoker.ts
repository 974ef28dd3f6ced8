import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import type { NodeServicePort } from '../core/ports.ts';
import { serveNodeRequest } from '../core/serve-node-request.ts';
import type { WatchTrigger } from '../core/watch-plan.ts';

/**
 * `NodeServicePort` over Lambda's Invoke API: a RequestResponse invoke of the allocate function
 * with a serve-node request, so the watcher itself needs no EC2 or node-table rights (only
 * `lambda:InvokeFunction` on that one function). A function error (`FunctionError` set) rejects
 * with the function's error message; so does a failed invoke (throttled after the client's own
 * retries, not found, not authorized).
 */
export class LambdaNodeService implements NodeServicePort {
  constructor(
    private readonly client: LambdaClient,
    private readonly functionName: string,
  ) {}

  async serve(trigger: WatchTrigger): Promise<void> {
    const response = await this.client.send(
      new InvokeCommand({
        FunctionName: this.functionName,
        InvocationType: 'RequestResponse',
        Payload: new TextEncoder().encode(JSON.stringify(serveNodeRequest(trigger))),
      }),
    );
    if (response.FunctionError !== undefined) {
      const payload = response.Payload ? new TextDecoder().decode(response.Payload) : '';
      throw new Error(
        `${this.functionName} failed serving ${trigger.instanceId} (${response.FunctionError}): ${payload.slice(0, 500)}`,
      );
    }
  }
}
