import type { RequestInfo } from './faults.ts';
import { isJsonObject } from './json.ts';
import { GROUP, RESOURCE } from './status.ts';

/**
 * Authentication and RBAC as kube-apiserver applies them: a bearer token names an identity (a user
 * and its groups, as EKS maps an IAM role through an access entry); the identity may make a
 * request when a binding binds it (user or group) to a role with a rule matching the API group,
 * the resource, the verb and, when the rule lists `resourceNames`, the object's name.
 *
 * - cluster-scoped `ciliumnodes` (and `ciliumnodes/status`): ClusterRoleBindings to ClusterRoles;
 * - namespaced core `configmaps`: ClusterRoleBindings (every namespace), and RoleBindings of that
 *   namespace to a Role of that namespace or to a ClusterRole (granted in that namespace only).
 *
 * A rule with `resourceNames` never matches a request without a name (a list, a create), as on the
 * real server. `system:masters` is allowed everything; discovery is allowed to every authenticated
 * identity (the `system:discovery` ClusterRole).
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
  /** Empty: every object. */
  readonly resourceNames: readonly string[];
}

interface Binding {
  readonly name: string;
  readonly roleRef: { readonly kind: 'ClusterRole' | 'Role'; readonly name: string };
  /** The RoleBinding's namespace; absent for a ClusterRoleBinding. */
  readonly namespace?: string;
  readonly subjects: readonly { kind: string; name: string }[];
}

/** What an authorization question names (a SelfSubjectAccessReview's `resourceAttributes`). */
export interface AuthorizationTarget {
  readonly apiGroup: string;
  /** The resource, with `/<subresource>` when one is named. */
  readonly resource: string;
  readonly verb: string;
  readonly name?: string | undefined;
  readonly namespace?: string | undefined;
}

export class RbacError extends Error {
  override readonly name = 'RbacError';
}

export class RbacAuthorizer {
  private readonly clusterRoles = new Map<string, Rule[]>();
  /** Roles by `namespace/name`. */
  private readonly roles = new Map<string, Rule[]>();
  private readonly bindings: Binding[] = [];

  /** `objects`: ClusterRoles, ClusterRoleBindings, Roles and RoleBindings as `kubectl apply` takes them. */
  constructor(objects: readonly unknown[] = []) {
    for (const object of objects) this.add(object);
  }

  allows(identity: Identity, request: RequestInfo): boolean {
    if (request.verb === 'discovery') return true;
    // Every authenticated identity may ask who it is and what it may do (`system:basic-user`).
    if (request.resource === 'selfsubjectaccessreviews' || request.resource === 'selfsubjectreviews')
      return true;
    const target =
      request.resource === 'configmaps'
        ? { apiGroup: '', resource: 'configmaps', namespace: request.namespace }
        : { apiGroup: GROUP, resource: request.subresource === 'status' ? `${RESOURCE}/status` : RESOURCE };
    return this.authorize(identity, { ...target, verb: request.verb, name: request.name }) !== undefined;
  }

  /**
   * Whether `identity` may `verb` the target (`resource` with its subresource, e.g.
   * `ciliumnodes/status`; `namespace` absent for a cluster-scoped one): the reason kube-apiserver's
   * RBAC authorizer gives (`RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "r" to Group
   * "g"`; empty for `system:masters`, allowed before RBAC is asked), or undefined when denied.
   */
  authorize(identity: Identity, target: AuthorizationTarget): string | undefined {
    if (identity.groups.includes('system:masters')) return '';
    for (const binding of this.bindings) {
      const subject = binding.subjects.find((candidate) => bindsTo(candidate, identity));
      if (subject === undefined) continue;
      if (binding.namespace !== undefined && binding.namespace !== target.namespace) continue;
      const granted = this.rulesOf(binding).some(
        (rule) =>
          matchesAny(rule.apiGroups, target.apiGroup) &&
          matchesAny(rule.resources, target.resource) &&
          matchesAny(rule.verbs, target.verb) &&
          (rule.resourceNames.length === 0 ||
            (target.name !== undefined && rule.resourceNames.includes(target.name))),
      );
      if (!granted) continue;
      const bindingName =
        binding.namespace === undefined
          ? `ClusterRoleBinding ${JSON.stringify(binding.name)}`
          : `RoleBinding ${JSON.stringify(`${binding.name}/${binding.namespace}`)}`;
      return `RBAC: allowed by ${bindingName} of ${binding.roleRef.kind} ${JSON.stringify(binding.roleRef.name)} to ${subject.kind} ${JSON.stringify(subject.name)}`;
    }
    return undefined;
  }

