import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { IamIdentity } from '../../emulators/ec2/authorization.ts';

/**
 * cilium-operator's ENI allocator (cilium v1.20.2) as a process the bench runs beside our stack:
 * `cmd/operator-peer` of this module, built by `npm run peers:build` into `test/peers/.bin`. It
 * reaches the EC2 stand-in with its own access key (cilium-operator's documented IAM permissions)
 * and the real kube-apiserver with its own token (cilium-operator's RBAC on CiliumNodes).
 */

const BINARY = fileURLToPath(new URL('../.bin/operator-peer-1.20', import.meta.url));

/** The built peer, or a clear error naming the command that builds it. */
export function operatorPeerBinary(): string {
  if (!existsSync(BINARY)) {
    throw new Error(`the cilium-operator peer is not built (${BINARY}): run npm run peers:build`);
  }
  return BINARY;
}

/** cilium-operator's `--limit-ipam-api-qps` and `--limit-ipam-api-burst` defaults at v1.20.2 (operator/pkg/ipam/cell.go). */
export const OPERATOR_IPAM_API_DEFAULTS = { qps: 4, burst: 20 } as const;

/** The access key the peer signs its EC2 calls with (the stand-in maps it to `operatorPeerIamIdentity`). */
export const OPERATOR_PEER_CREDENTIALS = {
  accessKeyId: 'AKIACILIUMOPERATOR01',
  secretAccessKey: 'cilium-operator-peer-secret-access-key',
} as const;

/**
 * The EC2 permissions cilium's documentation (v1.20.2, Documentation/network/concepts/ipam/eni.rst,
 * "Required Privileges") lists for the operator with its defaults: ENI creation and IP allocation,
 * plus DescribeTags for ENI garbage collection without `--cluster-name` or `--eni-gc-tags`. Release
 * of excess IPs, IPv6 and `--instance-tags-filter` are off, so their extra permissions are not granted.
 */
export function operatorPeerIamIdentity(account: string): IamIdentity {
  return {
    principalArn: `arn:aws:sts::${account}:assumed-role/CiliumOperatorRole/cilium-operator`,
    policies: [
      {
        Version: '2012-10-17',
        Statement: [
          {
            Sid: 'CiliumOperatorEni',
            Effect: 'Allow',
            Action: [
              'ec2:DeleteNetworkInterface',
              'ec2:DescribeInstanceTypes',
              'ec2:DescribeNetworkInterfaces',
              'ec2:DescribeSubnets',
              'ec2:DescribeVpcs',
              'ec2:DescribeRouteTables',
              'ec2:DescribeSecurityGroups',
              'ec2:CreateNetworkInterface',
              'ec2:AttachNetworkInterface',
              'ec2:ModifyNetworkInterfaceAttribute',
              'ec2:AssignPrivateIpAddresses',
              'ec2:CreateTags',
              'ec2:DescribeTags',
            ],
            Resource: '*',
          },
        ],
      },
    ],
  };
}

export interface OperatorPeerOptions {
  /** kube-apiserver (or a proxy serving its certificate), `https://127.0.0.1:PORT`. */
  readonly kubernetesUrl: string;
  /** The CA bundle that verifies the server's certificate. */
  readonly kubernetesCaPem: string;
  /** The peer's own bearer token (`KubernetesUnderTest.operatorPeerToken`). */
  readonly kubernetesToken: string;
  /** The EC2 stand-in, `http://127.0.0.1:PORT`. */
  readonly ec2Endpoint: string;
  readonly region: string;
  /** The VPC the operator's host is in (what IMDS answers it). */
  readonly hostVpcId: string;
  /** `--limit-ipam-api-qps` and `--limit-ipam-api-burst`; default cilium-operator's. */
  readonly ipamApiLimits?: { readonly qps: number; readonly burst: number };
  /** Every line the peer logs (stderr). */
  readonly onLog?: (line: string) => void;
  /** Real ms to wait for the peer's initial EC2 resync and informer sync; default 60 s. */
  readonly readyTimeoutMs?: number;
}

export interface OperatorPeer {
  readonly pid: number | undefined;
  /** The peer's log lines so far (the last 200). */
  readonly recentLog: readonly string[];
  /** Whether the process ended before `stop` (it should not). */
  exitedEarly(): boolean;
  /** SIGTERM, then SIGKILL after 5 s; resolves when the process is gone. */
  stop(): Promise<void>;
}

/** Starts the peer; resolves once it printed its ready line, rejects (with its last log lines) if it ends first. */
export async function startOperatorPeer(options: OperatorPeerOptions): Promise<OperatorPeer> {
  const binary = operatorPeerBinary();
  const directory = mkdtempSync(join(tmpdir(), 'operator-peer-'));
  const caFile = join(directory, 'ca.pem');
  writeFileSync(caFile, options.kubernetesCaPem, { mode: 0o600 });
  const limits = options.ipamApiLimits ?? OPERATOR_IPAM_API_DEFAULTS;
  const child = spawn(
    binary,
    [
      `--kubernetes-url=${options.kubernetesUrl}`,
      `--kubernetes-ca-file=${caFile}`,
      `--ec2-endpoint=${options.ec2Endpoint}`,
      `--region=${options.region}`,
      `--host-vpc-id=${options.hostVpcId}`,
      `--limit-ipam-api-qps=${limits.qps}`,
      `--limit-ipam-api-burst=${limits.burst}`,
    ],
    {
      env: {
        PATH: process.env.PATH ?? '',
        GOMAXPROCS: '2',
        OPERATOR_PEER_KUBERNETES_TOKEN: options.kubernetesToken,
        AWS_ACCESS_KEY_ID: OPERATOR_PEER_CREDENTIALS.accessKeyId,
        AWS_SECRET_ACCESS_KEY: OPERATOR_PEER_CREDENTIALS.secretAccessKey,
        // Anything the SDK might reach on its own goes to a closed loopback port.
        AWS_EC2_METADATA_DISABLED: 'true',
        AWS_ENDPOINT_URL: 'http://127.0.0.1:9',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const recentLog: string[] = [];
  createInterface({ input: child.stderr }).on('line', (line) => {
    recentLog.push(line);
    if (recentLog.length > 200) recentLog.shift();
    options.onLog?.(line);
  });
  let stopping = false;
  let exited = false;
  const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void gone.then(() => {
    exited = true;
    rmSync(directory, { recursive: true, force: true });
  });
  try {
    await readyLine(child, options.readyTimeoutMs ?? 60_000, recentLog);
  } catch (error) {
    child.kill('SIGKILL');
    await gone;
    throw error;
  }
  return {
    pid: child.pid,
    recentLog,
    exitedEarly: () => exited && !stopping,
    stop: async () => {
      stopping = true;
      if (exited) return;
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await gone;
      clearTimeout(killer);
    },
  };
}

function readyLine(child: ChildProcess, timeoutMs: number, recentLog: readonly string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const fail = (why: string) =>
      reject(
        new Error(`the cilium-operator peer ${why}; its last log lines:\n${recentLog.slice(-15).join('\n')}`),
      );
    const timer = setTimeout(() => fail(`was not ready within ${timeoutMs} ms`), timeoutMs);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      fail(`exited (${signal ?? code}) before it was ready`);
    });
    if (child.stdout === null) return fail('has no stdout');
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line.trim() === '{"ready":true}') {
        clearTimeout(timer);
        resolve();
      }
    });
  });
}
