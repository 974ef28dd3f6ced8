/**
 * `npm run chaos -- --seed S --runs K`: K chaos runs with seeds S, S+1, ... S+K-1 (see run.ts), one
 * synthesized stack and one DynamoDB Local shared by all of them. Every run prints its seed; a
 * failed run prints what failed and how to replay it alone (`--seed <its seed> --runs 1`). Ends with
 * `N passed, M failed` and exits non-zero if any run failed.
 *
 *   npm run chaos -- [--seed S] [--runs K] [--max-minutes X] [--verbose]
 *
 * --seed S         first seed (default 1)
 * --runs K         how many runs (default 10)
 * --max-minutes X  start no new run after X minutes (default: no limit); the summary says how many ran
 * --verbose        print each run's plan and crashes as it goes
 */
import { parseArgs } from 'node:util';
import { synthesizeStack } from '../local-cloud/index.ts';
import { startDynamoDbLocal } from '../support/dynamodb-local.ts';
import { describePlan } from './plan.ts';
import { type RunResult, runChaos } from './run.ts';

interface Flags {
  readonly seed: number;
  readonly runs: number;
  readonly maxMinutes: number | undefined;
  readonly verbose: boolean;
}

function parseFlags(argv: string[]): Flags {
  const { values } = parseArgs({
    args: argv,
    options: {
      seed: { type: 'string', default: '1' },
      runs: { type: 'string', default: '10' },
      'max-minutes': { type: 'string' },
      verbose: { type: 'boolean', default: false },
    },
  });
  const seed = Number(values.seed);
  const runs = Number(values.runs);
  const maxMinutes = values['max-minutes'] === undefined ? undefined : Number(values['max-minutes']);
  if (!Number.isSafeInteger(seed) || seed < 0 || seed > 0xffff_ffff)
    throw new Error(`--seed must be an integer 0..4294967295, got ${values.seed}`);
  if (!Number.isInteger(runs) || runs < 1 || runs > 100_000)
    throw new Error(`--runs must be 1..100000, got ${values.runs}`);
  if (maxMinutes !== undefined && !(maxMinutes > 0))
    throw new Error(`--max-minutes must be positive, got ${values['max-minutes']}`);
  return { seed, runs, maxMinutes, verbose: values.verbose };
}

async function main(): Promise<number> {
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  // The runner's own clients (table setup, stream polling) must never fall back to a real endpoint.
  process.env.AWS_ENDPOINT_URL ??= 'http://127.0.0.1:9';
  const flags = parseFlags(process.argv.slice(2));
  const startedAtMs = Date.now();
  console.log(`chaos: synthesizing the stack and starting DynamoDB Local...`);
  // Generous: on a busy machine the JVM starts slowly while esbuild bundles.
  const [stack, dynamoDb] = await Promise.all([
    synthesizeStack(),
    startDynamoDbLocal({ readyTimeoutMs: 120_000 }),
  ]);
  const results: RunResult[] = [];
  try {
    console.log(
      `chaos: ${flags.runs} runs, seeds ${flags.seed}..${flags.seed + flags.runs - 1} (ready in ${((Date.now() - startedAtMs) / 1000).toFixed(1)} s)`,
    );
    for (let index = 0; index < flags.runs; index++) {
      if (flags.maxMinutes !== undefined && Date.now() - startedAtMs > flags.maxMinutes * 60_000) {
        console.log(`chaos: --max-minutes ${flags.maxMinutes} reached; no new run started`);
        break;
      }
      const seed = flags.seed + index;
      if (flags.verbose) console.log(`run ${index + 1}/${flags.runs} seed ${seed}:`);
      const result = await runChaos(
        seed,
        { stack, dynamoDbEndpoint: dynamoDb.endpoint },
        flags.verbose ? { log: (line) => console.log(line) } : {},
      );
      results.push(result);
      console.log(
        `run ${index + 1}/${flags.runs} seed ${seed}: ${result.passed ? 'PASS' : 'FAIL'} in ${(result.durationMs / 1000).toFixed(1)} s${result.summary ? ` (${result.summary})` : ''}`,
      );
      if (!result.passed) printFailure(result);
    }
  } finally {
    await dynamoDb.stop();
  }
  const failed = results.filter((result) => !result.passed);
  const minutes = ((Date.now() - startedAtMs) / 60_000).toFixed(1);
  console.log(
    `${results.length - failed.length} passed, ${failed.length} failed (${results.length} runs in ${minutes} min)`,
  );
  if (failed.length > 0) {
    console.log(`failed seeds: ${failed.map((result) => result.seed).join(' ')}`);
    console.log(`replay one: npm run chaos -- --seed ${failed[0]?.seed} --runs 1 --verbose`);
  }
  return failed.length === 0 && results.length > 0 ? 0 : 1;
}

function printFailure(result: RunResult): void {
  console.log(
    `  FAILED seed ${result.seed} (replay: npm run chaos -- --seed ${result.seed} --runs 1 --verbose)`,
  );
  for (const failure of result.failures.slice(0, 25)) console.log(`  x ${failure}`);
  if (result.failures.length > 25) console.log(`  ... and ${result.failures.length - 25} more`);
  console.log('  plan:');
  for (const line of describePlan(result.plan)) console.log(`    ${line}`);
  if (result.recentErrors.length > 0) {
    console.log('  last function errors:');
    for (const line of result.recentErrors) console.log(`    ${line}`);
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    console.error(error instanceof Error ? (error.stack ?? error.message) : error);
    process.exitCode = 1;
  },
);
