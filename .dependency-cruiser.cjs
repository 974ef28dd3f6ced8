/**
 * The architecture as rules (`npm run check` runs them): a pure core, one adapter per external
 * system, services that reach adapters only through the ports the core defines, handlers that wire.
 * There are no exceptions: any violation fails the check.
 */
module.exports = {
  forbidden: [
    {
      name: 'core-is-pure',
      comment: 'functions/core decides; it reads no SDK, no network, no file system, and no other layer.',
      severity: 'error',
      from: { path: '^functions/core/' },
      to: {
        path: ['^node_modules/(@aws-sdk|@smithy|@kubernetes)/', '^functions/(?!core/)'],
        dependencyTypesNot: ['type-only'],
      },
    },
    {
      name: 'core-no-io-builtins',
      comment: 'functions/core takes time and randomness as arguments and does no I/O.',
      severity: 'error',
      from: { path: '^functions/core/' },
      to: { dependencyTypes: ['core'], path: '^(node:)?(fs|net|http|https|child_process|dgram|tls)$' },
    },
    {
      name: 'services-use-ports',
      comment:
        'functions/services talk to EC2, DynamoDB and Kubernetes through the ports in functions/core/ports.ts.',
      severity: 'error',
      from: { path: '^functions/services/' },
      to: { path: '^functions/(aws|k8s)/' },
    },
    {
      name: 'adapters-not-services',
      comment: 'an adapter translates one external system; it never calls the services above it.',
      severity: 'error',
      from: { path: '^functions/(aws|k8s)/' },
      to: { path: '^functions/(services|runtime)/' },
    },
    {
      name: 'infra-reads-only-contracts',
      comment: 'the stack shares constants and schemas with the functions, never their behaviour.',
      severity: 'error',
      from: { path: '^infra/' },
      to: { path: '^functions/', pathNot: '^functions/(core|aws|k8s)/' },
    },
    {
      name: 'functions-not-tests',
      comment: 'nothing shipped imports the stand-ins or the test tools.',
      severity: 'error',
      from: { path: '^(functions|infra)/' },
      to: { path: '^test/' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      from: { path: '^functions/' },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default'],
    },
  },
};
