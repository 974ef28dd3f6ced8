/**
 * The mutation check's catalogue: deliberate bugs, each one source edit (`find`, which must occur
 * exactly once in `file`, replaced by `replace`), and the test files that must fail with it.
 * Each entry names the test that kills it; a mutant the named files let through is a gap in them.
 */
export interface Mutant {
  readonly name: string;
  /** What the edit breaks, in the software's terms. */
  readonly description: string;
  readonly file: string;
  readonly find: string;
  readonly replace: string;
  /** The test files run against the mutant (the ones covering the behaviour). */
  readonly tests: readonly string[];
}

export const MUTANTS: readonly Mutant[] = [
  {
    name: 'watcher-ignores-resume-point',
    description:
      "the watcher starts every session without the lease's resourceVersion: a full list each time, blocked nodes served again",
    file: 'functions/services/watch-ciliumnodes.ts',
    find: 'new WatchSession(deps, lease.resourceVersion)',
    replace: 'new WatchSession(deps, undefined)',
    tests: ['test/scenarios/watcher.test.ts'],
  },
  {
    name: 'reallocated-entry-kept',
    description:
      'a CIDR release entry survives its CIDR coming back into allocated, so its next drop skips the release delay',
    file: 'functions/core/cidr-release-plan.ts',
    find: "  if (view.allocated.has(cidr)) return { change: { cidr, to: 'dropped', reason: 'reallocated' } };\n",
    replace: '',
    tests: ['test/unit/core/cidr-release-plan.test.ts'],
  },
  {
    name: 'allocated-cidr-withdrawn',
    description:
      'the sync withdraws a withdrawing CIDR from status although the 1.20 agent lists it in allocated',
    file: 'functions/core/sync-plan.ts',
    find: 'new Set([...withheldCidrs(record)].filter((cidr) => !allocated.has(cidr)))',
    replace: 'new Set([...withheldCidrs(record)])',
    tests: ['test/unit/sync/sync-plan.test.ts', 'test/unit/sync/sync-interleavings.test.ts'],
  },
  {
    name: 'ready-without-answer',
    description: "a marked-for-release IP is taken as ready without the agent's ready-for-release answer",
    file: 'functions/core/release-plan.ts',
    find: "  if (mark.state === 'marked-for-release' && answer === 'ready-for-release') {",
    replace: "  if (mark.state === 'marked-for-release') {",
    tests: ['test/scenarios/release.test.ts'],
  },
  {
    name: 'sync-goes-backwards',
    description:
      'the sync publishes a record older than the version the CiliumNode carries (the never-backwards guard gone)',
    file: 'functions/core/sync-plan.ts',
    find: "  if (applied !== undefined && applied > record.version) return { kind: 'none', reason: 'stale' };\n",
    replace: '',
    tests: ['test/unit/sync/sync-plan.test.ts'],
  },
  {
    name: 'every-eni-ours',
    description: "ownership always true: another cluster's or a user's ENI is taken for ours",
    file: 'functions/core/eni-ownership.ts',
    find: '  return tags[ENI_TAG_KEYS.owner] === OWNER_TAG_VALUE && tags[ENI_TAG_KEYS.clusterName] === clusterName;',
    replace: '  return true;',
    tests: ['test/unit/core/eni-ownership.test.ts'],
  },
];
