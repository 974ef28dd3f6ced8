/**
 * `npm run verify`: model-checks test/model/ipam.pml with SPIN, exhaustively.
 *
 * - Every configuration of the real protocol must pass: each one prints its state count and every
 *   property it checks, with its result. Safety configurations assert the invariants at every step
 *   and check for deadlocks; liveness configurations check the never claim `served` for acceptance
 *   cycles under weak fairness (`pan -a -f`, compiled with -DNFAIR=3).
 * - Every known-wrong variant (a -D mutation switch in the model) must be REJECTED: the checker
 *   must find a counterexample, which is replayed and printed step by step.
 * - Every open hazard (a counterexample of the code as it is, outside an assumption a
 *   configuration states) must still be found, and is printed the same way.
 * Exits 1 if a property fails on the real model, a search was cut short, a mutation passes or an
 * open hazard is no longer found.
 *
 * Installs nothing: needs `spin` (Debian package spin) and a C compiler `cc` on PATH (.ci/run
 * installs both when missing). Search: exhaustive depth-first with partial-order reduction and
 * -DCOLLAPSE (lossless state compression); no bitstate or hash compaction, so a pass is a proof
 * over every reachable state (and, for liveness, every reachable cycle) of the configuration.
 *
 *   npm run verify [-- --only <name>] [--keep]
 *
 * --only NAME   run the configurations (and mutation-<name>s) whose name contains NAME
 * --keep        keep the work directory (pan sources, trails) and print its path
 */
import { spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

/** Properties asserted in the model (its `mtype` of property names) and what each one says. */
const PROPERTIES = {
  status_covers_spec:
    'status covers spec: at every CiliumNode version, every pool IP has its ENI in status with that IP (the agent never fails to find the ENI)',
  never_backwards:
    'never backwards: no sync write carries an older record version than one already written from the same table (versions of two tables have no order)',
  no_lost_update: 'no lost update: no record write drops a recorded IP that EC2 still has',
  one_eni_per_slot: 'no second ENI for the slot: EC2 never creates a second ENI, whatever crashed where',
  one_assign_per_need:
    'one assignment per need: AssignPrivateIpAddresses is called only by an invocation that counted every address EC2 holds on the ENI, also when a lease lapsed in the middle of a call',
  in_use_kept:
    'in-use IPs are kept: an IP a pod holds is never unassigned in EC2 nor (1.19) dropped from spec.ipam.pool',
  right_node_only:
    "right node only: nothing is written to a CiliumNode whose spec.instance-id is another instance's",
  derivable_assigned:
    '1.20: every address an agent can derive from status.eni.enis is assigned to that ENI in EC2',
  allocated_kept: '1.20: a CIDR in spec.ipam.pools.allocated is never withdrawn from status nor unassigned',
  served:
    'eventually served (<>[] served, weak fairness): once crashes, pod starts/stops and the table replacement are over, the pool (1.19) or status (1.20) comes to hold and keep the IPs the demand asks for (up to the slots)',
} as const;
type Property = keyof typeof PROPERTIES;

const COMMON: readonly Property[] = [
  'status_covers_spec',
  'never_backwards',
  'no_lost_update',
  'one_eni_per_slot',
  'one_assign_per_need',
  'in_use_kept',
  'right_node_only',
];

interface Configuration {
  readonly name: string;
  readonly description: string;
  readonly defines: readonly string[];
  readonly properties: readonly Property[];
  /** Checks the never claim `served` (acceptance cycles, weak fairness) instead of the assertions. */
  readonly liveness?: boolean;
}

interface Mutation {
  readonly name: string;
  readonly description: string;
  readonly defines: readonly string[];
  /** The property whose violation shows what the variant gets wrong. */
  readonly expect: Property;
  readonly liveness?: boolean;
}

const ACTORS =
  "2 allocate invocations (one also the sweep's release), 2 syncs, 1 agent, 1 fault (a crash, an agent restart or a lease lapse while its holder runs)";
const LIVENESS_ACTORS =
  "2 allocate invocations (one also the sweep's release), 1 sync, 1 agent, 1 fault (a crash, an agent restart or a lease lapse while its holder runs), 2 pod starts/stops";

/**
 * The real protocol. MAXFAULTS: crashes of our invocations, agent restarts and leases that lapse
 * while their holder still runs, together.
 */
const CONFIGURATIONS: readonly Configuration[] = [
  {
    name: 'crd-agent',
    description: `1.19 CRD agent (pool, used, release-ips handshake): ${ACTORS}, 2 pod starts/stops`,
    defines: ['AGENT=19', 'MAXFAULTS=1', 'PODOPS=2'],
    properties: COMMON,
  },
  {
    name: 'crd-agent-reuse',
    description:
      '1.19 CRD agent, 3 pod starts/stops (a pod takes an IP during its release handshake): 2 allocate invocations, 1 sync, 1 agent, 1 fault (a crash, an agent restart or a lease lapse)',
    defines: ['AGENT=19', 'SYNCS=1', 'MAXFAULTS=1', 'PODOPS=3'],
    properties: COMMON,
  },
  {
    name: 'multi-pool-agent',
    description: `1.20 multi-pool agent (pools.requested/allocated, release by dropping CIDRs): ${ACTORS}, 2 pod starts/stops`,
    defines: ['AGENT=20', 'MAXFAULTS=1', 'PODOPS=2'],
    properties: [...COMMON, 'derivable_assigned', 'allocated_kept'],
  },
  {
    name: 'multi-pool-cidr-release',
    description:
      "the 1.20 agent with our CIDR release (release-cidrs.ts), without timing assumptions: pending, withdrawing in record version W, unassigned once the CiliumNode carries W (or newer) and lacks the CIDR, re-checked, tombstoned. 2 allocate invocations (one also the sweep's release), 1 sync, 1 agent, 1 fault (a crash, an agent restart or a lease lapse), 3 pod starts/stops",
    defines: ['AGENT=20', 'CIDR_RELEASE', 'SYNCS=1', 'MAXFAULTS=1', 'PODOPS=3'],
    properties: [...COMMON, 'derivable_assigned', 'allocated_kept'],
  },
  {
    name: 'multi-pool-cidr-release-syncs',
    description:
      "the same with 2 syncs (one may hold an older record while the other publishes W): 1 allocate invocation (also the sweep's release), 2 syncs, 1 agent, 1 fault (a crash, an agent restart or a lease lapse), 2 pod starts/stops",
    defines: ['AGENT=20', 'CIDR_RELEASE', 'SYNCS=2', 'ALLOCATORS=1', 'MAXFAULTS=1', 'PODOPS=2'],
    properties: [...COMMON, 'derivable_assigned', 'allocated_kept'],
  },
  {
    name: 'foreign-ciliumnode',
    description: `the CiliumNode of our node name names another instance: ${ACTORS}`,
    defines: ['AGENT=19', 'FOREIGN', 'MAXFAULTS=1', 'PODOPS=2'],
    properties: COMMON,
  },
  {
    name: 'table-restored',
    description:
      'the node table replaced at any moment between invocations by a point-in-time restore (the item as it was at any earlier moment, stamped with the old table; or no item, when the restore point precedes it, which is the new, empty table): 1.19 CRD agent, 1 allocate invocation (also the sweep), 2 syncs, 1 agent, 1 fault (a crash, an agent restart or a lease lapse), 2 pod starts/stops',
    defines: ['AGENT=19', 'RESTORE=2', 'ALLOCATORS=1', 'MAXFAULTS=1', 'PODOPS=2'],
    properties: COMMON,
  },
  {
    name: 'table-replaced-old-syncs',
    description:
      "the node table replaced by a new one while a sync of the old deployment still runs, reading the old table, next to the new deployment's, with no agent restart while it runs (without that assumption: the open hazard old-sync-after-agent-restart): 1.19 CRD agent, 1 allocate invocation (also the sweep), 2 syncs, 1 agent, 1 fault (a crash, an agent restart or a lease lapse), 2 pod starts/stops",
    defines: [
      'AGENT=19',
      'RESTORE=1',
      'OLD_SYNCS',
      'NO_RESTART_BESIDE_OLD_SYNCS',
      'ALLOCATORS=1',
      'MAXFAULTS=1',
      'PODOPS=2',
    ],
    properties: COMMON,
  },
  {
    name: 'table-replaced-multi-pool',
    description: 'the same with the 1.20 multi-pool agent',
    defines: ['AGENT=20', 'RESTORE=1', 'ALLOCATORS=1', 'MAXFAULTS=1', 'PODOPS=2'],
    properties: [...COMMON, 'derivable_assigned', 'allocated_kept'],
  },
  {
    name: 'crd-agent-liveness',
    description: `1.19 CRD agent, eventually served, across a replacement of the table by a new, empty one: ${LIVENESS_ACTORS}`,
    defines: ['AGENT=19', 'RESTORE=1', 'SYNCS=1', 'MAXFAULTS=1', 'PODOPS=2'],
    properties: ['served'],
    liveness: true,
  },
  {
    name: 'multi-pool-agent-liveness',
    description: `1.20 multi-pool agent, eventually served: ${LIVENESS_ACTORS}`,
    defines: ['AGENT=20', 'SYNCS=1', 'MAXFAULTS=1', 'PODOPS=2'],
    properties: ['served'],
    liveness: true,
  },
];

/** Known-wrong variants; each runs in the smallest configuration that shows its failure. */
const MUTATIONS: readonly Mutation[] = [
  {
    name: 'two-place-snapshot',
    description:
      'cilium before #19923: the pool is taken from a second, later read, not the version status was written from',
    defines: ['MUT_TWO_PLACE', 'SYNCS=1', 'MAXFAULTS=0', 'PODOPS=2'],
    expect: 'status_covers_spec',
  },
  {
    name: 'spec-before-status',
    description: 'the sync writes spec.ipam.pool before status.eni.enis',
    defines: ['MUT_SPEC_FIRST', 'SYNCS=1', 'MAXFAULTS=0', 'PODOPS=2'],
    expect: 'status_covers_spec',
  },
  {
    name: 'unguarded-patch',
    description: 'CiliumNode patches without the resourceVersion test',
    defines: ['MUT_UNGUARDED', 'ALLOCATORS=1', 'MAXFAULTS=0', 'PODOPS=1'],
    expect: 'never_backwards',
  },
  {
    name: 'release-without-handshake',
    description: 'excess IPs unassigned as soon as status.ipam.used does not list them, without release-ips',
    defines: ['MUT_NO_HANDSHAKE', 'SYNCS=1', 'MAXFAULTS=0', 'PODOPS=3'],
    expect: 'in_use_kept',
  },
  {
    name: 'blind-record-put',
    description: 'node-record writes without the version condition',
    defines: ['MUT_BLIND_PUT', 'SYNCS=1', 'MAXFAULTS=1', 'PODOPS=2'],
    expect: 'no_lost_update',
  },
  {
    name: 'unassign-before-published',
    description:
      'the 1.20 CIDR release before withdrawals carried their record version: a withdrawn CIDR is unassigned as soon as status and allocated lack it. A CIDR assigned but not yet published goes pending, withdrawing and is unassigned, while a sync that read the record before the withdrawal publishes it afterwards',
    defines: [
      'AGENT=20',
      'CIDR_RELEASE',
      'MUT_UNASSIGN_BEFORE_PUBLISHED',
      'SYNCS=1',
      'MAXFAULTS=0',
      'PODOPS=2',
    ],
    expect: 'derivable_assigned',
  },
  {
    name: 'table-blind-sync',
    description:
      "the sync ignores the record-table annotation: after the table is replaced it compares the new table's versions with the old table's count on the CiliumNode, takes every record for stale and never publishes again",
    defines: ['MUT_TABLE_BLIND', 'RESTORE=1', 'ALLOCATORS=1', 'SYNCS=1', 'MAXFAULTS=0', 'PODOPS=1'],
    expect: 'served',
    liveness: true,
  },
  {
    name: 'adopt-unreconciled-record',
    description:
      'the sync before records carried their EC2 stamp: after a point-in-time restore (RESTORE=2) it adopts the restored record, older than EC2 and the CiliumNode, before any allocator has reconciled it with EC2 in the new table, and its claim drops from spec.ipam.pool an IP a pod holds',
    defines: ['MUT_ADOPT_UNRECONCILED', 'AGENT=19', 'RESTORE=2', 'SYNCS=1', 'MAXFAULTS=0', 'PODOPS=2'],
    expect: 'in_use_kept',
  },
  {
    name: 'unordered-table-generations',
    description:
      "table generations without an order (the bare table name): a sync of the deployment before the table switch still running next to the new deployment's (OLD_SYNCS) takes the new table's annotation for another table's and claims the node back with the old table's record, dropping from spec.ipam.pool an IP a pod got from the new one",
    defines: [
      'MUT_TABLES_UNORDERED',
      'AGENT=19',
      'RESTORE=1',
      'OLD_SYNCS',
      'ALLOCATORS=1',
      'MAXFAULTS=0',
      'PODOPS=2',
    ],
    expect: 'in_use_kept',
  },
  {
    name: 'no-claim',
    description:
      'the allocation calls EC2 on the record as read, without first claiming the node (no lease write before the first mutation): two invocations that read the same version both create the ENI for the slot',
    defines: ['MUT_NO_CLAIM', 'SYNCS=1', 'MAXFAULTS=0', 'PODOPS=1'],
    expect: 'one_eni_per_slot',
  },
  {
    name: 'lapsed-blind-write',
    description:
      "a holder whose lease lapsed records what EC2 confirmed without the version condition: the next holder took the node, assigned an address and recorded it; the old holder's write drops it from the record while EC2 still has it",
    defines: ['MUT_LAPSED_BLIND_WRITE', 'SYNCS=1', 'MAXFAULTS=1', 'PODOPS=1'],
    expect: 'no_lost_update',
  },
  {
    name: 'mutation-after-lapse',
    description:
      'EC2 mutations without the fence: a holder whose lease lapsed while it still ran calls EC2 after the next holder took the node, and both create an ENI for the slot',
    defines: ['MUT_UNFENCED', 'SYNCS=1', 'MAXFAULTS=1', 'PODOPS=1'],
    expect: 'one_eni_per_slot',
  },
  {
    name: 'withdraw-allocated',
    description:
      'the sync withholds every withdrawing CIDR, also one the 1.20 agent lists in spec.ipam.pools.allocated (took again before the release planner dropped the entry): it leaves status while the agent holds it',
    defines: [
      'AGENT=20',
      'CIDR_RELEASE',
      'MUT_WITHDRAW_ALLOCATED',
      'SYNCS=1',
      'ALLOCATORS=1',
      'MAXFAULTS=0',
      'PODOPS=3',
    ],
    expect: 'allocated_kept',
  },
  {
    name: 'unguarded-withdrawal',
    description:
      "CiliumNode patches without the resourceVersion test, with the 1.20 agent: a status write planned from a version whose allocated lacked a withdrawing CIDR lands after the agent took the CIDR again, so allocated_kept rests on the patch's test as much as on the filter",
    defines: [
      'AGENT=20',
      'CIDR_RELEASE',
      'MUT_UNGUARDED',
      'SYNCS=1',
      'ALLOCATORS=1',
      'MAXFAULTS=0',
      'PODOPS=3',
    ],
    expect: 'allocated_kept',
  },
  {
    name: 'zero-release-delay',
    description:
      'the timing assumption dropped: a new mark goes to marked-for-release while an answer from an aborted handshake is still on the CiliumNode',
    defines: ['ZERO_DELAY', 'SYNCS=1', 'MAXFAULTS=0', 'PODOPS=3'],
    expect: 'in_use_kept',
  },
];

/**
 * Open hazards of the code as it is: counterexamples the checker must still find on the real
 * protocol (no mutation switch), outside the assumption a configuration states for them. Each
 * stays listed until the code prevents it; then its search finds nothing, verify fails, and the
 * configuration drops its assumption.
 */
const OPEN_HAZARDS: readonly Mutation[] = [
  {
    name: 'old-sync-after-agent-restart',
    description:
      "table-replaced-old-syncs without its assumption: the agent restarts while a sync of the deployment before the table switch still runs; the restart removed the record-table annotation, so that sync no longer sees that the new table claimed the CiliumNode, claims it with the old table's record and drops from spec.ipam.pool an address a pod got from the new table",
    defines: ['AGENT=19', 'RESTORE=1', 'OLD_SYNCS', 'ALLOCATORS=1', 'MAXFAULTS=1', 'PODOPS=2'],
    expect: 'in_use_kept',
  },
];

interface PanResult {
  readonly errors: number;
  readonly states: number;
  readonly transitions: number;
  readonly seconds: number;
  readonly memoryMb: number;
  /** Why the search did not cover every state, if it did not. */
  readonly incomplete?: string;
  readonly output: string;
}

const modelSource = resolve(import.meta.dirname, 'ipam.pml');

function run(command: string, args: readonly string[], cwd: string) {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (result.error) throw new Error(`${command}: ${result.error.message}`);
  return { status: result.status ?? 1, output: `${result.stdout}${result.stderr}` };
}

/** `run` without blocking: a verifier is compiled while the previous one searches. */
function runAsync(
  command: string,
  args: readonly string[],
  cwd: string,
): Promise<{ status: number; output: string }> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, { cwd });
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.stderr.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.on('error', (error) => reject(new Error(`${command}: ${error.message}`)));
    child.on('close', (code) =>
      resolvePromise({ status: code ?? 1, output: Buffer.concat(chunks).toString('utf8') }),
    );
  });
}

