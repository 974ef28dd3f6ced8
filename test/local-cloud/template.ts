import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { compileEventPattern } from './event-pattern.ts';

/**
 * Reads what `cdk synth` produced (the CloudFormation template plus the bundled asset folders of a
 * cloud assembly) into the few resource kinds the local cloud runs: Lambda functions, EventBridge
 * rules, the DynamoDB table and the stream event-source mapping. Only what the template says is
 * used; anything the runner cannot honour faithfully (an unknown intrinsic function, a target that
 * is not one of the template's functions, an InputTransformer) throws `TemplateError` naming it.
 */

export class TemplateError extends Error {
  override readonly name = 'TemplateError';
}

export interface CloudFormationResource {
  readonly Type: string;
  readonly Properties?: Record<string, unknown>;
  readonly Metadata?: Record<string, unknown>;
}

export interface CloudFormationTemplate {
  readonly Resources: Readonly<Record<string, CloudFormationResource>>;
}

export interface FunctionDefinition {
  readonly logicalId: string;
  /** The bundled asset folder (`<assembly>/asset.<hash>`), from `Metadata['aws:asset:path']`. */
  readonly assetDirectory: string;
  /** The ESM entry file in the asset folder that `Handler` names (`index.handler` -> index.mjs). */
  readonly entryFile: string;
  readonly handlerExport: string;
  readonly runtime: string;
  readonly timeoutSeconds: number;
  readonly memorySizeMb: number;
  /** `ReservedConcurrentExecutions`, when the template caps the function. */
  readonly reservedConcurrency?: number;
  /** `Environment.Variables` as synthesized: values may still be CloudFormation tokens. */
  readonly environment: Readonly<Record<string, unknown>>;
}

export interface RuleTarget {
  readonly id: string;
  readonly functionLogicalId: string;
  /** The target's `Input` (constant JSON replacing the event), parsed. */
  readonly input?: unknown;
}

export interface RuleDefinition {
  readonly logicalId: string;
  readonly enabled: boolean;
  readonly eventPattern?: unknown;
  readonly scheduleExpression?: string;
  readonly targets: readonly RuleTarget[];
}

export interface StreamMappingDefinition {
  readonly logicalId: string;
  readonly functionLogicalId: string;
  readonly tableLogicalId: string;
  readonly enabled: boolean;
  readonly batchSize: number;
  readonly bisectBatchOnFunctionError: boolean;
  /** -1 = retry until the record expires, as in Lambda. */
  readonly maximumRetryAttempts: number;
  readonly maximumRecordAgeSeconds: number;
  readonly reportBatchItemFailures: boolean;
  readonly parallelizationFactor: number;
  readonly startingPosition: 'TRIM_HORIZON' | 'LATEST';
}

export interface TableDefinition {
  readonly logicalId: string;
  readonly keySchema: readonly { AttributeName: string; KeyType: 'HASH' | 'RANGE' }[];
  readonly attributeDefinitions: readonly { AttributeName: string; AttributeType: 'S' | 'N' | 'B' }[];
  readonly billingMode: string;
  readonly streamViewType?: 'NEW_IMAGE' | 'OLD_IMAGE' | 'NEW_AND_OLD_IMAGES' | 'KEYS_ONLY';
  readonly timeToLiveAttribute?: string;
}

export interface StackModel {
  readonly functions: readonly FunctionDefinition[];
  readonly rules: readonly RuleDefinition[];
  readonly streamMappings: readonly StreamMappingDefinition[];
  readonly tables: readonly TableDefinition[];
}

/** Reads the template of a synthesized stack whose assets live in `assemblyDirectory`. */
export function readStackModel(template: CloudFormationTemplate, assemblyDirectory: string): StackModel {
  const resources = Object.entries(template.Resources);
  const ofType = (type: string) => resources.filter(([, resource]) => resource.Type === type);
  const functionIds = new Set(ofType('AWS::Lambda::Function').map(([logicalId]) => logicalId));
  return {
    functions: ofType('AWS::Lambda::Function').map(([logicalId, resource]) =>
      readFunction(logicalId, resource, assemblyDirectory),
    ),
    rules: ofType('AWS::Events::Rule').map(([logicalId, resource]) =>
      readRule(logicalId, resource, functionIds),
    ),
    streamMappings: ofType('AWS::Lambda::EventSourceMapping').map(([logicalId, resource]) =>
      readStreamMapping(logicalId, resource, functionIds),
    ),
    tables: ofType('AWS::DynamoDB::Table').map(([logicalId, resource]) => readTable(logicalId, resource)),
  };
}

