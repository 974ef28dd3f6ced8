import { Logger } from '@aws-lambda-powertools/logger';
import type { Log } from '../core/ports.ts';

/**
 * Structured JSON logs through Powertools (level from POWERTOOLS_LOG_LEVEL). Fields are passed as
 * given: callers never put credentials, tokens or kubeconfig contents in them.
 */
export function createLog(serviceName: string): Log & { readonly powertools: Logger } {
  const powertools = new Logger({ serviceName });
  return {
    powertools,
    debug: (message, fields) => powertools.debug(message, fields ?? {}),
    info: (message, fields) => powertools.info(message, fields ?? {}),
    warn: (message, fields) => powertools.warn(message, fields ?? {}),
    error: (message, fields) => powertools.error(message, fields ?? {}),
  };
}