function requireTool(command: string, args: readonly string[], hint: string): string {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  if (result.error || result.status !== 0) {
    console.error(`verify: ${command} is not available (${hint}); nothing was checked`);
    process.exit(1);
  }
  return `${result.stdout}${result.stderr}`.trim().split('\n')[0] ?? command;
}

function number(output: string, pattern: RegExp): number {
  const match = output.match(pattern);
  return match ? Number(match[1]) : Number.NaN;
}

/** One run of the checker: a configuration or a mutation, with its -D switches. */
interface Job {
  readonly name: string;
  readonly defines: readonly string[];
  readonly liveness: boolean;
  readonly panFlags: readonly string[];
}

/** Generates and compiles the verifier for one job in its own directory; returns the directory. */
async function build(workDir: string, job: Job): Promise<string> {
  const dir = join(workDir, job.name);
  mkdirSync(dir, { recursive: true });
  copyFileSync(modelSource, join(dir, 'ipam.pml'));
  const flags = job.defines.map((define) => `-D${define}`);
  const generate = await runAsync('spin', [...flags, '-a', 'ipam.pml'], dir);
  if (generate.status !== 0) throw new Error(`spin -a failed for ${job.name}:\n${generate.output}`);
  // Liveness: the never claim instead of -DSAFETY; pan's weak fairness (-f) handles at most 6
  // processes with its default NFAIR=2, and the model runs up to 8.
  const mode = job.liveness ? ['-DNFAIR=3'] : ['-DSAFETY'];
  const compile = await runAsync(
    'cc',
    ['-O2', ...mode, '-DCOLLAPSE', '-DMEMLIM=4096', '-o', 'pan', 'pan.c'],
    dir,
  );
  if (compile.status !== 0) throw new Error(`cc failed for ${job.name}:\n${compile.output}`);
  return dir;
}