function readFunction(
  logicalId: string,
  resource: CloudFormationResource,
  assemblyDirectory: string,
): FunctionDefinition {
  const properties = resource.Properties ?? {};
  const assetPath = resource.Metadata?.['aws:asset:path'];
  if (typeof assetPath !== 'string') {
    throw new TemplateError(
      `${logicalId} has no aws:asset:path metadata: synthesize with context aws:cdk:enable-asset-metadata=true (the CDK CLI sets it)`,
    );
  }
  const handler = requireString(properties.Handler, `${logicalId}.Handler`);
  const [moduleName, handlerExport, ...rest] = handler.split('.');
  if (!moduleName || !handlerExport || rest.length > 0) {
    throw new TemplateError(`${logicalId}.Handler ${handler} is not <file>.<export>`);
  }
  const assetDirectory = join(assemblyDirectory, assetPath);
  const entryFile = ['.mjs', '.js', '.cjs']
    .map((extension) => join(assetDirectory, `${moduleName}${extension}`))
    .find((candidate) => existsSync(candidate));
  if (entryFile === undefined) {
    throw new TemplateError(`${logicalId}: no ${moduleName}.mjs/.js/.cjs in ${assetDirectory}`);
  }
  const environment = (properties.Environment as { Variables?: Record<string, unknown> } | undefined)
    ?.Variables;
  const reserved = properties.ReservedConcurrentExecutions;
  return {
    logicalId,
    assetDirectory,
    entryFile,
    handlerExport,
    runtime: requireString(properties.Runtime, `${logicalId}.Runtime`),
    // CloudFormation's defaults when the property is absent: 3 s and 128 MB.
    timeoutSeconds: typeof properties.Timeout === 'number' ? properties.Timeout : 3,
    memorySizeMb: typeof properties.MemorySize === 'number' ? properties.MemorySize : 128,
    ...(typeof reserved === 'number' ? { reservedConcurrency: reserved } : {}),
    environment: environment ?? {},
  };
}

function readRule(
  logicalId: string,
  resource: CloudFormationResource,
  functionIds: Set<string>,
): RuleDefinition {
  const properties = resource.Properties ?? {};
  const eventPattern = properties.EventPattern;
  if (eventPattern !== undefined) compileEventPattern(eventPattern);
  const scheduleExpression = properties.ScheduleExpression;
  if (scheduleExpression !== undefined && typeof scheduleExpression !== 'string') {
    throw new TemplateError(`${logicalId}.ScheduleExpression is not a string`);
  }
  const targets = ((properties.Targets as Record<string, unknown>[] | undefined) ?? []).map((target) => {
    const id = requireString(target.Id, `${logicalId}.Targets[].Id`);
    if (target.InputPath !== undefined || target.InputTransformer !== undefined) {
      throw new TemplateError(
        `${logicalId} target ${id}: InputPath/InputTransformer are not supported locally`,
      );
    }
    const functionLogicalId = getAttTarget(target.Arn, 'Arn');
    if (functionLogicalId === undefined || !functionIds.has(functionLogicalId)) {
      throw new TemplateError(`${logicalId} target ${id} is not a function of this template`);
    }
    const input =
      target.Input === undefined ? undefined : parseJson(target.Input, `${logicalId} target ${id} Input`);
    return { id, functionLogicalId, ...(input === undefined ? {} : { input }) };
  });
  return {
    logicalId,
    enabled: properties.State === undefined || properties.State === 'ENABLED',
    ...(eventPattern === undefined ? {} : { eventPattern }),
    ...(scheduleExpression === undefined ? {} : { scheduleExpression }),
    targets,
  };
}

