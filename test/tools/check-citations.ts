/**
 * `npm run citations`: every citation in the code and the docs resolves to something a reader of
 * this repository can open. Fails, naming file:line, on
 * - a repository path (`functions/…`, `infra/…`, `test/…`, `.ci/…`; in Markdown also `./…` and
 *   `../…`) that names no file or folder of the repository, and any relative path that leaves it;
 * - a Markdown note (`*.md`, with or without a folder) that the repository does not ship: notes of
 *   other repositories are cited by URL;
 * - the styles of notes that do not ship: a source label (an M and a number in square brackets),
 *   and a section sign with a number on a line that names no shipped Markdown file.
 * URLs are citations too, but they are never fetched: what a line says inside a URL is not checked.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, resolve, sep } from 'node:path';

export interface CitedFile {
  /** The path from the repository root, with `/` separators. */
  readonly path: string;
  readonly text: string;
}

export interface CitationProblem {
  readonly path: string;
  readonly line: number;
  readonly message: string;
}

/** What the check needs to know of the repository: which paths exist, which notes it ships. */
export interface Repository {
  /** True when `path` (from the root, `/` separators, no `..` left) is a file or folder. */
  readonly exists: (path: string) => boolean;
  /** The base names of every Markdown file the repository ships. */
  readonly markdownNames: ReadonlySet<string>;
}

/** The folders a repository path starts with. */
const REPOSITORY_ROOTS = ['functions/', 'infra/', 'test/', '.ci/'];

/** Files the repository's own tools write (`npm run bench` writes bench.md, and with `--peer` peer-comparison.md, into its out dir). */
const WRITTEN_BY_TOOLS = new Set(['bench.md', 'peer-comparison.md']);

const URL = /\bhttps?:\/\/[^\s)>'"`\]]+/g;
const SOURCE_LABEL = /\[M\d+\]/g;
const SECTION = /§\s*\d/;
const PATH =
  /(?<![\w@./-])(?:\.\.?\/)*[\w@-][\w@.-]*(?:\/[\w@.*{}-]+)*\.(?:md|ts|mjs|cjs|json|pml|sh|yaml)\b/g;

/** Every problem of `files`, in file and line order. */
export function findCitationProblems(files: readonly CitedFile[], repository: Repository): CitationProblem[] {
  return files.flatMap((file) =>
    file.text.split('\n').flatMap((text, index) => lineProblems(file.path, index + 1, text, repository)),
  );
}

function lineProblems(path: string, line: number, raw: string, repository: Repository): CitationProblem[] {
  const text = raw.replace(URL, ' ');
  const problems: CitationProblem[] = [];
  const problem = (message: string) => problems.push({ path, line, message });
  for (const label of text.match(SOURCE_LABEL) ?? []) {
    problem(`cites ${label}, a source label of a note the repository does not ship (cite a URL instead)`);
  }
  let namesShippedNote = false;
  for (const cited of text.match(PATH) ?? []) {
    const verdict = judgePath(path, cited, repository);
    if (verdict === 'shipped-note') namesShippedNote = true;
    else if (verdict !== 'ok') problem(verdict);
  }
  if (SECTION.test(text) && !namesShippedNote) {
    problem('cites a section (§) of no shipped note (name the README it is in, or cite a URL)');
  }
  return problems;
}

/** 'ok', 'shipped-note' (an existing Markdown file), or what is wrong with the citation. */
function judgePath(citingPath: string, cited: string, repository: Repository): string {
  if (/[*{}]/.test(cited)) return 'ok'; // a glob, not a citation of one file
  const isNote = cited.endsWith('.md');
  const relativeTo = cited.startsWith('./') || cited.startsWith('../');
  if (relativeTo) {
    const target = normalize(join(dirname(citingPath), cited))
      .split(sep)
      .join('/');
    if (target.startsWith('../')) return `cites ${cited}, which is outside the repository`;
    // In code a relative path is an import specifier (tsc resolves those) or an example of one.
    const inMarkdown = citingPath.endsWith('.md');
    if (inMarkdown && !repository.exists(target)) return `cites ${cited}, which does not exist (${target})`;
    return isNote ? 'shipped-note' : 'ok';
  }
  if (REPOSITORY_ROOTS.some((root) => cited.startsWith(root))) {
    if (!repository.exists(cited)) return `cites ${cited}, which does not exist`;
    return isNote ? 'shipped-note' : 'ok';
  }
  if (!isNote) return 'ok'; // a path of another repository (cilium's `pkg/…`) or a bare file name
  const name = cited.split('/').pop() ?? cited;
  if (repository.exists(cited) || (!cited.includes('/') && repository.markdownNames.has(name))) {
    return 'shipped-note';
  }
  if (WRITTEN_BY_TOOLS.has(name)) return 'ok';
  return `cites ${cited}, a note the repository does not ship (bring the fact into a README, or cite a URL)`;
}

/** What the check reads: code and docs under these folders, and the root README. */
const SCANNED_FOLDERS = ['functions', 'infra', 'test'];
const SCANNED_FILES = /\.(ts|mjs|cjs|md|json|pml|sh)$/;
const SKIPPED_FOLDERS = new Set(['node_modules', '.bin', 'cdk.out', 'bench-results', '.home']);
/** Fixtures of this check's own test, which cite what does not exist on purpose. */
const SKIPPED_PREFIXES = ['test/tools/fixtures/citations/'];

function walk(root: string, folder: string): string[] {
  return readdirSync(join(root, folder), { withFileTypes: true }).flatMap((entry) => {
    const path = `${folder}/${entry.name}`;
    if (entry.isDirectory()) return SKIPPED_FOLDERS.has(entry.name) ? [] : walk(root, path);
    return entry.isFile() && SCANNED_FILES.test(entry.name) ? [path] : [];
  });
}

/** The repository at `root`, as the check sees it. */
export function repositoryAt(root: string): Repository {
  const markdown = SCANNED_FOLDERS.flatMap((folder) => walk(root, folder)).filter((path) =>
    path.endsWith('.md'),
  );
  return {
    exists: (path) => existsSync(join(root, path)),
    markdownNames: new Set(['README.md', ...markdown.map((path) => path.split('/').pop() ?? path)]),
  };
}

/** The files the check reads at `root`. */
export function scannedFiles(root: string): CitedFile[] {
  return ['README.md', ...SCANNED_FOLDERS.flatMap((folder) => walk(root, folder))]
    .filter((path) => !SKIPPED_PREFIXES.some((prefix) => path.startsWith(prefix)))
    .filter((path) => statSync(join(root, path)).isFile())
    .map((path) => ({ path, text: readFileSync(join(root, path), 'utf8') }));
}

function main(): number {
  const root = resolve(import.meta.dirname, '..', '..');
  const files = scannedFiles(root);
  const problems = findCitationProblems(files, repositoryAt(root));
  for (const { path, line, message } of problems) console.error(`${path}:${line}: ${message}`);
  console.log(
    problems.length === 0
      ? `citations: ${files.length} files, every citation resolves`
      : `citations: ${problems.length} unresolvable, in ${new Set(problems.map((p) => p.path)).size} files`,
  );
  return problems.length === 0 ? 0 : 1;
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  process.exitCode = main();
}
