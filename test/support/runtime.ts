import type { Kysely } from 'kysely';
import { Registry } from 'prom-client';
import { pino } from 'pino';
import type { Logger } from 'pino';
import type { FencedError } from '../../actors/runs/errors.ts';
import { systemClock } from '../../actors/clock.ts';
import type { LockWorkflow } from '../../machines/lock.types.ts';
import { planRun } from '../../machines/run.plan.ts';
import type { RunInput } from '../../machines/run.types.ts';
import { DEFAULT_JOB_TIMEOUTS } from '../../machines/types.ts';
import { loadConfig } from '../../src/config/index.ts';
import type { Schema } from '../../src/db/schema.ts';
import { createRuntime } from '../../src/main.ts';
import type { Runtime } from '../../src/main.ts';

const silent = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

export interface TestRuntime extends Runtime {
  fenced: FencedError[];
}

/** A coordinator's actor runtime on a real database, with short leases for failover tests. */
export async function startTestRuntime(
  db: Kysely<Schema>,
  coordinatorId: string,
  env: Record<string, string> = {},
  log: Logger = silent,
): Promise<TestRuntime> {
  const config = loadConfig({
    SWITCHYARD_COORDINATOR_ID: coordinatorId,
    SWITCHYARD_LEASE_RENEW_MS: '100',
    SWITCHYARD_LEASE_TTL_MS: '400',
    DATABASE_URL: 'postgres://unused',
    ...env,
  });
  const fenced: FencedError[] = [];
  const runtime = createRuntime({ config, db, clock: systemClock, log, registry: new Registry(), onFenced: (e) => fenced.push(e) });
  await runtime.start();
  return Object.assign(runtime, { fenced });
}

/** A workflow whose jobs wait for an agent nobody has: only deadlines and cancels move it. */
export function waitingWorkflow(
  name: string,
  options: { timeoutMs?: number; jobs?: string[]; group?: string; cancelInProgress?: boolean } = {},
): LockWorkflow {
  const jobs = (options.jobs ?? ['build']).map((job, i, all) => ({
    _type: 'static' as const,
    name: job,
    runsOn: [{ kind: 'exact' as const, value: 'label-nobody-has' }],
    needs: i === 0 ? [] : [all[i - 1] as string],
    steps: [{ name: 'step', hasOutputs: false, run: 'true' }],
    ...(options.group ? { concurrencyGroup: options.group } : {}),
  }));
  const concurrency = options.group ? { concurrency: { hasGroup: false, cancelInProgress: options.cancelInProgress ?? true, max: 1 } } : {};
  return { name, jobs, ...concurrency, ...(options.timeoutMs ? { timeout: options.timeoutMs } : {}) };
}

export function planFor(runId: string, workflow: LockWorkflow, createdAt = Date.now()): RunInput {
  return planRun({ runId, createdAt, workflow, timeouts: DEFAULT_JOB_TIMEOUTS, maxAttempts: 5, repository: 'acme/app' });
}

/** Polls `check` until it returns a value or the time is up (integration tests wait on real deadlines). */
export async function eventually<T>(check: () => Promise<T | null | undefined | false> | T | null | undefined | false, timeoutMs = 10_000, what = 'condition'): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