/** Runs a compiled verifier: the exhaustive search. */
async function search(dir: string, job: Job): Promise<PanResult> {
  const started = process.hrtime.bigint();
  const verifier = await runAsync(
    './pan',
    ['-m3000000', ...(job.liveness ? ['-a', '-f'] : []), ...job.panFlags],
    dir,
  );
  const wallSeconds = Number(process.hrtime.bigint() - started) / 1e9;
  const output = verifier.output;
  const incomplete = output.includes('max search depth too small')
    ? 'the search depth limit was reached'
    : output.includes('out of memory') || output.includes('memory limit')
      ? 'out of memory'
      : undefined;
  return {
    errors: number(output, /errors: (\d+)/),
    states: number(output, /(\d+) states, stored/),
    transitions: number(output, /(\d+) transitions \(= (?:stored|visited)\+matched\)/),
    seconds: wallSeconds,
    memoryMb: number(output, /([\d.]+)\s+total actual memory usage/),
    ...(incomplete ? { incomplete } : {}),
    output,
  };
}

/**
 * The counterexample as the model's own step-by-step printout, and the property it violates: an
 * assertion's PROPERTY line, or `served` for an acceptance cycle (the replay marks where the cycle
 * that repeats forever starts).
 */
function counterexample(
  dir: string,
  defines: readonly string[],
  pan: PanResult,
): { trace: string[]; violated?: string } {
  const replay = run('spin', [...defines.map((define) => `-D${define}`), '-t', 'ipam.pml'], dir);
  const lines = replay.output
    .split('\n')
    .map((line) => line.trim())
    // the replay ends with a dump of every variable and process: keep the model's own printout
    .filter(
      (line) =>
        line.length > 0 &&
        !/^(spin:|#processes|\d+ process|[\w[\]():]+ = -?\d+$|\d+:\s+proc|Never claim moves|ltl )/.test(line),
    )
    .map((line) => (line.includes('START OF CYCLE') ? '---- from here the run repeats forever ----' : line));
  const violated =
    lines.map((line) => line.match(/^PROPERTY (\w+) VIOLATED$/)?.[1]).find(Boolean) ??
    (pan.output.includes('acceptance cycle') ? 'served' : undefined);
  return { trace: lines, ...(violated ? { violated } : {}) };
}

function figures(pan: PanResult): string {
  return `${pan.states.toLocaleString('en-US')} states, ${pan.transitions.toLocaleString('en-US')} transitions, ${pan.memoryMb.toFixed(0)} MB, ${pan.seconds.toFixed(1)} s`;
}

/** The command line: `--only NAME` selects the configurations and mutations, `--keep` keeps the work directory. */
function parseFlags(): { only?: string; keep: boolean } {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: { only: { type: 'string' }, keep: { type: 'boolean', default: false } },
  });
  return { ...(values.only === undefined ? {} : { only: values.only }), keep: values.keep };
}

