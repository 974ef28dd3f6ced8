import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { InvokeCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { stackNameFor } from './build-app.ts';
import { findLocalCloudState } from './local-cloud-state.ts';

/**
 * `npm run resync -- --instance i-… | --all [--cluster NAME] [--local] [--function-name NAME] [--outputs FILE]`
 *
 * Invokes the sync function with `{"instanceId":"i-…"}` or `{"all":true}` and prints what it did.
 * The function name comes from `--function-name`, else from the outputs file `cdk deploy
 * --outputs-file cdk-outputs.json` wrote (output `SyncFunctionName` of stack
 * `ServerlessEniIpam-<cluster>`; `--cluster` picks it when the file holds several clusters' stacks). `--local` invokes the sync
 * function of a running `npm start` instead, through its local Lambda API (which one:
 * `local-cloud-state.ts`).
 */

export interface ResyncTarget {
  readonly functionName: string;
  readonly client: LambdaClient;
}

export function parseResyncArgs(argv: readonly string[]): {
  payload: { instanceId: string } | { all: true };
  local: boolean;
  functionName?: string;
  cluster?: string;
  outputsFile: string;
} {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      instance: { type: 'string' },
      all: { type: 'boolean', default: false },
      local: { type: 'boolean', default: false },
      'function-name': { type: 'string' },
      cluster: { type: 'string' },
      outputs: { type: 'string', default: 'cdk-outputs.json' },
    },
    strict: true,
  });
  if (values.all === (values.instance !== undefined)) {
    throw new Error('say either --instance i-… or --all');
  }
  if (values.instance !== undefined && !/^i-[0-9a-f]{8,17}$/.test(values.instance)) {
    throw new Error(`--instance expects an instance id (i-…), got ${JSON.stringify(values.instance)}`);
  }
  return {
    payload: values.instance !== undefined ? { instanceId: values.instance } : { all: true },
    local: values.local,
    ...(values['function-name'] ? { functionName: values['function-name'] } : {}),
    ...(values.cluster ? { cluster: values.cluster } : {}),
    outputsFile: values.outputs,
  };
}

export function resolveTarget(options: ReturnType<typeof parseResyncArgs>): ResyncTarget {
  if (options.local) {
    const state = findLocalCloudState();
    return {
      functionName: options.functionName ?? state.syncFunctionName,
      client: new LambdaClient({
        region: state.region,
        endpoint: state.lambdaEndpoint,
        // The local operator's: the Invoke API authorizes it as IAM would (it may invoke the sync).
        credentials: state.operatorCredentials,
      }),
    };
  }
  return {
    functionName:
      options.functionName ?? stackOutput(options.outputsFile, options.cluster, 'SyncFunctionName'),
    client: new LambdaClient({}),
  };
}

/**
 * An output of a stack in a `cdk deploy --outputs-file` file: of the stack of `cluster`, or of the
 * only serverless-eni-ipam stack in the file.
 */
export function stackOutput(outputsFile: string, cluster: string | undefined, key: string): string {
  let outputs: Record<string, Record<string, string>>;
  try {
    outputs = JSON.parse(readFileSync(outputsFile, 'utf8'));
  } catch {
    throw new Error(
      `cannot read ${outputsFile}: deploy with \`npx cdk deploy --outputs-file ${outputsFile}\`, or pass --function-name`,
    );
  }
  const stacks = Object.keys(outputs).filter((stack) => /^ServerlessEniIpam-/.test(stack));
  const stack = cluster !== undefined ? stackNameFor(cluster) : stacks.length === 1 ? stacks[0] : undefined;
  if (stack === undefined) {
    throw new Error(
      `${outputsFile} holds ${stacks.length === 0 ? 'no' : 'several'} serverless-eni-ipam stacks (${stacks.join(', ')}): pass --cluster NAME`,
    );
  }
  const value = outputs[stack]?.[key];
  if (!value) throw new Error(`${outputsFile} has no ${stack}.${key} output`);
  return value;
}

/** Invokes the sync function; returns its answer, or throws with the function's error. */
export async function resync(target: ResyncTarget, payload: unknown): Promise<unknown> {
  const response = await target.client.send(
    new InvokeCommand({
      FunctionName: target.functionName,
      InvocationType: 'RequestResponse',
      Payload: new TextEncoder().encode(JSON.stringify(payload)),
    }),
  );
  const body = response.Payload ? JSON.parse(new TextDecoder().decode(response.Payload)) : null;
  if (response.FunctionError) {
    throw new Error(`${target.functionName} failed (${response.FunctionError}): ${JSON.stringify(body)}`);
  }
  return body;
}

async function main(): Promise<number> {
  try {
    const options = parseResyncArgs(process.argv.slice(2));
    const target = resolveTarget(options);
    console.log(`invoking ${target.functionName} with ${JSON.stringify(options.payload)}`);
    console.log(JSON.stringify(await resync(target, options.payload), null, 2));
    return 0;
  } catch (error) {
    console.error(`resync: ${(error as Error).message}`);
    return 1;
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.exitCode = await main();
}
