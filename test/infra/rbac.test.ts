import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { CILIUMNODE_READER, CILIUMNODE_WRITER, KUBERNETES_GROUPS } from '../../infra/kubernetes-access.ts';
import { RBAC_MANIFEST_PATH, renderRbacManifest } from '../../infra/rbac.ts';

describe('the RBAC manifest', () => {
  it('is exactly what npm run rbac renders from infra/kubernetes-access.ts', () => {
    expect(readFileSync(RBAC_MANIFEST_PATH, 'utf8')).toBe(renderRbacManifest());
  });

  it('binds each group to a ClusterRole of its own rules, and grants no verb the functions do not use', () => {
    const objects = parseAllDocuments(renderRbacManifest()).map((document) => document.toJS());
    for (const group of KUBERNETES_GROUPS) {
      const role = objects.find((o) => o.kind === 'ClusterRole' && o.metadata.name === group.name);
      const binding = objects.find((o) => o.kind === 'ClusterRoleBinding' && o.metadata.name === group.name);
      expect(role.rules).toEqual(
        group.rules.map(({ apiGroups, resources, verbs }) => ({ apiGroups, resources, verbs })),
      );
      expect(binding.roleRef).toMatchObject({ kind: 'ClusterRole', name: group.name });
      expect(binding.subjects).toEqual([
        { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: group.name },
      ]);
    }
    const verbs = (rules: typeof CILIUMNODE_READER.rules) => rules.flatMap((rule) => rule.verbs);
    expect(new Set(verbs(CILIUMNODE_READER.rules))).toEqual(new Set(['get', 'list']));
    expect(verbs(KUBERNETES_GROUPS.flatMap((group) => group.rules))).not.toContain('watch');
    expect(
      CILIUMNODE_WRITER.rules.find((rule) => rule.resources.includes('ciliumnodes/status'))?.verbs,
    ).toEqual(['patch']);
  });
});
