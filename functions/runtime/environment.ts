import { ConfigurationError } from '../core/errors.ts';
import { UNCONFIGURED_KNOBS } from '../core/knobs.ts';
import type { NodeKnobs } from '../core/model.ts';

/**
 * Reads a function's environment once, at cold start, and fails fast with the name of the variable
 * that is missing or malformed. The CDK stack sets these together with the IAM grants they need.
 */
export class Environment {
  constructor(private readonly variables: Readonly<Record<string, string | undefined>>) {}

  string(name: string): string {
    const value = this.variables[name];
    if (value === undefined || value.trim() === '') {
      throw new ConfigurationError(`environment variable ${name} is required`);
    }
    return value;
  }

  optionalString(name: string): string | undefined {
    const value = this.variables[name];
    return value === undefined || value.trim() === '' ? undefined : value;
  }

  integer(name: string, fallback?: number): number {
    const raw = this.variables[name];
    if ((raw === undefined || raw === '') && fallback !== undefined) return fallback;
    const value = Number(raw);
    if (raw === undefined || !Number.isInteger(value) || value < 0) {
      throw new ConfigurationError(
        `environment variable ${name} must be a non-negative integer, got ${JSON.stringify(raw)}`,
      );
    }
    return value;
  }

  boolean(name: string, fallback?: boolean): boolean {
    const raw = this.variables[name];
    if ((raw === undefined || raw === '') && fallback !== undefined) return fallback;
    if (raw === 'true') return true;
    if (raw === 'false') return false;
    throw new ConfigurationError(
      `environment variable ${name} must be true or false, got ${JSON.stringify(raw)}`,
    );
  }

  list(name: string): string[] {
    return this.string(name)
      .split(',')
      .map((item) => item.trim())
      .filter((item) => item !== '');
  }

  json<T>(name: string, validate: (value: unknown) => value is T, fallback?: T): T {
    const raw = this.variables[name];
    if ((raw === undefined || raw === '') && fallback !== undefined) return fallback;
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw ?? '');
    } catch (error) {
      throw new ConfigurationError(`environment variable ${name} must be JSON`, { cause: error });
    }
    if (!validate(parsed)) throw new ConfigurationError(`environment variable ${name} has the wrong shape`);
    return parsed;
  }

  oneOf<T extends string>(name: string, allowed: readonly T[], fallback?: T): T {
    const raw = this.variables[name] ?? fallback;
    if (!allowed.includes(raw as T)) {
      throw new ConfigurationError(
        `environment variable ${name} must be one of ${allowed.join(', ')}, got ${JSON.stringify(raw)}`,
      );
    }
    return raw as T;
  }
}

export function isStringMap(value: unknown): value is Record<string, string> {
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
    preAllocate: environment.integer('DEFAULT_PRE_ALLOCATE', 8),
    minAllocate: environment.integer('DEFAULT_MIN_ALLOCATE', 0),
    maxAllocate: environment.integer('DEFAULT_MAX_ALLOCATE', 0),
    maxAboveWatermark: environment.integer('DEFAULT_MAX_ABOVE_WATERMARK', 0),
    firstInterfaceIndex: environment.integer('DEFAULT_FIRST_INTERFACE_INDEX', 0),
  };
}