function readStreamMapping(
  logicalId: string,
  resource: CloudFormationResource,
  functionIds: Set<string>,
): StreamMappingDefinition {
  const properties = resource.Properties ?? {};
  const functionLogicalId = refTarget(properties.FunctionName);
  if (functionLogicalId === undefined || !functionIds.has(functionLogicalId)) {
    throw new TemplateError(`${logicalId}.FunctionName is not a function of this template`);
  }
  const tableLogicalId = getAttTarget(properties.EventSourceArn, 'StreamArn');
  if (tableLogicalId === undefined) {
    throw new TemplateError(`${logicalId}.EventSourceArn is not the StreamArn of a table of this template`);
  }
  const startingPosition = properties.StartingPosition;
  if (startingPosition !== 'TRIM_HORIZON' && startingPosition !== 'LATEST') {
    throw new TemplateError(`${logicalId}.StartingPosition ${String(startingPosition)} is not supported`);
  }
  const number = (key: string, fallback: number) =>
    typeof properties[key] === 'number' ? (properties[key] as number) : fallback;
  const responseTypes = (properties.FunctionResponseTypes as string[] | undefined) ?? [];
  // Defaults are Lambda's for DynamoDB stream mappings.
  return {
    logicalId,
    functionLogicalId,
    tableLogicalId,
    enabled: properties.Enabled !== false,
    batchSize: number('BatchSize', 100),
    bisectBatchOnFunctionError: properties.BisectBatchOnFunctionError === true,
    maximumRetryAttempts: number('MaximumRetryAttempts', -1),
    maximumRecordAgeSeconds: number('MaximumRecordAgeInSeconds', -1),
    reportBatchItemFailures: responseTypes.includes('ReportBatchItemFailures'),
    parallelizationFactor: number('ParallelizationFactor', 1),
    startingPosition,
  };
}

function readTable(logicalId: string, resource: CloudFormationResource): TableDefinition {
  const properties = resource.Properties ?? {};
  const streamSpecification = properties.StreamSpecification as { StreamViewType?: string } | undefined;
  const timeToLive = properties.TimeToLiveSpecification as
    | { AttributeName?: string; Enabled?: boolean }
    | undefined;
  return {
    logicalId,
    keySchema: properties.KeySchema as TableDefinition['keySchema'],
    attributeDefinitions: properties.AttributeDefinitions as TableDefinition['attributeDefinitions'],
    billingMode: typeof properties.BillingMode === 'string' ? properties.BillingMode : 'PROVISIONED',
    ...(streamSpecification?.StreamViewType
      ? { streamViewType: streamSpecification.StreamViewType as TableDefinition['streamViewType'] }
      : {}),
    ...(timeToLive?.Enabled && timeToLive.AttributeName
      ? { timeToLiveAttribute: timeToLive.AttributeName }
      : {}),
  };
}

// ------------------------------------------------------------------ token resolution

/** The local physical values CloudFormation would have substituted for the template's tokens. */
export interface LocalValues {
  /** `Ref` of a resource (a table's name, a function's name). */
  ref(logicalId: string): string | undefined;
  /** `Fn::GetAtt` of a resource attribute (Arn, StreamArn). */
  getAtt(logicalId: string, attribute: string): string | undefined;
  /** Pseudo parameters: AWS::Region, AWS::AccountId, AWS::Partition, AWS::URLSuffix, AWS::StackName. */
  readonly pseudo: Readonly<Record<string, string>>;
}

/**
 * Resolves CloudFormation intrinsic functions the way the deployment would (`Ref`, `Fn::GetAtt`,
 * `Fn::Join`, `Fn::Sub`, `Fn::Select`) against local values. A token it cannot resolve throws,
 * naming it: a function must never start with an environment variable silently left unresolved.
 */
export function resolveTokens(value: unknown, local: LocalValues, path = 'value'): unknown {
  if (Array.isArray(value))
    return value.map((item, index) => resolveTokens(item, local, `${path}[${index}]`));
  if (typeof value !== 'object' || value === null) return value;
  const entries = Object.entries(value);
  const [key, argument] = entries[0] ?? [];
  if (entries.length === 1 && key !== undefined && (key === 'Ref' || key.startsWith('Fn::'))) {
    return resolveIntrinsic(key, argument, local, path);
  }
  return Object.fromEntries(
    entries.map(([field, item]) => [field, resolveTokens(item, local, `${path}.${field}`)]),
  );
}