  private rulesOf(binding: Binding): Rule[] {
    if (binding.roleRef.kind === 'ClusterRole') return this.clusterRoles.get(binding.roleRef.name) ?? [];
    return this.roles.get(`${binding.namespace}/${binding.roleRef.name}`) ?? [];
  }

  private add(object: unknown): void {
    if (!isJsonObject(object) || !isJsonObject(object.metadata)) throw new RbacError('not an RBAC object');
    const name = String(object.metadata.name);
    const namespace = typeof object.metadata.namespace === 'string' ? object.metadata.namespace : undefined;
    const rules = () => (Array.isArray(object.rules) ? object.rules : []).map((rule) => ruleOf(name, rule));
    const subjects = () =>
      (Array.isArray(object.subjects) ? object.subjects : []).map((subject) => ({
        kind: String(isJsonObject(subject) ? subject.kind : ''),
        name: String(isJsonObject(subject) ? subject.name : ''),
      }));
    const roleRef = isJsonObject(object.roleRef) ? object.roleRef : {};
    switch (object.kind) {
      case 'ClusterRole':
        this.clusterRoles.set(name, rules());
        return;
      case 'Role':
        if (namespace === undefined) throw new RbacError(`${name}: a Role needs metadata.namespace`);
        this.roles.set(`${namespace}/${name}`, rules());
        return;
      case 'ClusterRoleBinding':
        if (roleRef.kind !== 'ClusterRole') throw new RbacError(`${name}: roleRef must name a ClusterRole`);
        this.bindings.push({
          name,
          roleRef: { kind: 'ClusterRole', name: String(roleRef.name) },
          subjects: subjects(),
        });
        return;
      case 'RoleBinding':
        if (namespace === undefined) throw new RbacError(`${name}: a RoleBinding needs metadata.namespace`);
        if (roleRef.kind !== 'ClusterRole' && roleRef.kind !== 'Role') {
          throw new RbacError(`${name}: roleRef must name a Role or a ClusterRole`);
        }
        this.bindings.push({
          name,
          roleRef: { kind: roleRef.kind, name: String(roleRef.name) },
          namespace,
          subjects: subjects(),
        });
        return;
      default:
        throw new RbacError(
          `${name}: only ClusterRole, ClusterRoleBinding, Role and RoleBinding are modelled, got ${object.kind}`,
        );
    }
  }
}

function ruleOf(roleName: string, rule: unknown): Rule {
  const list = (field: string, optional = false): string[] => {
    const value = isJsonObject(rule) ? rule[field] : undefined;
    if (optional && value === undefined) return [];
    if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) {
      throw new RbacError(`${roleName}: rule.${field} must be a list of strings`);
    }
    return value;
  };
  return {
    apiGroups: list('apiGroups'),
    resources: list('resources'),
    verbs: list('verbs'),
    resourceNames: list('resourceNames', true),
  };
}

function bindsTo(subject: { kind: string; name: string }, identity: Identity): boolean {
  if (subject.kind === 'User') return subject.name === identity.user;
  if (subject.kind === 'Group') return identity.groups.includes(subject.name);
  return false;
}

function matchesAny(patterns: readonly string[], value: string): boolean {
  return patterns.includes('*') || patterns.includes(value);
}
