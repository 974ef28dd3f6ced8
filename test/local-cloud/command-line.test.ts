import { describe, expect, it } from 'vitest';
import { CommandLineError, parseFlags, USAGE } from './command-line.ts';

describe("npm start's command line", () => {
  it('takes the defaults with no options and every option in its own spelling', () => {
    expect(parseFlags([])).toEqual({ nodes: 3, once: false, timeScale: 10, verbose: false, agents: '1.19' });
    expect(
      parseFlags(['--nodes', '12', '--agents', 'mixed', '--time-scale', '2.5', '--once', '--verbose']),
    ).toEqual({ nodes: 12, once: true, timeScale: 2.5, verbose: true, agents: 'mixed' });
  });

  it('takes --launch N alone: it adds instances to the running cloud', () => {
    expect(parseFlags(['--launch', '2'])).toMatchObject({ launch: 2 });
    expect(parseFlags(['--nodes', '2'])).not.toHaveProperty('launch');
    expect(USAGE).toContain('--launch N');
  });

  it('answers --help with the usage, which lists every option with its default', () => {
    expect(parseFlags(['--help'])).toBe('help');
    for (const line of ['--nodes N', '--agents V', '--time-scale X', '--once', '--verbose', '--help']) {
      expect(USAGE).toContain(line);
    }
    expect(USAGE).toContain('(default 3)');
  });

  it.each([
    [['--bogus'], /Unknown option '--bogus'; npm start -- --help lists the options/],
    [['--nodes', '0'], /^--nodes must be a whole number from 1 to 200, got 0$/],
    [['--nodes', 'three'], /^--nodes must be a whole number from 1 to 200, got three$/],
    [['--agents', '1.21'], /^--agents must be 1\.19, 1\.20 or mixed, got 1\.21$/],
    [['--time-scale=-1'], /^--time-scale must be a positive number, got -1$/],
    [
      ['--time-scale', '-1'],
      /^Option '--time-scale' argument is ambiguous; npm start -- --help lists the options$/,
    ],
    [['extra'], /Unexpected argument 'extra'/],
    [['--launch', '0'], /^--launch must be a whole number from 1 to 200, got 0$/],
    [
      ['--launch', '2', '--once'],
      /^--launch adds instances to the local cloud already running and takes no other option, got --once$/,
    ],
  ])('refuses %j in one line that says what was meant', (argv, message) => {
    const refusal = () => parseFlags(argv);
    expect(refusal).toThrow(CommandLineError);
    expect(refusal).toThrow(message);
    try {
      refusal();
    } catch (error) {
      expect((error as Error).message).not.toContain('\n');
    }
  });

  it('sees npm keep the options for itself when the -- was left out, and gives the command to type', () => {
    // `npm start --nodes 3 --once`: npm sets npm_config_nodes and npm_config_once, and passes only the 3.
    const environment = { npm_config_nodes: 'true', npm_config_once: 'true' };
    expect(() => parseFlags(['3'], environment)).toThrow(
      'npm kept --nodes, --once for itself: write npm start -- --nodes --once 3',
    );
    expect(() => parseFlags([], { npm_config_time_scale: '4' })).toThrow(
      'npm kept --time-scale for itself: write npm start -- --time-scale',
    );
    expect(parseFlags(['--nodes', '2'], { npm_config_cache: '/tmp/npm' })).toMatchObject({ nodes: 2 });
  });
});
