import { Logger } from '@aws-lambda-powertools/logger';
import type { Log } from '../core/ports.ts';

/**
 * Structured JSON logs through Powertools (level from POWERTOOLS_LOG_LEVEL). Fields are passed as
 * given: callers never put credentials, tokens or kubeconfig contents in them.
 *
 * The service is the function's `POWERTOOLS_SERVICE_NAME` (the stack sets one per function, the
 * same its metrics carry), else `defaultServiceName`: one handler's code may run as two functions.
 */
export function createLog(defaultServiceName: string): Log & { readonly powertools: Logger } {
  const serviceName = process.env.POWERTOOLS_SERVICE_NAME?.trim() || defaultServiceName;
  const powertools = new Logger({ serviceName });
  return {
    powertools,
    debug: (message, fields) => powertools.debug(message, fields ?? {}),
    info: (message, fields) => powertools.info(message, fields ?? {}),
    warn: (message, fields) => powertools.warn(message, fields ?? {}),
    error: (message, fields) => powertools.error(message, fields ?? {}),
  };
}