function resolveIntrinsic(name: string, argument: unknown, local: LocalValues, path: string): unknown {
  const fail = (why: string): never => {
    throw new TemplateError(`${path}: cannot resolve ${name} ${JSON.stringify(argument)} locally (${why})`);
  };
  switch (name) {
    case 'Ref': {
      const target = typeof argument === 'string' ? argument : fail('Ref takes a logical id');
      return (
        (target.startsWith('AWS::') ? local.pseudo[target] : local.ref(target)) ?? fail('unknown reference')
      );
    }
    case 'Fn::GetAtt': {
      const [logicalId, attribute] = Array.isArray(argument) ? argument : String(argument).split('.');
      if (typeof logicalId !== 'string' || typeof attribute !== 'string') return fail('malformed');
      return local.getAtt(logicalId, attribute) ?? fail('unknown attribute');
    }
    case 'Fn::Join': {
      const [separator, parts] = Array.isArray(argument) ? argument : [];
      if (typeof separator !== 'string' || !Array.isArray(parts)) return fail('malformed');
      return parts
        .map((part, index) => String(resolveTokens(part, local, `${path}[${index}]`)))
        .join(separator);
    }
    case 'Fn::Select': {
      const [index, list] = Array.isArray(argument) ? argument : [];
      const resolved = resolveTokens(list, local, path);
      if (!Array.isArray(resolved)) return fail('malformed');
      return resolved[Number(index)] ?? fail('index out of range');
    }
    case 'Fn::Sub': {
      const [text, variables] =
        typeof argument === 'string' ? [argument, {}] : Array.isArray(argument) ? argument : [];
      if (typeof text !== 'string') return fail('malformed');
      const bound = resolveTokens(variables ?? {}, local, path) as Record<string, unknown>;
      return text.replace(/\$\{([^}!][^}]*)\}/g, (_match, variable: string) => {
        if (Object.hasOwn(bound, variable)) return String(bound[variable]);
        if (variable.startsWith('AWS::')) return local.pseudo[variable] ?? fail(`unknown ${variable}`);
        const [logicalId, attribute] = variable.split('.');
        const resolved =
          attribute === undefined ? local.ref(logicalId ?? '') : local.getAtt(logicalId ?? '', attribute);
        return resolved ?? fail(`unknown \${${variable}}`);
      });
    }
    default:
      return fail('intrinsic not supported by the local cloud');
  }
}

/** `Environment.Variables` with every token resolved; all values become strings, as in Lambda. */
export function resolveEnvironment(
  definition: FunctionDefinition,
  local: LocalValues,
): Record<string, string> {
  return Object.fromEntries(
    Object.entries(definition.environment).map(([name, value]) => [
      name,
      String(resolveTokens(value, local, `${definition.logicalId}.Environment.${name}`)),
    ]),
  );
}

function refTarget(value: unknown): string | undefined {
  const ref = (value as { Ref?: unknown } | undefined)?.Ref;
  return typeof ref === 'string' ? ref : undefined;
}

function getAttTarget(value: unknown, attribute: string): string | undefined {
  const getAtt = (value as { 'Fn::GetAtt'?: unknown } | undefined)?.['Fn::GetAtt'];
  return Array.isArray(getAtt) && getAtt[1] === attribute && typeof getAtt[0] === 'string'
    ? getAtt[0]
    : undefined;
}

function requireString(value: unknown, what: string): string {
  if (typeof value !== 'string') throw new TemplateError(`${what} is missing or not a string`);
  return value;
}

function parseJson(value: unknown, what: string): unknown {
  if (typeof value !== 'string') throw new TemplateError(`${what} is not a JSON string`);
  try {
    return JSON.parse(value);
  } catch (error) {
    throw new TemplateError(`${what} is not valid JSON`, { cause: error });
  }
}
