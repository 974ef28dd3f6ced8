import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findCitationProblems, repositoryAt, scannedFiles } from './check-citations.ts';

const root = resolve(import.meta.dirname, '..', '..');
const repository = repositoryAt(root);

function fixture(name: string) {
  const path = `test/tools/fixtures/citations/${name}`;
  return { path, text: readFileSync(join(root, path), 'utf8') };
}

describe('the citation check', () => {
  it('passes a note whose citations are repository files, shipped READMEs, URLs and other repositories', () => {
    expect(findCitationProblems([fixture('passing.md')], repository)).toEqual([]);
  });

  it('fails a note citing unshipped notes, source labels, sections and missing files, naming file:line', () => {
    const problems = findCitationProblems([fixture('failing.md')], repository);
    expect(problems.map(({ path, line }) => `${path}:${line}`)).toEqual(
      [3, 3, 4, 5, 6].map((line) => `test/tools/fixtures/citations/failing.md:${line}`),
    );
    expect(problems.map(({ message }) => message)).toEqual([
      expect.stringContaining('a source label of a note the repository does not ship'),
      expect.stringContaining('a section (§) of no shipped note'),
      expect.stringContaining('a note the repository does not ship'),
      expect.stringMatching(/no-such-file\.ts, which does not exist$/),
      expect.stringContaining('which does not exist (test/DESIGN'),
    ]);
  });

  it('finds nothing to fix in the repository itself', () => {
    expect(findCitationProblems(scannedFiles(root), repository)).toEqual([]);
  });
});
