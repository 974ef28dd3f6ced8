/**
 * EC2 emulator: the EC2 Query protocol on 127.0.0.1 over a state model that enforces EC2's ENI
 * rules, with every fault it can raise (AWS's token-bucket throttling, eventual consistency,
 * per-call faults, fragmented subnets, a before-apply hook) in one catalogue, `EC2_FAULTS`, armed
 * with `emulator.faults.arm(...)` (faults.ts).
 *
 *   const emulator = await startEc2Emulator({ throttling: true });
 *   const cluster = emulator.state.seedCluster();
 *   const instance = emulator.state.launchInstance({ instanceType: 'm5.large', subnetId: cluster.subnets.nodesA.subnetId });
 *   const ec2 = new EC2Client({ region: 'us-east-1', endpoint: emulator.url, credentials });
 */
export * from './addresses.ts';
export * from './authorization.ts';
export * from './calls.ts';
export * from './clock.ts';
export * from './cluster-seed.ts';
export * from './errors.ts';
export * from './faults.ts';
export * from './instance-types.ts';
export * from './query.ts';
export * from './records.ts';
export * from './server.ts';
export * from './state.ts';
export * from './throttling.ts';
export * from './xml.ts';
