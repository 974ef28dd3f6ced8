/**
 * `npm run mutants`: the mutation check. Applies each edit of the catalogue (catalogue.ts) one at
 * a time and runs the test files it names; a mutant is killed when they fail, and survives when
 * they pass. Exits 1 if any mutant survives, 2 if the catalogue no longer matches the source or
 * the unmutated test files fail.
 *
 * The source is never written: the check runs in a temporary copy of the repository (see
 * `copyRepository`), where each mutated file is put back before the next mutant, and the copy is
 * removed at the end, on failure and on Ctrl-C.
 *
 *   npm run mutants [-- --only <name>]
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs, stripVTControlCharacters } from 'node:util';
import { MUTANTS, type Mutant } from './catalogue.ts';

const root = resolve(import.meta.dirname, '../..');
/** A mutant whose tests run longer than this is counted killed (its tests hang). */
const MUTANT_TIMEOUT_MS = 10 * 60_000;

/** `git ls-files` in the repository with `args`: the paths it lists. */
function gitFiles(args: readonly string[]): string[] {
  const listed = spawnSync('git', ['ls-files', '-z', ...args], {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  if (listed.status !== 0) throw new Error(`git ls-files failed: ${listed.stderr}`);
  return listed.stdout.split('\0').filter(Boolean);
}

/**
 * The repository as it is in the working tree, in a new temporary directory: tracked and
 * untracked files copied; ignored paths (node_modules, built binaries) linked, which the tests
 * only read; `.home` (the stack-policy cache, slow to synthesize) copied, since tests write it.
 */
function copyRepository(): string {
  const copy = mkdtempSync(join(tmpdir(), 'ipam-mutants-'));
  for (const path of gitFiles(['--cached', '--others', '--exclude-standard'])) {
    const source = join(root, path);
    if (!existsSync(source)) continue; // deleted in the working tree
    mkdirSync(dirname(join(copy, path)), { recursive: true });
    cpSync(source, join(copy, path));
  }
  for (const entry of gitFiles(['--others', '--ignored', '--exclude-standard', '--directory'])) {
    const path = entry.replace(/\/$/, '');
    mkdirSync(dirname(join(copy, path)), { recursive: true });
    if (path === '.home') cpSync(join(root, path), join(copy, path), { recursive: true });
    else symlinkSync(join(root, path), join(copy, path));
  }
  return copy;
}

let running: ReturnType<typeof spawn> | undefined;

/** Runs vitest on `files` in `cwd`; resolves whether they passed, and the tail of the output. */
function runTests(
  cwd: string,
  files: readonly string[],
): Promise<{ passed: boolean; timedOut: boolean; tail: string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(join(root, 'node_modules/.bin/vitest'), ['run', ...files], {
      cwd,
      env: { ...process.env, NO_COLOR: '1', CI: 'true' },
    });
    running = child;
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => chunks.push(chunk));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGTERM');
    }, MUTANT_TIMEOUT_MS);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      running = undefined;
      const output = stripVTControlCharacters(Buffer.concat(chunks).toString('utf8'));
      const failed = output
        .split('\n')
        .filter((line) => /^\s*(×|FAIL)\s/.test(line))
        .slice(0, 3)
        .map((line) => line.trim());
      // The failed tests, or (none named: the run itself failed) the end of the output.
      const lines = failed.length > 0 ? failed : output.trimEnd().split('\n').slice(-15);
      resolvePromise({ passed: code === 0 && !timedOut, timedOut, tail: lines.join('\n      ') });
    });
  });
}

/** The mutated text of `mutant.file`, or why the edit no longer applies. */
function mutated(source: string, mutant: Mutant): string | Error {
  const occurrences = source.split(mutant.find).length - 1;
  if (occurrences !== 1)
    return new Error(
      `${mutant.name}: the edit's text occurs ${occurrences} times in ${mutant.file}, not once`,
    );
  return source.replace(mutant.find, () => mutant.replace);
}

async function main(): Promise<number> {
  const { values } = parseArgs({ args: process.argv.slice(2), options: { only: { type: 'string' } } });
  const mutants = MUTANTS.filter((mutant) => values.only === undefined || mutant.name.includes(values.only));
  const copy = copyRepository();
  const cleanUp = () => rmSync(copy, { recursive: true, force: true });
  const interrupted = (signal: NodeJS.Signals) => {
    running?.kill('SIGTERM');
    cleanUp();
    console.log(`\nmutants: interrupted (${signal}); the source was never written`);
    process.exit(130);
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    for (const mutant of mutants) {
      const applied = mutated(readFileSync(join(copy, mutant.file), 'utf8'), mutant);
      if (applied instanceof Error) {
        console.log(`mutants: ${applied.message}`);
        return 2;
      }
    }
    const files = [...new Set(mutants.flatMap((mutant) => mutant.tests))];
    console.log(`mutants: ${mutants.length} mutants; first the unmutated test files (${files.length})`);
    const baseline = await runTests(copy, files);
    if (!baseline.passed) {
      console.log(`mutants: the unmutated test files fail; nothing to compare with\n      ${baseline.tail}`);
      return 2;
    }
    const survivors: string[] = [];
    for (const mutant of mutants) {
      const path = join(copy, mutant.file);
      const original = readFileSync(path, 'utf8');
      const started = Date.now();
      writeFileSync(path, mutated(original, mutant) as string);
      let result: Awaited<ReturnType<typeof runTests>>;
      try {
        result = await runTests(copy, mutant.tests);
      } finally {
        writeFileSync(path, original);
      }
      const seconds = ((Date.now() - started) / 1000).toFixed(0);
      if (result.passed) survivors.push(mutant.name);
      const verdict = result.passed ? 'SURVIVED' : result.timedOut ? 'killed (timed out)' : 'killed';
      console.log(`\n${verdict.padEnd(8)} ${mutant.name} (${seconds} s): ${mutant.description}`);
      console.log(`      ${mutant.file}; ${mutant.tests.join(', ')}`);
      if (!result.passed && result.tail) console.log(`      ${result.tail}`);
    }
    const killed = mutants.length - survivors.length;
    console.log(`\nmutants: ${killed} killed, ${survivors.length} survived`);
    if (survivors.length > 0) console.log(`  survived: ${survivors.join(', ')}`);
    return survivors.length > 0 ? 1 : 0;
  } finally {
    cleanUp();
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(`mutants: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(2);
  },
);
