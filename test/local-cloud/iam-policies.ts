import type { PolicyDocument } from '../emulators/ec2/authorization.ts';
import {
  type CloudFormationResource,
  type CloudFormationTemplate,
  type LocalValues,
  resolveTokens,
  TemplateError,
} from './template.ts';

/**
 * The identity policies of the template's roles, as IAM would hold them after the deployment:
 * every `AWS::IAM::Policy` attached to the role (`Roles: [{Ref}]`) and the role's inline
 * `Policies`, with every intrinsic resolved against the local values. Resources the local cloud
 * does not run (log groups, queues) resolve to a stand-in ARN naming their logical id: no stand-in
 * authorizes those services, and the EC2 statements never name them.
 */
export function rolePolicies(
  template: CloudFormationTemplate,
  local: LocalValues,
): ReadonlyMap<string, readonly PolicyDocument[]> {
  const resolving: LocalValues = {
    ...local,
    getAtt: (logicalId, attribute) =>
      local.getAtt(logicalId, attribute) ??
      (attribute.endsWith('Arn') && template.Resources[logicalId] !== undefined
        ? `arn:aws:local:${local.pseudo['AWS::Region']}:${local.pseudo['AWS::AccountId']}:${logicalId}/${attribute}`
        : undefined),
  };
  const policies = new Map<string, PolicyDocument[]>();
  const add = (roleLogicalId: string, document: unknown, path: string) => {
    const resolved = resolveTokens(document, resolving, path) as PolicyDocument;
    policies.set(roleLogicalId, [...(policies.get(roleLogicalId) ?? []), resolved]);
  };
  for (const [logicalId, resource] of Object.entries(template.Resources)) {
    if (resource.Type === 'AWS::IAM::Role') {
      for (const [index, inline] of inlinePolicies(resource).entries()) {
        add(logicalId, inline, `${logicalId}.Policies[${index}]`);
      }
    }
    if (resource.Type !== 'AWS::IAM::Policy') continue;
    const roles = (resource.Properties?.Roles ?? []) as unknown[];
    for (const role of roles) {
      const roleLogicalId = (role as { Ref?: unknown }).Ref;
      if (typeof roleLogicalId !== 'string') {
        throw new TemplateError(`${logicalId}.Roles: only roles of this stack ({Ref}) are supported`);
      }
      add(roleLogicalId, resource.Properties?.PolicyDocument, `${logicalId}.PolicyDocument`);
    }
  }
  return policies;
}

/** The logical id of the role a function runs as (`Role: {Fn::GetAtt: [RoleId, Arn]}`). */
export function functionRoleLogicalId(template: CloudFormationTemplate, functionLogicalId: string): string {
  const role = template.Resources[functionLogicalId]?.Properties?.Role as
    | { 'Fn::GetAtt'?: unknown }
    | undefined;
  const getAtt = role?.['Fn::GetAtt'];
  if (!Array.isArray(getAtt) || typeof getAtt[0] !== 'string' || getAtt[1] !== 'Arn') {
    throw new TemplateError(`${functionLogicalId}.Role is not the Arn of a role in this stack`);
  }
  return getAtt[0];
}

function inlinePolicies(resource: CloudFormationResource): unknown[] {
  const policies = (resource.Properties?.Policies ?? []) as { PolicyDocument?: unknown }[];
  return policies.map((policy) => policy.PolicyDocument);
}