function jobOf(
  name: string,
  defines: readonly string[],
  liveness: boolean,
  panFlags: readonly string[],
): Job {
  return { name, defines: liveness ? ['LIVENESS', ...defines] : defines, liveness, panFlags };
}

/** The selected configurations and mutations, each with the checker run it takes. */
function selectJobs(only: string | undefined) {
  const selected = <T extends { name: string }>(items: readonly T[], prefix = '') =>
    items.filter((item) => only === undefined || `${prefix}${item.name}`.includes(only));
  const configurations = selected(CONFIGURATIONS).map((configuration) => ({
    configuration,
    job: jobOf(configuration.name, configuration.defines, configuration.liveness === true, []),
  }));
  // -i: keep searching for shorter counterexamples, so the printed one is short (-I for the open
  // hazards: the same, approximately, since their configurations are large)
  const mutations = selected(MUTATIONS, 'mutation-').map((mutation) => ({
    mutation,
    kind: 'mutation' as const,
    job: jobOf(`mutation-${mutation.name}`, mutation.defines, mutation.liveness === true, ['-i']),
  }));
  const hazards = selected(OPEN_HAZARDS, 'hazard-').map((mutation) => ({
    mutation,
    kind: 'open hazard' as const,
    job: jobOf(`hazard-${mutation.name}`, mutation.defines, mutation.liveness === true, ['-I']),
  }));
  return { configurations, mutations: [...mutations, ...hazards] };
}

