import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/**
 * A real cilium agent's IPAM for one node, as a process: test/peers/cilium-<release>/cmd/agent-peer,
 * built by `npm run peers:build`. It runs cilium's own allocator (ipam.NewIPAM in ENI mode) on the
 * node's CiliumNode, allocates the router and health IPs and `pods` pod IPs, then takes commands; it
 * reports every outcome as one JSON object a line (test/peers/agent-report). This class keeps those
 * events, sends commands and waits for events.
 */

const BIN_DIRECTORY = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'peers', '.bin');

/** The agent releases built as peers: the newest, and the last 1.11 before the fix of the pool copy. */
export type AgentRelease = '1.20.2' | '1.11.5';

export type AgentEvent =
  | { readonly event: 'ready' }
  | {
      readonly event: 'allocated';
      readonly owner: string;
      readonly ip: string;
      readonly mac: string;
      readonly interface: string;
      readonly gateway: string;
      readonly cidrs: readonly string[] | null;
    }
  | { readonly event: 'allocation-error'; readonly owner: string; readonly error: string }
  | { readonly event: 'released'; readonly owner: string; readonly ip: string }
  | { readonly event: 'release-error'; readonly owner: string; readonly error: string }
  | { readonly event: 'restore-finished' }
  | { readonly event: 'dump'; readonly allocated: Readonly<Record<string, string>> | null }
  | { readonly event: 'command-error'; readonly error: string }
  | {
      readonly event: 'log';
      readonly level: string;
      readonly msg: string;
      readonly [field: string]: unknown;
    };

/** The binary of a release, or a clear error naming the command that builds it. */
function agentPeerBinary(release: AgentRelease): string {
  const path = join(BIN_DIRECTORY, `cilium-agent-peer-${release}`);
  if (!existsSync(path)) {
    throw new Error(
      `${path} is missing: run \`npm run peers:build\` (builds cilium's agent IPAM from Go modules)`,
    );
  }
  return path;
}

export interface AgentPeerOptions {
  readonly release: AgentRelease;
  /** A kubeconfig the agent reaches the API server with. */
  readonly kubeconfigPath: string;
  /** The CiliumNode's name. */
  readonly node: string;
  /** Pod IPs to allocate after the router and the health IP. */
  readonly pods?: number;
  /** The 1.20 agent's `--ipam-cilium-node-update-rate` (its write debounce); 1.11 fixes 15 s. */
  readonly updateRateMs?: number;
}

export class AgentPeer {
  readonly events: AgentEvent[] = [];
  /** cilium's own log (JSON on 1.20, text on 1.11), for a failure's message. */
  readonly logPath: string;
  private readonly child: ChildProcess;
  private readonly waiters = new Set<() => void>();
  private exit: string | undefined;

  constructor(readonly options: AgentPeerOptions) {
    const args = [
      `--kubeconfig=${options.kubeconfigPath}`,
      `--node=${options.node}`,
      `--pods=${options.pods ?? 0}`,
    ];
    if (options.updateRateMs !== undefined) {
      if (options.release !== '1.20.2')
        throw new Error(`cilium ${options.release} has no update-rate setting`);
      args.push(`--ciliumnode-update-rate=${options.updateRateMs}ms`);
    }
    this.logPath = join(mkdtempSync(join(tmpdir(), 'agent-peer-')), 'cilium.log');
    this.child = spawn(agentPeerBinary(options.release), args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stderr?.pipe(createWriteStream(this.logPath));
    const killOnExit = () => this.child.kill('SIGKILL');
    process.once('exit', killOnExit);
    this.child.once('exit', (code, signal) => {
      process.removeListener('exit', killOnExit);
      this.exit = `agent-peer ${options.release} for ${options.node} exited (${signal ?? code})`;
      this.notify();
    });
    createInterface({ input: this.child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
      this.events.push(JSON.parse(line) as AgentEvent);
      this.notify();
    });
  }

  /** Sends one command line (`allocate <owner>`, `release <owner>`, `restore-finished`, `dump`). */
  send(command: string): void {
    this.child.stdin?.write(`${command}\n`);
  }

  /** Every allocation or release the agent failed, and every error it logged. */
  errors(): AgentEvent[] {
    return this.events.filter(
      (event) =>
        event.event === 'allocation-error' ||
        event.event === 'release-error' ||
        event.event === 'command-error' ||
        (event.event === 'log' && ['error', 'fatal', 'panic'].includes(event.level)),
    );
  }

  /** The IP each owner holds now, from the events. */
  holdings(): Map<string, string> {
    const held = new Map<string, string>();
    for (const event of this.events) {
      if (event.event === 'allocated') held.set(event.owner, event.ip);
      if (event.event === 'released') held.delete(event.owner);
    }
    return held;
  }

  /** Resolves with the first event (from index `from`) that matches; rejects after `timeoutMs` or if the process exits. */
  async waitFor(
    what: string,
    matches: (event: AgentEvent) => boolean,
    options: { from?: number; timeoutMs?: number } = {},
  ): Promise<AgentEvent> {
    const deadline = Date.now() + (options.timeoutMs ?? 60_000);
    for (;;) {
      const found = this.events.slice(options.from ?? 0).find(matches);
      if (found !== undefined) return found;
      if (this.exit !== undefined) throw new Error(`${this.exit} before ${what}; see ${this.logPath}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; see ${this.logPath}`);
      await new Promise<void>((wake) => {
        const timer = setTimeout(wake, left);
        this.waiters.add(() => {
          clearTimeout(timer);
          wake();
        });
      });
    }
  }

  /** Closes stdin and waits for the process to end (killing it after 5 s). */
  async stop(): Promise<void> {
    if (this.exit !== undefined) return;
    const exited = new Promise<void>((done) => this.child.once('exit', () => done()));
    this.child.stdin?.end();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  }

  private notify(): void {
    const waiting = [...this.waiters];
    this.waiters.clear();
    for (const wake of waiting) wake();
  }
}
