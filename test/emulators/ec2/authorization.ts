import { runSimulation, type Simulation } from '@cloud-copilot/iam-simulate';
import type { ResourceRequest } from './authorization-requests.ts';

/**
 * IAM for the EC2 emulator: every call is evaluated against the identity policies of the caller
 * (found by the SigV4 access key id) with @cloud-copilot/iam-simulate, a real IAM evaluator
 * (AGPL-3.0, a devDependency of the tests only; it never enters a function bundle). A call is
 * allowed only when every resource it touches is allowed (see authorization-requests.ts).
 *
 * A resource owned by another account (a RAM-shared VPC's subnet) is a cross-account request:
 * it also needs the owner's grant, which RAM gives every participant of the share; it is
 * modelled as a resource policy allowing the caller's account.
 *
 * Evaluation is a pure function of (identity, request), so decisions are cached per identity.
 */

export interface PolicyDocument {
  readonly Version: string;
  readonly Statement: readonly unknown[] | unknown;
}

export interface IamIdentity {
  /** The principal, e.g. `arn:aws:sts::123456789012:assumed-role/AllocateRole/session`. */
  readonly principalArn: string;
  readonly policies: readonly PolicyDocument[];
}

/** An identity allowed every EC2 action: what an emulator test that is not about IAM runs as. */
export const EC2_ADMINISTRATOR: IamIdentity = {
  principalArn: 'arn:aws:iam::123456789012:user/ec2-administrator',
  policies: [{ Version: '2012-10-17', Statement: [{ Effect: 'Allow', Action: 'ec2:*', Resource: '*' }] }],
};

export interface Denial {
  readonly request: ResourceRequest;
  /** EC2's UnauthorizedOperation message. */
  readonly message: string;
}

export class IamPolicyError extends Error {
  override readonly name = 'IamPolicyError';
}

export class Ec2Authorizer {
  private readonly decisions = new Map<string, Promise<boolean>>();

  constructor(
    private readonly identity: IamIdentity,
    private readonly callerAccount: string,
  ) {}

  get principalArn(): string {
    return this.identity.principalArn;
  }

  /** The first resource request the identity may not make, or undefined when all are allowed. */
  async firstDenial(requests: readonly ResourceRequest[]): Promise<Denial | undefined> {
    const allowed = await Promise.all(requests.map((request) => this.allows(request)));
    const index = allowed.indexOf(false);
    const request = requests[index];
    if (request === undefined) return undefined;
    return {
      request,
      message: `You are not authorized to perform this operation. User: ${this.identity.principalArn} is not authorized to perform: ${request.action} on resource: ${request.resourceArn} because no identity-based policy allows the ${request.action} action`,
    };
  }

  private allows(request: ResourceRequest): Promise<boolean> {
    const key = JSON.stringify(request);
    let decision = this.decisions.get(key);
    if (decision === undefined) {
      decision = this.evaluate(request);
      this.decisions.set(key, decision);
    }
    return decision;
  }

  private async evaluate(request: ResourceRequest): Promise<boolean> {
    const crossAccount = request.resourceAccount !== this.callerAccount;
    const simulation: Simulation = {
      identityPolicies: this.identity.policies.map((policy, index) => ({
        name: `policy-${index}`,
        policy: policy as Simulation['identityPolicies'][number]['policy'],
      })),
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      ...(crossAccount ? { resourcePolicy: resourceShare(request, this.callerAccount) } : {}),
      request: {
        action: request.action,
        principal: this.identity.principalArn,
        resource: { resource: request.resourceArn, accountId: request.resourceAccount },
        contextVariables: { ...request.context },
      },
    };
    const result = await runSimulation(simulation, {});
    if (result.resultType === 'error') {
      throw new IamPolicyError(
        `IAM simulation of ${request.action} failed: ${JSON.stringify(result.errors)}`,
      );
    }
    return result.overallResult === 'Allowed';
  }
}

/** What a RAM share grants a participant account on a shared resource. */
function resourceShare(request: ResourceRequest, participantAccount: string) {
  return {
    Version: '2012-10-17',
    Statement: [
      {
        Effect: 'Allow',
        Principal: { AWS: `arn:aws:iam::${participantAccount}:root` },
        Action: request.action,
        Resource: request.resourceArn,
      },
    ],
  };
}