/**
 * Compiles the verifiers one at a time, in the jobs' order, starting now; `searched` awaits a
 * job's verifier and runs its search. The searches are run one at a time by the caller: on two
 * cores the next one's compilation overlaps the current search. `builds` settles once every
 * compilation ended (whether it failed or not).
 */
function buildInOrder(workDir: string, jobs: readonly Job[]) {
  let builds: Promise<unknown> = Promise.resolve();
  const built = new Map<string, Promise<string>>();
  for (const next of jobs) {
    const dir = builds.then(() => build(workDir, next));
    builds = dir.catch(() => undefined);
    built.set(next.name, dir);
  }
  const searched = async (job: Job) => {
    const dir = await (built.get(job.name) as Promise<string>);
    return { dir, pan: await search(dir, job) };
  };
  return { searched, builds };
}

/** Prints one configuration's result; returns its failure, if it has one. */
function reportConfiguration(
  configuration: Configuration,
  { liveness, defines }: Job,
  pan: PanResult,
  dir: string,
): string | undefined {
  console.log(`\n${configuration.name}: ${configuration.description}`);
  console.log(
    `  -D ${defines.join(' -D ')}${liveness ? ' (pan -a -f: acceptance cycles, weak fairness)' : ''}`,
  );
  console.log(`  ${figures(pan)}`);
  if (pan.incomplete !== undefined || Number.isNaN(pan.states)) {
    console.log(`  INCOMPLETE: ${pan.incomplete ?? pan.output}`);
    return `${configuration.name}: search incomplete (${pan.incomplete ?? 'no summary from pan'})`;
  }
  if (pan.errors === 0) {
    for (const property of configuration.properties)
      console.log(`  holds     ${property}: ${PROPERTIES[property]}`);
    if (!liveness) console.log('  holds     no deadlock: no reachable state where every actor is stuck');
    return undefined;
  }
  const { trace, violated } = counterexample(dir, defines, pan);
  for (const property of configuration.properties)
    console.log(`  ${property === violated ? 'VIOLATED' : 'unknown '}  ${property}: ${PROPERTIES[property]}`);
  console.log('  counterexample:');
  for (const line of trace) console.log(`    ${line}`);
  return `${configuration.name}: ${violated ?? 'an invalid end state'} violated`;
}

