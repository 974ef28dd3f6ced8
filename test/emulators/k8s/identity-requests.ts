import type { IncomingHttpHeaders } from 'node:http';
import type { RequestInfo } from './faults.ts';
import { isJsonObject } from './json.ts';
import type { Identity, RbacAuthorizer } from './rbac.ts';
import { badRequest, forbiddenToImpersonate, RESOURCE } from './status.ts';

/**
 * Who a request acts as, and the two questions an identity may always ask about itself, as
 * kube-apiserver v1.36 answers them:
 *
 * - impersonation (`Impersonate-User`, `Impersonate-Group`): the requester needs the `impersonate`
 *   verb on `users` (that name) and on `groups` (each name) in the core API group, which only
 *   `system:masters` has here (rbac.yaml grants it to no function group); refused, it is 403 with
 *   the constrained-impersonation check's message (`cannot impersonate-on:user-info:<verb>`).
 *   Honoured, the request is authorized as the impersonated user, its groups and
 *   `system:authenticated`;
 * - `SelfSubjectAccessReview` (`kubectl auth can-i`): whether RBAC allows the asker the verb on the
 *   resource, with the authorizer's reason;
 * - `SelfSubjectReview` (`kubectl auth whoami`): the asker's user and groups, `system:authenticated`
 *   among them.
 */

const AUTHENTICATED = 'system:authenticated';

/** The identity the request acts as: the authenticated one, or the one it impersonates. */
export function actingIdentity(
  identity: Identity,
  headers: IncomingHttpHeaders,
  rbac: RbacAuthorizer,
  info: RequestInfo | undefined,
): Identity {
  const user = headerValues(headers['impersonate-user'])[0];
  const groups = headerValues(headers['impersonate-group']);
  if (user === undefined) {
    if (groups.length > 0) throw badRequest(`requested [${groups.join(' ')}] without impersonating a user`);
    return identity;
  }
  const allowed =
    rbac.authorize(identity, { apiGroup: '', resource: 'users', verb: 'impersonate', name: user }) !==
      undefined &&
    groups.every(
      (group) =>
        rbac.authorize(identity, { apiGroup: '', resource: 'groups', verb: 'impersonate', name: group }) !==
        undefined,
    );
  if (!allowed) {
    const resource = info?.resource ?? (info?.subresource === 'status' ? `${RESOURCE}/status` : RESOURCE);
    throw forbiddenToImpersonate(identity.user, info?.verb ?? 'get', resource, info?.name);
  }
  return { user, groups: [...new Set([...groups, AUTHENTICATED])] };
}

function headerValues(value: string | string[] | undefined): string[] {
  if (value === undefined) return [];
  return (Array.isArray(value) ? value : [value]).filter((entry) => entry !== '');
}

/** The groups the server reports for an identity: its own and `system:authenticated`. */
function reportedGroups(identity: Identity): string[] {
  return [...new Set([...identity.groups, AUTHENTICATED])];
}

/** `POST selfsubjectreviews`: who the asker is. */
export function selfSubjectReview(identity: Identity): unknown {
  return {
    kind: 'SelfSubjectReview',
    apiVersion: 'authentication.k8s.io/v1',
    metadata: {},
    status: { userInfo: { username: identity.user, groups: reportedGroups(identity) } },
  };
}

const RESOURCE_ATTRIBUTES = [
  'namespace',
  'verb',
  'group',
  'version',
  'resource',
  'subresource',
  'name',
] as const;

/** `POST selfsubjectaccessreviews`: whether RBAC lets the asker do what `spec.resourceAttributes` names. */
export function selfSubjectAccessReview(identity: Identity, rbac: RbacAuthorizer, body: unknown): unknown {
  const spec = isJsonObject(body) && isJsonObject(body.spec) ? body.spec : {};
  const given = isJsonObject(spec.resourceAttributes) ? spec.resourceAttributes : undefined;
  if (given === undefined) {
    throw badRequest('spec.resourceAttributes is required: non-resource questions are not emulated');
  }
  // As the server echoes them: the empty and the unknown fields dropped.
  const attributes = Object.fromEntries(
    RESOURCE_ATTRIBUTES.flatMap((field) =>
      typeof given[field] === 'string' && given[field] !== '' ? [[field, given[field]]] : [],
    ),
  ) as Partial<Record<(typeof RESOURCE_ATTRIBUTES)[number], string>>;
  const reason = rbac.authorize(reportedIdentity(identity), {
    apiGroup: attributes.group ?? '',
    resource:
      attributes.subresource === undefined
        ? (attributes.resource ?? '')
        : `${attributes.resource ?? ''}/${attributes.subresource}`,
    verb: attributes.verb ?? '',
    name: attributes.name,
    namespace: attributes.namespace,
  });
  return {
    kind: 'SelfSubjectAccessReview',
    apiVersion: 'authorization.k8s.io/v1',
    metadata: {},
    spec: { resourceAttributes: attributes },
    status:
      reason === undefined ? { allowed: false } : { allowed: true, ...(reason === '' ? {} : { reason }) },
  };
}

function reportedIdentity(identity: Identity): Identity {
  return { user: identity.user, groups: reportedGroups(identity) };
}
