import { readFileSync } from 'node:fs';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { buildApp, cdkJsonContext } from '../../infra/build-app.ts';
import {
  CILIUMNODE_ALLOCATOR,
  CILIUMNODE_WATCHER,
  CILIUMNODE_WRITER,
  FUNCTION_KUBERNETES_GROUPS,
  KUBERNETES_GROUPS,
} from '../../infra/kubernetes-access.ts';
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
    const verbs = (rules: typeof CILIUMNODE_WATCHER.rules) => rules.flatMap((rule) => rule.verbs);
    // The watcher only lists and watches; it is the only group that may watch.
    expect(CILIUMNODE_WATCHER.rules).toEqual([
      expect.objectContaining({
        apiGroups: ['cilium.io'],
        resources: ['ciliumnodes'],
        verbs: ['list', 'watch'],
      }),
    ]);
    expect(CILIUMNODE_WATCHER.ciliumConfigRules).toBeUndefined();
    expect(
      verbs(
        KUBERNETES_GROUPS.filter((group) => group !== CILIUMNODE_WATCHER).flatMap((group) => group.rules),
      ),
    ).not.toContain('watch');
    // Allocate and sweep publish what they wrote: the sync's verbs, no more (no update, delete).
    expect(new Set(verbs(CILIUMNODE_ALLOCATOR.rules))).toEqual(new Set(['get', 'list', 'create', 'patch']));
    expect(CILIUMNODE_ALLOCATOR.rules.map(({ resources, verbs }) => ({ resources, verbs }))).toEqual(
      CILIUMNODE_WRITER.rules.map(({ resources, verbs }) => ({ resources, verbs })),
    );
    expect(
      CILIUMNODE_WRITER.rules.find((rule) => rule.resources.includes('ciliumnodes/status'))?.verbs,
    ).toEqual(['patch']);
  });

  it('grants the allocator group get on cilium-config only, by name, in its namespace, through a Role', () => {
    const objects = parseAllDocuments(renderRbacManifest()).map((document) => document.toJS());
    const namespaced = objects.filter((o) => o.kind === 'Role' || o.kind === 'RoleBinding');
    expect(namespaced.map((o) => `${o.kind} ${o.metadata.namespace}/${o.metadata.name}`)).toEqual([
      'Role kube-system/serverless-eni-ipam-allocator',
      'RoleBinding kube-system/serverless-eni-ipam-allocator',
    ]);
    expect(namespaced[0].rules).toEqual([
      { apiGroups: [''], resources: ['configmaps'], resourceNames: ['cilium-config'], verbs: ['get'] },
    ]);
    expect(namespaced[1]).toMatchObject({
      roleRef: { kind: 'Role', name: 'serverless-eni-ipam-allocator' },
      subjects: [{ kind: 'Group', name: 'serverless-eni-ipam-allocator' }],
    });
    // No ClusterRole mentions ConfigMaps; the writer (sync) and the watcher read none.
    const clusterRules = objects.filter((o) => o.kind === 'ClusterRole').flatMap((o) => o.rules);
    expect(clusterRules.flatMap((rule: { resources: string[] }) => rule.resources)).not.toContain(
      'configmaps',
    );
    expect(CILIUMNODE_WRITER.ciliumConfigRules).toBeUndefined();
    expect(FUNCTION_KUBERNETES_GROUPS.Allocate.ciliumConfigRules).toBeDefined();
    expect(FUNCTION_KUBERNETES_GROUPS.Sweep.ciliumConfigRules).toBeDefined();
  });

  it('names the ConfigMap the context keys name, in the manifest and in the functions that read it', () => {
    const location = { namespace: 'cilium', name: 'cilium-agent-config' };
    const manifest = parseAllDocuments(renderRbacManifest(KUBERNETES_GROUPS, location)).map((d) => d.toJS());
    expect(manifest.find((o) => o.kind === 'Role')).toMatchObject({
      metadata: { namespace: 'cilium' },
      rules: [{ resourceNames: ['cilium-agent-config'] }],
    });
    const app = new App({
      context: {
        ...cdkJsonContext(),
        'eni-ipam:ciliumConfigNamespace': location.namespace,
        'eni-ipam:ciliumConfigName': location.name,
        'aws:cdk:bundling-stacks': [],
      },
    });
    const template = Template.fromStack(buildApp(app).stack);
    const environments = Object.fromEntries(
      Object.entries(template.findResources('AWS::Lambda::Function')).map(([id, fn]) => [
        id.replace(/Function[0-9A-F]{8}$/, ''),
        fn.Properties.Environment.Variables,
      ]),
    );
    for (const reader of ['Allocate', 'Sweep']) {
      expect(environments[reader]).toMatchObject({
        CILIUM_CONFIG_NAMESPACE: 'cilium',
        CILIUM_CONFIG_NAME: 'cilium-agent-config',
      });
    }
    expect(environments.Sync?.CILIUM_CONFIG_NAME).toBeUndefined();
  });

  it('refuses a ConfigMap namespace that is not a Kubernetes name, naming the key', () => {
    const app = new App({
      context: { ...cdkJsonContext(), 'eni-ipam:ciliumConfigNamespace': 'Kube System' },
    });
    expect(() => buildApp(app)).toThrow('eni-ipam:ciliumConfigNamespace');
  });
});
