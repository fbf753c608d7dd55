#!/usr/bin/env -S node --no-node-snapshot --max-semi-space-size=64
// Runs the TypeScript sources directly through tsx, so there is no build step to forget.
// A young generation of 64 MiB semi-spaces (V8 default: 16): a busy coordinator allocates fast, and
// collecting it less often is 5–13% more runs/s (bench/dispatch.bench.ts). `npm start` passes the same.
import { register } from 'tsx/esm/api';

register();
await import('../src/cli/main.ts');
