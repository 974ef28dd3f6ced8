import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * Keeps the model honest: every step of test/model/ipam.pml is listed in mapping.json, every
 * listed step is in the model, and every function a step names is still declared in its file
 * (renamed or removed code fails here, and the step's model text must be reviewed with it).
 */

interface MappedStep {
  readonly step: string;
  readonly model: string;
  readonly functions?: readonly string[];
  readonly cilium?: string;
}

const root = resolve(import.meta.dirname, '../..');
const mapping = JSON.parse(readFileSync(resolve(import.meta.dirname, 'mapping.json'), 'utf8')) as {
  steps: MappedStep[];
};
const model = readFileSync(resolve(import.meta.dirname, 'ipam.pml'), 'utf8');

/** `[step-id]` labels in the model's comments. */
function modelSteps(source: string): Set<string> {
  return new Set([...source.matchAll(/\[([a-z0-9]+(?:-[a-z0-9]+)+)\]/g)].map((match) => match[1] as string));
}

/** Names declared in a TypeScript file: functions, classes, `Class.method`, and `const f = () =>`. */
function declaredNames(path: string): Set<string> {
  const source = ts.createSourceFile(path, readFileSync(path, 'utf8'), ts.ScriptTarget.Latest, true);
  const names = new Set<string>();
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionDeclaration(node) && node.name && node.body) names.add(node.name.text);
    if (ts.isClassDeclaration(node) && node.name) {
      const className = node.name.text;
      names.add(className);
      for (const member of node.members) {
        if ((ts.isMethodDeclaration(member) || ts.isPropertyDeclaration(member)) && member.name) {
          if (ts.isIdentifier(member.name) || ts.isPrivateIdentifier(member.name))
            names.add(`${className}.${member.name.text}`);
        }
      }
    }
    if (
      ts.isVariableDeclaration(node) &&
      ts.isIdentifier(node.name) &&
      node.initializer &&
      (ts.isArrowFunction(node.initializer) || ts.isFunctionExpression(node.initializer))
    ) {
      names.add(node.name.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return names;
}

const references = mapping.steps.flatMap((entry) =>
  (entry.functions ?? []).map((reference) => {
    const [file, name] = reference.split('#') as [string, string | undefined];
    return { step: entry.step, reference, file, name };
  }),
);

describe('the model of the protocol (test/model/ipam.pml) and the code it describes', () => {
  it('lists every step of the model in mapping.json, and nothing else', () => {
    const mapped = mapping.steps.map((entry) => entry.step);
    expect(new Set(mapped).size).toBe(mapped.length);
    expect([...modelSteps(model)].sort()).toEqual([...mapped].sort());
  });

  it('names the code (or, for the agent, the cilium source) behind every step', () => {
    for (const entry of mapping.steps) {
      expect(entry.model.length, entry.step).toBeGreaterThan(0);
      expect((entry.functions?.length ?? 0) > 0 || entry.cilium !== undefined, entry.step).toBe(true);
    }
  });

  it.each(references)('$step: $reference is declared', ({ file, name }) => {
    expect(file.startsWith('functions/'), `${file} must be under functions/`).toBe(true);
    expect(name, 'a reference is file#name').toBeDefined();
    expect([...declaredNames(resolve(root, file))]).toContain(name);
  });

  it('finds a renamed function (the check can fail)', () => {
    const names = declaredNames(resolve(root, 'functions/services/sync-node.ts'));
    expect(names.has('syncNode')).toBe(true);
    expect(names.has('syncNodeRenamed')).toBe(false);
  });
});
