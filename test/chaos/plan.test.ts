import { describe, expect, it } from 'vitest';
import { EC2_FAULTS, type Ec2FaultKind } from '../emulators/ec2/faults.ts';
import { describePlan, ec2FaultKindsOf, planRun, type RunPlan } from './plan.ts';

/**
 * The chaos plan draws the EC2 emulator's faults from its catalogue: every fault the catalogue
 * marks `drawn` is armed by the plan of some seed in 1..50, and no plan arms one it marks as not
 * drawn. A fault added to the catalogue without chaos drawing it fails here.
 */
const SEEDS = Array.from({ length: 50 }, (_, index) => index + 1);
const PLANS: readonly RunPlan[] = SEEDS.map((seed) => planRun(seed));
const CATALOGUE_KINDS = Object.keys(EC2_FAULTS) as Ec2FaultKind[];

function seedsArming(kind: Ec2FaultKind): number[] {
  return PLANS.filter((plan) => ec2FaultKindsOf(plan).has(kind)).map((plan) => plan.seed);
}

describe('the chaos plan and the EC2 fault catalogue', () => {
  it.each(CATALOGUE_KINDS.filter((kind) => EC2_FAULTS[kind].chaos.drawn))(
    '%s (marked drawn) is armed by the plan of some seed in 1..50',
    (kind) => {
      expect(seedsArming(kind)).not.toEqual([]);
    },
  );

  it.each(CATALOGUE_KINDS.filter((kind) => !EC2_FAULTS[kind].chaos.drawn))(
    '%s (marked not drawn) is armed by no plan, and the catalogue says why',
    (kind) => {
      const { chaos } = EC2_FAULTS[kind];
      expect(chaos.drawn ? '' : chaos.why).toMatch(/\w+ \w+/);
      expect(seedsArming(kind)).toEqual([]);
    },
  );

  it('arms only faults of the catalogue, and a lost answer only on a mutating call', () => {
    for (const plan of PLANS) {
      for (const kind of ec2FaultKindsOf(plan)) expect(CATALOGUE_KINDS).toContain(kind);
      const lostReads = plan.ec2Faults.filter(
        (fault) => fault.kind === 'lost-response' && /^Describe/.test(fault.action),
      );
      expect({ seed: plan.seed, lostReads }).toEqual({ seed: plan.seed, lostReads: [] });
    }
  });

  it('describes every EC2 fault a plan arms', () => {
    const plan = PLANS.find((candidate) => ec2FaultKindsOf(candidate).has('rate-limit')) as RunPlan;
    const ec2Line = describePlan(plan).find((line) => line.startsWith('ec2 faults:')) ?? '';
    expect(ec2Line).toMatch(/rate limit CreateNetworkInterface \d+\+\d+\/s/);
    for (const fault of plan.ec2Faults) {
      if ('action' in fault) expect(ec2Line).toContain(`${fault.action} ${fault.kind}`);
    }
  });
});
