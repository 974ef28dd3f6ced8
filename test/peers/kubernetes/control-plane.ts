import { type ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import {
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { type HttpsJsonClient, httpsJsonClient } from './https-json.ts';

/**
 * A real Kubernetes control plane on loopback: etcd and kube-apiserver built from Go modules by
 * `npm run peers:build` (test/peers/build.sh), started as sigs.k8s.io/controller-runtime's envtest
 * starts them (its control plane flags), with RBAC authorization, no anonymous access, and one static
 * bearer token per identity (`--token-auth-file`, the CSV `token,user,uid,"group1,group2"`).
 *
 * Contract: every listener binds 127.0.0.1; nothing outside 127.0.0.0/8 is contacted. The serving
 * certificate is kube-apiserver's own, generated into its cert dir for 127.0.0.1; clients
 * trust `caPem` (that file). `stop()` kills both processes and removes the work directory.
 */

const BIN_DIRECTORY = resolve(dirname(fileURLToPath(import.meta.url)), '..', '.bin');

interface Identity {
  readonly user: string;
  readonly groups: readonly string[];
}

export interface ControlPlaneOptions {
  /** Bearer token → identity. An admin (`system:masters`) identity is always added for fixtures. */
  readonly identities?: Readonly<Record<string, Identity>>;
  /** How often etcd's history is compacted (kube-apiserver's `--etcd-compaction-interval`); default 5m. */
  readonly compactionInterval?: string;
  /**
   * kube-apiserver's watch cache (default on, as in EKS). It keeps at least 75 s of events of its
   * own, so only with it off does a watch from a compacted resourceVersion reach etcd's compaction.
   */
  readonly watchCache?: boolean;
  /** Where the processes' output goes; default files in the work directory. */
  readonly logDirectory?: string;
}

export interface ControlPlane {
  /** `https://127.0.0.1:<port>` */
  readonly url: string;
  /** The CA bundle that verifies the serving certificate. */
  readonly caPem: string;
  /** The serving key (kube-apiserver's own, for a proxy that serves as the server does). */
  readonly servingKeyPem: string;
  readonly adminToken: string;
  /** kube-apiserver's `gitVersion`, e.g. `v1.36.3`. */
  readonly version: string;
  /** The admin's HTTPS client, for fixtures and for installing CRDs and RBAC. */
  readonly admin: HttpsJsonClient;
  /** A client authenticating with `token`. */
  clientFor(token: string): HttpsJsonClient;
  /**
   * A kubeconfig (YAML) that reaches the server as the bearer of `token` (default the admin), at
   * `server` (default the server itself; e.g. a proxy serving its certificate).
   */
  kubeconfigYaml(token?: string, server?: string): string;
  /** Writes that kubeconfig to `<dir>/kubeconfig` (a fresh temp dir by default); returns its path. */
  writeKubeconfig(dir?: string, token?: string, server?: string): string;
  /** Creates (server-side applies) every document of a YAML manifest, as `kubectl apply --server-side` does. */
  apply(manifestYaml: string, fieldManager?: string): Promise<void>;
  /** Installs a CustomResourceDefinition manifest and waits until it is Established and served. */
  installCrd(crdYaml: string): Promise<void>;
  /** Kills kube-apiserver (SIGKILL) and starts it again on the same port; resolves when ready. */
  restartApiServer(options?: { downMs?: number }): Promise<void>;
  /** Kills etcd (SIGKILL) and starts it again on the same data; resolves when the API server is ready. */
  restartEtcd(options?: { downMs?: number }): Promise<void>;
  /** The API server's audit log (JSON lines, one per CiliumNode or ConfigMap request, level Metadata). */
  readonly auditLogPath: string;
  /** Milliseconds from spawning etcd to the API server's /readyz answering ok. */
  readonly startupMs: number;
  stop(): Promise<void>;
}

/** The kubectl `npm run peers:build` builds (test/peers/kubectl), or a clear error naming that command. */
export function kubectlBinary(): string {
  const path = join(BIN_DIRECTORY, 'kubectl');
  if (!existsSync(path))
    throw new Error(`${path} is missing: run \`npm run peers:build\` (builds kubectl from Go modules)`);
  return path;
}

/** Paths of the built binaries, or a clear error naming the command that builds them. */
function controlPlaneBinaries(): { etcd: string; kubeApiserver: string } {
  const etcd = join(BIN_DIRECTORY, 'etcd');
  const kubeApiserver = join(BIN_DIRECTORY, 'kube-apiserver');
  for (const path of [etcd, kubeApiserver]) {
    if (!existsSync(path)) {
      throw new Error(
        `${path} is missing: run \`npm run peers:build\` (builds kube-apiserver and etcd from Go modules)`,
      );
    }
  }
  return { etcd, kubeApiserver };
}

export async function startControlPlane(options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const binaries = controlPlaneBinaries();
  const started = Date.now();
  const workDirectory = mkdtempSync(join(tmpdir(), 'kube-control-plane-'));
  const logDirectory = options.logDirectory ?? workDirectory;
  mkdirSync(logDirectory, { recursive: true });
  // freePorts answers exactly the number of ports asked for.
  const [etcdClientPort, etcdPeerPort, apiServerPort] = (await freePorts(3)) as [number, number, number];
  const adminToken = `admin-${randomToken()}`;
  writeCredentials(workDirectory, adminToken, options.identities ?? {});

  const etcdUrl = `http://127.0.0.1:${etcdClientPort}`;
  const etcdArgs = etcdArguments(workDirectory, etcdClientPort, etcdPeerPort);
  const url = `https://127.0.0.1:${apiServerPort}`;
  const certDirectory = join(workDirectory, 'pki');
  const apiServerArgs = apiServerArguments(workDirectory, etcdUrl, apiServerPort, options);

  const processes = new ProcessGroup(logDirectory);
  const startEtcd = () => processes.spawn('etcd', binaries.etcd, etcdArgs);
  const startApiServer = () => processes.spawn('kube-apiserver', binaries.kubeApiserver, apiServerArgs);
  try {
    startEtcd();
    await waitFor('etcd /health', () => plainHealth(`${etcdUrl}/health`), processes);
    startApiServer();
    const caPath = join(certDirectory, 'apiserver.crt');
    await waitFor('the serving certificate', async () => existsSync(caPath), processes);
    const caPem = readFileSync(caPath, 'utf8');
    const clientFor = (token: string) => httpsJsonClient({ url, caPem, token });
    const admin = clientFor(adminToken);
    const ready = () => waitFor('kube-apiserver /readyz', () => isReady(admin), processes);
    await ready();
    const version = String(
      ((await admin.request('GET', '/version')).body as { gitVersion?: string }).gitVersion,
    );
    const kubeconfigYaml = (token = adminToken, server = url) => kubeconfigFor(server, caPem, token);
    const apply = (manifest: string, fieldManager = 'kubectl') =>
      serverSideApply(admin, manifest, fieldManager);
    return {
      url,
      caPem,
      servingKeyPem: readFileSync(join(certDirectory, 'apiserver.key'), 'utf8'),
      adminToken,
      version,
      admin,
      clientFor,
      kubeconfigYaml,
      writeKubeconfig: (dir, token, server) => {
        const directory = dir ?? mkdtempSync(join(tmpdir(), 'kubeconfig-'));
        const path = join(directory, 'kubeconfig');
        writeFileSync(path, kubeconfigYaml(token, server), { mode: 0o600 });
        return path;
      },
      apply,
      installCrd: async (crdYaml) => {
        await apply(crdYaml);
        await waitForCrd(admin, crdYaml, processes);
      },
      restartApiServer: async ({ downMs = 0 } = {}) => {
        await processes.kill('kube-apiserver');
        await sleep(downMs);
        startApiServer();
        await ready();
      },
      restartEtcd: async ({ downMs = 0 } = {}) => {
        await processes.kill('etcd');
        await sleep(downMs);
        startEtcd();
        await waitFor('etcd /health', () => plainHealth(`${etcdUrl}/health`), processes);
        await ready();
      },
      auditLogPath: join(workDirectory, 'audit.log'),
      startupMs: Date.now() - started,
      stop: async () => {
        await processes.stopAll();
        rmSync(workDirectory, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await processes.stopAll();
    throw error;
  }
}

/** etcd on loopback only, its data in the work directory, without fsync (a test's data is disposable). */
function etcdArguments(workDirectory: string, clientPort: number, peerPort: number): string[] {
  const clientUrl = `http://127.0.0.1:${clientPort}`;
  const peerUrl = `http://127.0.0.1:${peerPort}`;
  return [
    `--name=etcd-${clientPort}`,
    `--data-dir=${join(workDirectory, 'etcd')}`,
    `--listen-client-urls=${clientUrl}`,
    `--advertise-client-urls=${clientUrl}`,
    `--listen-peer-urls=${peerUrl}`,
    `--initial-advertise-peer-urls=${peerUrl}`,
    `--initial-cluster=etcd-${clientPort}=${peerUrl}`,
    '--listen-metrics-urls=',
    '--unsafe-no-fsync',
    '--log-level=warn',
  ];
}

/** kube-apiserver as envtest starts it: loopback, its own serving certificate, RBAC, static tokens, the audit log. */
function apiServerArguments(
  workDirectory: string,
  etcdUrl: string,
  port: number,
  options: ControlPlaneOptions,
): string[] {
  return [
    `--etcd-servers=${etcdUrl}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    `--secure-port=${port}`,
    `--cert-dir=${join(workDirectory, 'pki')}`,
    '--service-cluster-ip-range=10.0.0.0/24',
    '--allow-privileged=true',
    '--disable-admission-plugins=ServiceAccount',
    `--service-account-issuer=https://127.0.0.1:${port}/`,
    `--service-account-key-file=${join(workDirectory, 'sa.key')}`,
    `--service-account-signing-key-file=${join(workDirectory, 'sa.key')}`,
    '--authorization-mode=RBAC',
    '--anonymous-auth=false',
    `--token-auth-file=${join(workDirectory, 'tokens.csv')}`,
    `--etcd-compaction-interval=${options.compactionInterval ?? '5m'}`,
    `--watch-cache=${options.watchCache ?? true}`,
    // Nothing in the tests resolves a peer endpoint; leave the kubernetes Service to itself.
    '--endpoint-reconciler-type=none',
    '--enable-priority-and-fairness=false',
    // The server's own request log: who asked what of CiliumNodes and ConfigMaps, and the answer.
    `--audit-policy-file=${join(workDirectory, 'audit-policy.yaml')}`,
    `--audit-log-path=${join(workDirectory, 'audit.log')}`,
    '--audit-log-mode=blocking',
    '--audit-log-format=json',
    '--v=0',
  ];
}

/** tokens.csv for every identity plus the admin, and the service-account signing key. */
function writeCredentials(
  directory: string,
  adminToken: string,
  identities: Readonly<Record<string, Identity>>,
) {
  const rows = [
    [adminToken, { user: 'kubernetes-admin', groups: ['system:masters'] }] as const,
    ...Object.entries(identities),
  ];
  const csv = rows.map(([token, identity], index) => {
    if (
      /[,"\s]/.test(token) ||
      /["\n]/.test(identity.user) ||
      identity.groups.some((group) => /[,"\n]/.test(group))
    ) {
      throw new Error(
        `identity ${identity.user}: tokens, users and groups must not hold commas, quotes or spaces`,
      );
    }
    // No group column for an identity without groups: `""` would make it a member of the group "".
    const groups = identity.groups.length === 0 ? '' : `,"${identity.groups.join(',')}"`;
    return `${token},${identity.user},uid-${index}${groups}`;
  });
  writeFileSync(join(directory, 'audit-policy.yaml'), AUDIT_POLICY);
  writeFileSync(join(directory, 'tokens.csv'), `${csv.join('\n')}\n`, { mode: 0o600 });
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  writeFileSync(join(directory, 'sa.key'), privateKey.export({ type: 'pkcs1', format: 'pem' }), {
    mode: 0o600,
  });
}

/** Metadata (who, verb, object, answer) of CiliumNode and ConfigMap requests once they complete; nothing else. */
const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
  - level: Metadata
    resources:
      - group: cilium.io
        resources: [ciliumnodes, ciliumnodes/status]
      - group: ""
        resources: [configmaps]
  - level: None
`;

function kubeconfigFor(url: string, caPem: string, token: string): string {
  const ca = Buffer.from(caPem).toString('base64');
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '  - name: kube-apiserver',
    '    cluster:',
    `      server: ${url}`,
    `      certificate-authority-data: ${ca}`,
    'users:',
    '  - name: bearer',
    '    user:',
    `      token: ${token}`,
    'contexts:',
    '  - name: kube-apiserver',
    '    context: { cluster: kube-apiserver, user: bearer }',
    'current-context: kube-apiserver',
    '',
  ].join('\n');
}

interface ManifestObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
}

/** The REST path of a manifest object of the kinds the tests apply. */
function pathOf(object: ManifestObject): string {
  const plural: Record<string, string> = {
    CustomResourceDefinition: 'customresourcedefinitions',
    ClusterRole: 'clusterroles',
    ClusterRoleBinding: 'clusterrolebindings',
    Role: 'roles',
    RoleBinding: 'rolebindings',
    ConfigMap: 'configmaps',
    Namespace: 'namespaces',
  };
  const resource = plural[object.kind];
  if (resource === undefined) throw new Error(`apply: kind ${object.kind} is not one the tests apply`);
  const base = object.apiVersion.includes('/') ? `/apis/${object.apiVersion}` : `/api/${object.apiVersion}`;
  const namespace = object.metadata.namespace === undefined ? '' : `/namespaces/${object.metadata.namespace}`;
  return `${base}${namespace}/${resource}/${encodeURIComponent(object.metadata.name)}`;
}

async function serverSideApply(
  admin: HttpsJsonClient,
  manifest: string,
  fieldManager: string,
): Promise<void> {
  for (const document of parseAllDocuments(manifest)) {
    const object = document.toJS() as ManifestObject | null;
    if (object === null) continue;
    const query = `?fieldManager=${encodeURIComponent(fieldManager)}&force=true`;
    const response = await admin.request(
      'PATCH',
      `${pathOf(object)}${query}`,
      object,
      'application/apply-patch+yaml',
    );
    if (response.status >= 300) {
      throw new Error(
        `apply ${object.kind} ${object.metadata.name}: ${response.status} ${JSON.stringify(response.body)}`,
      );
    }
  }
}

async function waitForCrd(admin: HttpsJsonClient, crdYaml: string, processes: ProcessGroup): Promise<void> {
  const crd = parseAllDocuments(crdYaml)[0]?.toJS() as ManifestObject & {
    spec: { group: string; names: { plural: string }; versions: { name: string; served: boolean }[] };
  };
  await waitFor(
    `CRD ${crd.metadata.name} Established`,
    async () => {
      const { body } = await admin.request('GET', pathOf(crd));
      const conditions = (body as { status?: { conditions?: { type: string; status: string }[] } }).status
        ?.conditions;
      return (
        conditions?.some((condition) => condition.type === 'Established' && condition.status === 'True') ??
        false
      );
    },
    processes,
  );
  for (const version of crd.spec.versions.filter((candidate) => candidate.served)) {
    const path = `/apis/${crd.spec.group}/${version.name}/${crd.spec.names.plural}`;
    await waitFor(`${path} served`, async () => (await admin.request('GET', path)).status === 200, processes);
  }
}

async function isReady(admin: HttpsJsonClient): Promise<boolean> {
  try {
    return (await admin.request('GET', '/readyz')).status === 200;
  } catch {
    return false;
  }
}

async function plainHealth(url: string): Promise<boolean> {
  try {
    return (await fetch(url)).ok;
  } catch {
    return false;
  }
}

/** Polls `check` every 100 ms for up to 180 s (a loaded 2-core machine starts slowly); fails at once, with the log's tail, if a process exited. */
async function waitFor(what: string, check: () => Promise<boolean>, processes: ProcessGroup): Promise<void> {
  const deadline = Date.now() + 180_000;
  while (Date.now() < deadline) {
    processes.assertRunning();
    if (await check()) return;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}\n${processes.tails()}`);
}

/** The control plane's processes: spawned with their output in log files, killed on stop. */
class ProcessGroup {
  private readonly running = new Map<string, ChildProcess>();
  private readonly exited: string[] = [];

  constructor(private readonly logDirectory: string) {}

  spawn(name: string, binary: string, args: readonly string[]): void {
    const log = createWriteStream(join(this.logDirectory, `${name}.log`), { flags: 'a' });
    const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    this.running.set(name, child);
    // A test process that ends without stopping its control plane (a crash, a shared server) takes
    // the servers with it rather than leaving them running.
    const killOnExit = () => child.kill('SIGKILL');
    process.once('exit', killOnExit);
    child.once('exit', () => process.removeListener('exit', killOnExit));
    child.once('exit', (code, signal) => {
      if (this.running.get(name) === child) {
        this.running.delete(name);
        this.exited.push(`${name} exited (${signal ?? code})`);
      }
    });
  }

  assertRunning(): void {
    if (this.exited.length > 0) throw new Error(`${this.exited.join(', ')}\n${this.tails()}`);
  }

  tails(): string {
    return ['etcd', 'kube-apiserver']
      .map((name) => {
        const path = join(this.logDirectory, `${name}.log`);
        if (!existsSync(path)) return '';
        return `--- ${name}.log (tail)\n${readFileSync(path, 'utf8').split('\n').slice(-30).join('\n')}`;
      })
      .join('\n');
  }

  async kill(name: string): Promise<void> {
    const child = this.running.get(name);
    if (child === undefined) return;
    this.running.delete(name);
    const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
    child.kill('SIGKILL');
    await exited;
  }

  async stopAll(): Promise<void> {
    await Promise.all([...this.running.keys()].map((name) => this.kill(name)));
  }
}

async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolveServer, reject) => {
          const server = createServer();
          server.once('error', reject);
          server.listen(0, '127.0.0.1', () => resolveServer(server));
        }),
    ),
  );
  const ports = servers.map((server) => (server.address() as { port: number }).port);
  await Promise.all(servers.map((server) => new Promise((resolveClose) => server.close(resolveClose))));
  return ports;
}

function randomToken(): string {
  return randomBytes(16).toString('hex');
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolveSleep) => setTimeout(resolveSleep, ms));
}
