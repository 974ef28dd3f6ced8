import type { RequestInfo } from './faults.ts';
import { isJsonObject } from './json.ts';
import { GROUP, RESOURCE } from './status.ts';

/**
 * Authentication and RBAC as kube-apiserver applies them to `ciliumnodes`: a bearer token names
 * an identity (a user and its groups, as EKS maps an IAM role through an access entry); the
 * identity may make a request when a ClusterRoleBinding binds it (user or group) to a ClusterRole
 * with a rule matching the API group, the resource (`ciliumnodes` or `ciliumnodes/status`) and the
 * verb. `system:masters` is allowed everything, as on a real cluster; discovery is allowed to
 * every authenticated identity (the `system:discovery` ClusterRole).
 */

export interface Identity {
  readonly user: string;
  readonly groups: readonly string[];
}

/** The identity the default kubeconfig token carries: a cluster admin. */
export const ADMIN_IDENTITY: Identity = { user: 'kubernetes-admin', groups: ['system:masters'] };

interface Rule {
  readonly apiGroups: readonly string[];
  readonly resources: readonly string[];
  readonly verbs: readonly string[];
}

interface Binding {
  readonly roleName: string;
  readonly subjects: readonly { kind: string; name: string }[];
}

export class RbacError extends Error {
  override readonly name = 'RbacError';
}

export class RbacAuthorizer {
  private readonly roles = new Map<string, Rule[]>();
  private readonly bindings: Binding[] = [];

  /** `objects`: ClusterRoles and ClusterRoleBindings as `kubectl apply` takes them. */
  constructor(objects: readonly unknown[] = []) {
    for (const object of objects) this.add(object);
  }

  allows(identity: Identity, request: RequestInfo): boolean {
    if (identity.groups.includes('system:masters') || request.verb === 'discovery') return true;
    const resource = request.subresource === 'status' ? `${RESOURCE}/status` : RESOURCE;
    return this.bindings
      .filter((binding) => binding.subjects.some((subject) => bindsTo(subject, identity)))
      .flatMap((binding) => this.roles.get(binding.roleName) ?? [])
      .some(
        (rule) =>
          matchesAny(rule.apiGroups, GROUP) &&
          matchesAny(rule.resources, resource) &&
          matchesAny(rule.verbs, request.verb),
      );
  }

  private add(object: unknown): void {
    if (!isJsonObject(object) || !isJsonObject(object.metadata)) throw new RbacError('not an RBAC object');
    const name = String(object.metadata.name);
    if (object.kind === 'ClusterRole') {
      const rules = Array.isArray(object.rules) ? object.rules : [];
      this.roles.set(
        name,
        rules.map((rule) => ruleOf(name, rule)),
      );
    } else if (object.kind === 'ClusterRoleBinding') {
      const roleRef = isJsonObject(object.roleRef) ? object.roleRef : {};
      if (roleRef.kind !== 'ClusterRole') throw new RbacError(`${name}: roleRef must name a ClusterRole`);
      const subjects = (Array.isArray(object.subjects) ? object.subjects : []).map((subject) => ({
        kind: String(isJsonObject(subject) ? subject.kind : ''),
        name: String(isJsonObject(subject) ? subject.name : ''),
      }));
      this.bindings.push({ roleName: String(roleRef.name), subjects });
    } else {
      throw new RbacError(
        `${name}: only ClusterRole and ClusterRoleBinding are modelled, got ${object.kind}`,
      );
    }
  }
}

function ruleOf(roleName: string, rule: unknown): Rule {
  const list = (field: string): string[] => {
    const value = isJsonObject(rule) ? rule[field] : undefined;
    if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) {
      throw new RbacError(`${roleName}: rule.${field} must be a list of strings`);
    }
    return value;
  };
  return { apiGroups: list('apiGroups'), resources: list('resources'), verbs: list('verbs') };
}

function bindsTo(subject: { kind: string; name: string }, identity: Identity): boolean {
  if (subject.kind === 'User') return subject.name === identity.user;
  if (subject.kind === 'Group') return identity.groups.includes(subject.name);
  return false;
}

function matchesAny(patterns: readonly string[], value: string): boolean {
  return patterns.includes('*') || patterns.includes(value);
}