/**
 * Prints one mutation's or open hazard's result; returns its failure (no counterexample, or one
 * of another property), if any.
 */
function reportMutation(
  mutation: Mutation,
  kind: 'mutation' | 'open hazard',
  { liveness, defines }: Job,
  pan: PanResult,
  dir: string,
): string | undefined {
  console.log(`\n${kind} ${mutation.name}: ${mutation.description}`);
  console.log(`  -D ${defines.join(' -D ')}${liveness ? ' (pan -a -f)' : ''}`);
  console.log(`  ${figures(pan)}`);
  if (pan.errors === 0 || Number.isNaN(pan.errors)) {
    const outcome =
      kind === 'mutation' ? 'NOT REJECTED' : 'NOT FOUND (if the code now prevents it, drop the assumption)';
    console.log(
      `  ${outcome}${pan.incomplete ? ` (${pan.incomplete})` : ''}: the checker found no counterexample`,
    );
    return `${kind} ${mutation.name}: no counterexample`;
  }
  const { trace, violated } = counterexample(dir, defines, pan);
  console.log(
    `  ${kind === 'mutation' ? 'rejected' : 'found'}: ${violated ?? 'no property named'} (${violated ? PROPERTIES[violated as Property] : ''})`,
  );
  console.log('  counterexample (IP sets as bits: 1 = ip0, 2 = ip1, 3 = both; v = record version):');
  for (const line of trace) console.log(`    ${line}`);
  return violated === mutation.expect
    ? undefined
    : `${kind} ${mutation.name}: expected ${mutation.expect} to fail, got ${violated ?? 'no property'}`;
}

/** Runs every selected job, configurations first; returns the failures, in order. */
async function checkAll(
  workDir: string,
  { configurations, mutations }: ReturnType<typeof selectJobs>,
): Promise<string[]> {
  const failures: string[] = [];
  const { searched, builds } = buildInOrder(workDir, [
    ...configurations.map(({ job }) => job),
    ...mutations.map(({ job }) => job),
  ]);
  try {
    for (const { configuration, job } of configurations) {
      const { pan, dir } = await searched(job);
      const failure = reportConfiguration(configuration, job, pan, dir);
      if (failure !== undefined) failures.push(failure);
    }
    for (const { mutation, kind, job } of mutations) {
      const { pan, dir } = await searched(job);
      const failure = reportMutation(mutation, kind, job, pan, dir);
      if (failure !== undefined) failures.push(failure);
    }
  } finally {
    await builds;
  }
  return failures;
}

async function main(): Promise<void> {
  const flags = parseFlags();
  const spinVersion = requireTool('spin', ['-V'], 'install the Debian package spin');
  requireTool('cc', ['--version'], 'install a C compiler, e.g. the Debian package gcc');

  const workDir = mkdtempSync(join(tmpdir(), 'ipam-model-'));
  const started = Date.now();
  console.log(`model check of test/model/ipam.pml with ${spinVersion}`);
  console.log(
    'exhaustive search: depth-first, partial-order reduction, -DCOLLAPSE (no bitstate, no hash compaction)',
  );
  let failures: string[];
  try {
    failures = await checkAll(workDir, selectJobs(flags.only));
  } finally {
    if (flags.keep) console.log(`\nwork directory kept: ${workDir}`);
    else rmSync(workDir, { recursive: true, force: true });
  }

  const seconds = ((Date.now() - started) / 1000).toFixed(0);
  if (failures.length > 0) {
    console.log(`\nverify: FAILED after ${seconds} s`);
    for (const failure of failures) console.log(`  ${failure}`);
    process.exit(1);
  }
  console.log(
    `\nverify: every property holds on the model, every mutation was rejected, every open hazard was found (${seconds} s)`,
  );
}

main().catch((error: unknown) => {
  console.error(`verify: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
