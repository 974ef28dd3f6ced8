import { ConfigurationError } from '../core/errors.ts';
import {
  CONFIGURATION_VARIABLES,
  type VariableName,
  type VariableSpec,
} from '../core/function-configuration.ts';
import { UNCONFIGURED_KNOBS } from '../core/knobs.ts';
import type { NodeKnobs } from '../core/model.ts';

/**
 * Reads a function's environment once, at cold start, and fails fast with the name of the variable
 * that is missing or malformed. Every name is one of the contract's (`core/function-configuration.ts`),
 * whose definition gives its default: no default is written at a call site.
 */
export class Environment {
  constructor(private readonly variables: Readonly<Record<string, string | undefined>>) {}

  /** A string: set, else its default; a variable without a default is required. */
  string(name: VariableName): string {
    const value = this.optionalString(name);
    if (value === undefined) throw new ConfigurationError(`environment variable ${name} is required`);
    return value;
  }

  /** A string that may be unset: its default, else undefined. */
  optionalString(name: VariableName): string | undefined {
    const spec: VariableSpec = CONFIGURATION_VARIABLES[name];
    return (
      this.raw(name) ?? ('default' in spec && typeof spec.default === 'string' ? spec.default : undefined)
    );
  }

  integer(name: VariableName): number {
    const raw = this.raw(name);
    const fallback = defaultOf(name, 'integer');
    if (raw === undefined && fallback !== undefined) return fallback;
    const value = Number(raw);
    if (raw === undefined || !Number.isInteger(value) || value < 0) {
      throw new ConfigurationError(
        `environment variable ${name} must be a non-negative integer, got ${JSON.stringify(raw)}`,
      );
    }
    return value;
  }

  boolean(name: VariableName): boolean {
    const raw = this.raw(name);
    const fallback = defaultOf(name, 'boolean');
    if (raw === undefined && fallback !== undefined) return fallback;
    if (raw === 'true') return true;
    if (raw === 'false') return false;
    throw new ConfigurationError(
      `environment variable ${name} must be true or false, got ${JSON.stringify(raw)}`,
    );
  }

  list(name: VariableName): string[] {
    return this.string(name)
      .split(',')
      .map((item) => item.trim())
      .filter((item) => item !== '');
  }

  stringMap(name: VariableName): Record<string, string> {
    const raw = this.raw(name);
    const fallback = defaultOf(name, 'json-string-map');
    if (raw === undefined && fallback !== undefined) return { ...fallback };
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw ?? '');
    } catch (error) {
      throw new ConfigurationError(`environment variable ${name} must be JSON`, { cause: error });
    }
    if (!isStringMap(parsed)) {
      throw new ConfigurationError(`environment variable ${name} must be a JSON object of strings`);
    }
    return parsed;
  }

  oneOf<T extends string>(name: VariableName): T {
    const spec: VariableSpec = CONFIGURATION_VARIABLES[name];
    if (spec.kind !== 'one-of') throw new ConfigurationError(`${name} is not a one-of variable`);
    const value = this.raw(name) ?? spec.default;
    if (!spec.values.includes(value)) {
      throw new ConfigurationError(
        `environment variable ${name} must be one of ${spec.values.join(', ')}, got ${JSON.stringify(value)}`,
      );
    }
    return value as T;
  }

  /** The value, with an empty or blank one taken as unset. */
  private raw(name: VariableName): string | undefined {
    const value = this.variables[name];
    return value === undefined || value.trim() === '' ? undefined : value;
  }
}

/** The contract's default of `name`, when it is of `kind` and has one. */
function defaultOf<K extends VariableSpec['kind']>(
  name: VariableName,
  kind: K,
): Extract<VariableSpec, { kind: K; default: unknown }>['default'] | undefined {
  const spec: VariableSpec = CONFIGURATION_VARIABLES[name];
  if (spec.kind !== kind || !('default' in spec)) return undefined;
  return spec.default as never;
}

function isStringMap(value: unknown): value is Record<string, string> {
  return (
    typeof value === 'object' &&
    value !== null &&
    !Array.isArray(value) &&
    Object.values(value).every((entry) => typeof entry === 'string')
  );
}

/**
 * The stack-wide knob defaults for nodes whose CiliumNode does not (yet) set them, from
 * `DEFAULT_PRE_ALLOCATE` and friends. Per-node values in the CiliumNode always win.
 */
export function readDefaultKnobs(environment: Environment): NodeKnobs {
  return {
    ...UNCONFIGURED_KNOBS,
    preAllocate: environment.integer('DEFAULT_PRE_ALLOCATE'),
    minAllocate: environment.integer('DEFAULT_MIN_ALLOCATE'),
    maxAllocate: environment.integer('DEFAULT_MAX_ALLOCATE'),
    maxAboveWatermark: environment.integer('DEFAULT_MAX_ABOVE_WATERMARK'),
    firstInterfaceIndex: environment.integer('DEFAULT_FIRST_INTERFACE_INDEX'),
  };
}
