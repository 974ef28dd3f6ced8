import { resolve } from 'node:path';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'infra/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    // Generous limits: a time-out is a failure to finish, not a speed assertion (speed is measured
    // by `npm run bench`), and a loaded 2-core machine runs the local-cloud suites several times slower.
    testTimeout: 120_000,
    hookTimeout: 240_000,
    env: {
      AWS_REGION: 'us-east-1',
      AWS_ACCESS_KEY_ID: 'AKIDLOCALTEST',
      AWS_SECRET_ACCESS_KEY: 'local-test-secret',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      // Handlers flush EMF metrics to stdout; tests check the pure mapping instead.
      POWERTOOLS_METRICS_DISABLED: 'true',
      POWERTOOLS_METRICS_NAMESPACE: 'ServerlessEniIpamTest',
      // Catch-all: any AWS client a test did not point at a stand-in fails fast on loopback
      // instead of reaching a real AWS endpoint.
      AWS_ENDPOINT_URL: 'http://127.0.0.1:9',
      // aws-cdk-lib writes its fingerprint cache under the home directory.
      HOME: resolve('.home'),
    },
  },
});
