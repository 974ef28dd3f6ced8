import { beforeAll, describe, expect, it } from 'vitest';
import {
  CONFIGURATION_VARIABLES,
  environmentFor,
  FUNCTION_VARIABLES,
  type FunctionName,
  isRequired,
  PLATFORM_VARIABLES,
} from '../../functions/core/function-configuration.ts';
import { buildLedgerDependencies } from '../../functions/ledger/dependencies.ts';
import { buildAllocationDependencies } from '../../functions/runtime/allocation-dependencies.ts';
import { Environment } from '../../functions/runtime/environment.ts';
import { createLog } from '../../functions/runtime/logger.ts';
import { buildWatchDependencies } from '../../functions/runtime/watch-dependencies.ts';
import { buildSyncDependencies } from '../../functions/sync/dependencies.ts';
import { functionEnvironments as environments } from '../fixtures/function-environments.ts';

/**
 * The configuration contract, proved at both ends for every function: the stack sets exactly
 * variables the function reads (and every one it requires), and the function, building its
 * dependencies at cold start from the environment the stack synthesized, reads exactly the
 * variables the contract lists for it, nothing more and nothing less. A variable set and never read,
 * or read and never set (without a default), fails here.
 */

/** Every function the contract knows (FUNCTION_VARIABLES has an entry for each name, by its type). */
const FUNCTIONS = Object.keys(FUNCTION_VARIABLES) as FunctionName[];

/** Each function's cold-start dependency builder, as its handler module calls it. */
const BUILDERS: Record<FunctionName, (variables: Record<string, string | undefined>) => unknown> = {
  Allocate: (variables) => buildAllocationDependencies(variables, createLog('contract-test')),
  Sweep: (variables) => buildAllocationDependencies(variables, createLog('contract-test')),
  GarbageCollection: (variables) => buildAllocationDependencies(variables, createLog('contract-test')),
  Sync: (variables) => buildSyncDependencies(variables, createLog('contract-test')),
  Watch: (variables) => buildWatchDependencies(variables, createLog('contract-test')),
  Ledger: (variables) => buildLedgerDependencies(variables),
};

/** The names the builder reads from its environment record (every property get). */
function namesRead(
  build: (variables: Record<string, string | undefined>) => unknown,
  variables: Record<string, string>,
) {
  const read = new Set<string>();
  const recording = new Proxy(
    { ...variables, AWS_REGION: 'eu-west-1' },
    {
      get(target, property, receiver) {
        if (typeof property === 'string') read.add(property);
        return Reflect.get(target, property, receiver);
      },
    },
  );
  build(recording);
  return [...read].filter((name) => !PLATFORM_VARIABLES.includes(name)).sort();
}

describe('the configuration contract between the stack and the functions', () => {
  let synthesized: Record<FunctionName, Record<string, string>>;
  beforeAll(() => {
    synthesized = environments();
  });

  for (const name of FUNCTIONS) {
    it(`${name}: the stack sets only variables it reads, and every one it requires`, () => {
      const set = Object.keys(synthesized[name]).filter((key) => !PLATFORM_VARIABLES.includes(key));
      const own: readonly string[] = FUNCTION_VARIABLES[name];
      expect(set.filter((key) => !own.includes(key))).toEqual([]);
      const required = FUNCTION_VARIABLES[name].filter(isRequired);
      expect(required.filter((key) => !set.includes(key))).toEqual([]);
    });

    it(`${name}: at cold start it reads exactly the variables the contract lists for it`, () => {
      expect(namesRead(BUILDERS[name], synthesized[name])).toEqual([...FUNCTION_VARIABLES[name]].sort());
    });
  }

  it('defines every variable a function lists, and lists every variable it defines', () => {
    const listed = new Set(Object.values(FUNCTION_VARIABLES).flat());
    expect(Object.keys(CONFIGURATION_VARIABLES).filter((name) => !listed.has(name as never))).toEqual([]);
  });

  it('environmentFor refuses a variable no function reads and a missing required one, naming them', () => {
    expect(() => environmentFor('Sync', { TABLE_NAME: 't', NOT_A_VARIABLE: 'x' } as never)).toThrow(
      /no function reads NOT_A_VARIABLE/,
    );
    expect(() => environmentFor('Watch', { WATCH_TABLE_NAME: 'w' })).toThrow(
      /Watch requires ALLOCATE_FUNCTION_NAME/,
    );
    expect(environmentFor('Sync', { TABLE_NAME: 't', CLUSTER_NAME: 'c', PAUSED: 'true' })).toEqual({
      TABLE_NAME: 't',
      PAUSED: 'true',
    });
  });

  it("functions parse with the contract's defaults, and name the variable that is wrong", () => {
    const environment = new Environment({ SYNC_CONCURRENCY: '', PAUSED: 'yes', NODE_NAMING: 'hostname' });
    expect(environment.integer('SYNC_CONCURRENCY')).toBe(CONFIGURATION_VARIABLES.SYNC_CONCURRENCY.default);
    expect(environment.string('CILIUM_CONFIG_NAME')).toBe('cilium-config');
    expect(environment.optionalString('CILIUM_VERSION')).toBeUndefined();
    expect(() => environment.boolean('PAUSED')).toThrow(/PAUSED must be true or false, got "yes"/);
    expect(() => environment.oneOf('NODE_NAMING')).toThrow(
      /NODE_NAMING must be one of private-dns-name, instance-id/,
    );
    expect(() => environment.string('TABLE_NAME')).toThrow(/TABLE_NAME is required/);
  });
});
