import { parseArgs } from 'node:util';

/**
 * `npm start`'s command line: every option with its default and meaning in one table, from which
 * both the parser and `--help` are made. A mistake answers one line saying what was meant.
 */

export type AgentVersions = '1.19' | '1.20' | 'mixed';

export interface Flags {
  readonly nodes: number;
  readonly once: boolean;
  readonly timeScale: number;
  readonly verbose: boolean;
  readonly agents: AgentVersions;
  /** `--launch N`: add N instances to the running local cloud, then exit (no cloud is started). */
  readonly launch?: number;
}

const OPTIONS = {
  nodes: { type: 'string', default: '3', value: 'N', help: 'instances to launch, 1..200' },
  agents: {
    type: 'string',
    default: '1.19',
    value: 'V',
    help: 'the simulated cilium-agents: 1.19 (CRD protocol), 1.20 (multi-pool) or mixed',
  },
  'time-scale': {
    type: 'string',
    default: '10',
    value: 'X',
    help: 'run schedules X times faster than AWS (10: rate(1 minute) every 6 s)',
  },
  once: {
    type: 'boolean',
    default: false,
    help: 'launch, wait for every node, fire the schedules once, print the summary and exit: 0 if every node is ready, no invariant was violated and no function was denied a call, else 1',
  },
  verbose: {
    type: 'boolean',
    default: false,
    help: "echo the functions' log lines (they always go to the log file)",
  },
  launch: {
    type: 'string',
    value: 'N',
    help: 'add N instances (1..200) to the local cloud already running (the one ENI_IPAM_LOCAL_CLOUD names, else the only one) and exit; its live table shows them',
  },
  help: { type: 'boolean', default: false, help: 'print this and exit' },
} as const;

export const USAGE = [
  'npm start -- [options]   (the -- hands the options to the local cloud rather than to npm)',
  '',
  "The whole system on this machine: the synthesized stack's functions on DynamoDB Local, the EC2",
  'stand-in and kube-apiserver, with simulated cilium-agents, and a live table until Ctrl-C.',
  '',
  ...Object.entries(OPTIONS).map(([name, option]) => {
    const flag = `--${name}${'value' in option ? ` ${option.value}` : ''}`;
    const byDefault = 'default' in option && option.type === 'string' ? ` (default ${option.default})` : '';
    return `  ${flag.padEnd(16)} ${option.help}${byDefault}`;
  }),
].join('\n');

/** A command line that cannot be run: its one-line message says what was meant. */
export class CommandLineError extends Error {}

/** The flags, or `help` when --help was asked for. */
export function parseFlags(argv: readonly string[], environment: NodeJS.ProcessEnv = {}): Flags | 'help' {
  const swallowed = Object.keys(OPTIONS).filter(
    (name) => environment[`npm_config_${name.replace('-', '_')}`],
  );
  let values: { [name in keyof typeof OPTIONS]?: string | boolean };
  let given: string[];
  try {
    const parsed = parseArgs({
      args: [...argv],
      options: OPTIONS,
      strict: true,
      allowPositionals: false,
      tokens: true,
    });
    values = parsed.values;
    given = parsed.tokens.flatMap((token) => (token.kind === 'option' ? [token.name] : []));
  } catch (error) {
    if (swallowed.length > 0) throw missingSeparator(swallowed, argv);
    throw new CommandLineError(`${firstSentence(error)}; npm start -- --help lists the options`);
  }
  if (swallowed.length > 0) throw missingSeparator(swallowed, argv);
  if (values.help === true) return 'help';
  if (values.launch !== undefined) return launchFlags(values, given);
  return validated(values);
}

/** `--launch N` alone: it asks the running cloud, so no option of a new cloud goes with it. */
function launchFlags(
  values: { [name in keyof typeof OPTIONS]?: string | boolean },
  given: readonly string[],
): Flags {
  const others = [...new Set(given.filter((name) => name !== 'launch'))];
  if (others.length > 0) {
    throw new CommandLineError(
      `--launch adds instances to the local cloud already running and takes no other option, got ${others.map((name) => `--${name}`).join(', ')}`,
    );
  }
  const launch = Number(values.launch);
  if (!Number.isInteger(launch) || launch < 1 || launch > 200)
    throw new CommandLineError(`--launch must be a whole number from 1 to 200, got ${values.launch}`);
  return { ...validated(values), launch };
}

/** node:util's parse error, first sentence only (its advice on dashes follows it). */
function firstSentence(error: unknown): string {
  return (error as Error).message.split('\n')[0]?.replace(/\.\s.*$|\.$/, '') ?? String(error);
}

/** npm took `--nodes 3` for its own config when the `--` was left out; the 3 arrives alone. */
function missingSeparator(names: readonly string[], argv: readonly string[]): CommandLineError {
  const meant = [...names.map((name) => `--${name}`), ...argv].join(' ');
  return new CommandLineError(
    `npm kept ${names.map((name) => `--${name}`).join(', ')} for itself: write npm start -- ${meant}`,
  );
}

function validated(values: { [name in keyof typeof OPTIONS]?: string | boolean }): Flags {
  const agents = String(values.agents);
  if (agents !== '1.19' && agents !== '1.20' && agents !== 'mixed')
    throw new CommandLineError(`--agents must be 1.19, 1.20 or mixed, got ${agents}`);
  const nodes = Number(values.nodes);
  if (!Number.isInteger(nodes) || nodes < 1 || nodes > 200)
    throw new CommandLineError(`--nodes must be a whole number from 1 to 200, got ${values.nodes}`);
  const timeScale = Number(values['time-scale']);
  if (!(timeScale > 0))
    throw new CommandLineError(`--time-scale must be a positive number, got ${values['time-scale']}`);
  return { nodes, once: values.once === true, timeScale, verbose: values.verbose === true, agents };
}
