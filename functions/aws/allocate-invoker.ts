import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import type { NodeServicePort, NodeServiceResult } from '../core/ports.ts';
import { nodeServiceResult, serveNodesRequest } from '../core/serve-node-request.ts';
import type { WatchTrigger } from '../core/watch-plan.ts';

/**
 * `NodeServicePort` over Lambda's Invoke API: a RequestResponse invoke of the allocate function
 * with a serve-nodes request, so the watcher itself needs no EC2 or node-table rights (only
 * `lambda:InvokeFunction` on that one function). The answer (`{"status":"served","nodes":[…]}`)
 * names each node's outcome or error; the failed ones are returned, and those another invocation
 * held, with its lease's expiry. A function error
 * (`FunctionError` set) rejects with the function's error message; so does a failed invoke
 * (throttled after the client's own retries, not found, not authorized) and an answer that is not
 * a served one.
 */
export class LambdaNodeService implements NodeServicePort {
  constructor(
    private readonly client: LambdaClient,
    private readonly functionName: string,
  ) {}

  async serve(triggers: readonly WatchTrigger[]): Promise<NodeServiceResult> {
    const response = await this.client.send(
      new InvokeCommand({
        FunctionName: this.functionName,
        InvocationType: 'RequestResponse',
        Payload: new TextEncoder().encode(JSON.stringify(serveNodesRequest(triggers))),
      }),
    );
    const payload = response.Payload ? new TextDecoder().decode(response.Payload) : '';
    const named = triggers.map((trigger) => trigger.instanceId).join(', ');
    if (response.FunctionError !== undefined) {
      throw new Error(
        `${this.functionName} failed serving ${named} (${response.FunctionError}): ${payload.slice(0, 500)}`,
      );
    }
    return resultIn(payload, `${this.functionName} serving ${named}`);
  }
}

/** The failed and held nodes of a served answer; throws when the answer is not one. */
function resultIn(payload: string, what: string): NodeServiceResult {
  let answer: unknown;
  try {
    answer = JSON.parse(payload);
  } catch {
    throw new Error(`${what} answered something that is not JSON: ${payload.slice(0, 200)}`);
  }
  const nodes = (answer as { status?: unknown; nodes?: unknown } | null)?.nodes;
  if ((answer as { status?: unknown } | null)?.status !== 'served' || !Array.isArray(nodes)) {
    throw new Error(`${what} did not answer with the nodes served: ${payload.slice(0, 200)}`);
  }
  return nodeServiceResult(nodes);
}
