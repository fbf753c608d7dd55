import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { RunCauseNotRecordedError, RunNotStorableError } from '../../actors/runs/errors.ts';
import { coerceError } from '../../lib/errors.ts';
import type { NewRun } from '../../actors/runs/ports.ts';
import type { LockFile, LockStaticJob, LockWorkflow } from '../../machines/lock.types.ts';
import { planRun } from '../../machines/run.plan.ts';
import type { RunInput } from '../../machines/run.types.ts';
import { forgeStatusFor } from '../../machines/run.forge.ts';
import type { InitFailure, JobTimeouts } from '../../machines/types.ts';
import type { Delivery } from '../db/deliveries.ts';
import type { Schema } from '../db/schema.ts';
import type { Sandbox } from '../sandbox/index.ts';
import type { EventEnvelope } from './envelope.ts';
import type { SourceBase } from './run-source.ts';
import { resolveRunEnvironments } from './environments.ts';
import type { RunEnvironments } from './environments.ts';
import { runIdFor } from './run-id.ts';
import type { RunSource } from './run-source.ts';
import { matchWorkflows } from './triggers.ts';
import { runExists } from '../db/run-queries.ts';
import { DeliveryNotRecordedError, isRecorded } from '../queue/delivery-queue.ts';
import { unsupportedParts } from '../lockfile/unsupported.ts';
import type { DispatchPathTraces } from '../../lib/stage-trace.ts';

export interface StartedRun {
  workflow: string;
  runId: string | null;
  initFailure?: string;
}

export interface RunStarter {
  matched(delivery: Delivery, lock: LockFile, source: SourceBase): Promise<StartedRun[]>;
  corrupt(delivery: Delivery, source: SourceBase, message: string): Promise<string[]>;
}

export interface RunStarterDeps {
  db: Kysely<Schema>;
  createRun: (run: NewRun) => Promise<void>;
  sandbox: Sandbox;
  timeouts: JobTimeouts;
  maxAttempts: number;
  now: () => number;
  log: Logger;
  /** How long matching a lock file's triggers against an event took (`switchyard_trigger_match_seconds`). */
  onTriggersMatched?: (seconds: number) => void;
  /** The workflow's secret references (`<environment>:<secret>`) no stored secret answers (SEC-2, docs/http-api.md#secrets). */
  unresolvedSecrets?: (repository: string, workflow: LockWorkflow) => Promise<string[]>;
  /** Whether the run starts with a build job (src/caches/build-planner.ts); absent: never. */
  buildFor?: (source: SourceBase, workflow: LockWorkflow) => Promise<{ contentHash: string } | null>;
  /** A traced delivery's first run carries its trace on (lib/stage-trace.ts). */
  traces?: DispatchPathTraces;
}

const UNRESOLVED = '(unresolved workflow)';

/**
 * Creates a run; null when it was created, else the reason it was failed at once because its state
 * could not be stored (it exists, failed, so the delivery is done). Anything else propagates; a
 * delivery whose recording came to nothing creates nothing (DeliveryNotRecordedError).
 */
async function create(deps: RunStarterDeps, delivery: Delivery, run: NewRun): Promise<string | null> {
  if (delivery.trace) deps.traces?.bind(run.input.runId, delivery.trace);
  // Made ready while the delivery is being recorded; written only once its row is stored.
  const recordedCause = delivery.recording && isRecorded(delivery);
  try {
    await deps.createRun(recordedCause ? { ...run, recordedCause } : run);
    return null;
  } catch (thrown) {
    if (thrown instanceof RunNotStorableError) return thrown.reason;
    if (thrown instanceof RunCauseNotRecordedError) throw new DeliveryNotRecordedError(delivery.deliveryId);
    throw thrown;
  }
}
const MAX_MESSAGE = 2000;

interface InlineResults {
  groups: Record<string, string>;
  env: Record<string, Record<string, string>>;
  /** Inline `environments[].value` results, by job name and entry index. */
  environments: Record<string, Record<number, string>>;
  errors: Record<string, InitFailure>;
}

/** EVAL-1..5: inline values are evaluated once, against the envelope; a failure fails only that job. */
async function evaluateInline(sandbox: Sandbox, workflow: LockWorkflow, event: EventEnvelope): Promise<InlineResults> {
  const results: InlineResults = { groups: {}, env: {}, environments: {}, errors: {} };
  const jobs = workflow.jobs.filter((job): job is LockStaticJob => job._type === 'static');
  for (const job of jobs) {
    const fail = (message: string) => {
      results.errors[job.name] ??= { scope: 'job', category: 'dynamic_eval', message: message.slice(0, MAX_MESSAGE), jobName: job.name };
    };
    if (typeof job.concurrencyGroup === 'object') {
      const r = await sandbox.evaluate({ expression: job.concurrencyGroup.expression, event, expect: 'string', field: 'concurrencyGroup', jobName: job.name });
      if (r.ok && typeof r.value === 'string') results.groups[job.name] = r.value;
      else if (!r.ok) fail(r.message);
    }
    if (job.env && '_type' in job.env) {
      const r = await sandbox.evaluate({ expression: job.env.expression, event, expect: 'stringMap', field: 'env', jobName: job.name });
      if (r.ok && typeof r.value === 'object') results.env[job.name] = r.value;
      else if (!r.ok) fail(r.message);
    }
    for (const [index, ref] of (job.environments ?? []).entries()) {
      if (typeof ref.value === 'string') continue;
      const r = await sandbox.evaluate({ expression: ref.value.expression, event, expect: 'string', field: 'environments', jobName: job.name });
      if (r.ok && typeof r.value === 'string') (results.environments[job.name] ??= {})[index] = r.value;
      else if (!r.ok) fail(r.message);
    }
  }
  return results;
}

/** The run of a matched workflow as it is created: inline values evaluated, environments resolved, planned. */
async function plannedRun(deps: RunStarterDeps, delivery: Delivery, source: SourceBase, workflow: LockWorkflow, runId: string): Promise<NewRun> {
  const inline = await evaluateInline(deps.sandbox, workflow, source.event);
  delivery.trace?.mark('run.inline');
  const environments = await resolveRunEnvironments(deps.db, workflow, source, inline.environments);
  delivery.trace?.mark('run.environments');
  const build = (await deps.buildFor?.(source, workflow)) ?? undefined;
  delivery.trace?.mark('run.build');
  const input = withForgeStatus(
    planRun({
      ...{ runId, createdAt: deps.now(), workflow, timeouts: deps.timeouts, maxAttempts: deps.maxAttempts, ...(build && { build }) },
      ...{ repository: source.repository, resolvedConcurrencyGroups: inline.groups, jobErrors: inline.errors, environments: environments.planned },
    }),
    source,
  );
  const inputSummary = toSource(source, workflow, delivery, inline.env, environments.frozen);
  delivery.trace?.mark('run.planned');
  return { input, repository: source.repository, inputSummary };
}

/** Starts the runs of one delivery; each workflow on its own, so one failure never stops the others (INT-8, B15). */
export function createRunStarter(deps: RunStarterDeps): RunStarter {
  // A delivery recorded a moment ago has no runs yet (and were one there, its creation is refused
  // as a journal conflict and the delivery retried, which then finds it).
  const exists = (delivery: Delivery, runId: string) => (delivery.recording ? Promise.resolve(false) : runExists(deps.db, runId));

  async function failedRun(delivery: Delivery, source: SourceBase, workflow: LockWorkflow, initFailure: InitFailure): Promise<string> {
    const runId = runIdFor(delivery.source, delivery.deliveryId, workflow.name);
    if (await exists(delivery, runId)) return runId;
    const planned = planRun({ runId, createdAt: deps.now(), workflow, timeouts: deps.timeouts, maxAttempts: deps.maxAttempts, repository: source.repository, initFailure });
    const input = withForgeStatus(planned, source);
    const unstorable = await create(deps, delivery, { input, repository: source.repository, inputSummary: toSource(source, workflow, delivery, {}) });
    if (unstorable !== null) deps.log.warn({ runId, reason: unstorable }, 'failed run could not be stored as is; it is failed with the reason');
    return runId;
  }

  async function startOne(delivery: Delivery, source: SourceBase, workflow: LockWorkflow): Promise<StartedRun> {
    const runId = runIdFor(delivery.source, delivery.deliveryId, workflow.name);
    if (await exists(delivery, runId)) return { workflow: workflow.name, runId };
    const unresolved = (await deps.unresolvedSecrets?.(source.repository, workflow)) ?? [];
    delivery.trace?.mark('run.secrets');
    if (unresolved.length > 0) {
      const message = `secrets the workflow references are not stored: ${unresolved.join(', ')}`;
      return { workflow: workflow.name, runId: await failedRun(delivery, source, workflow, { scope: 'run', category: 'secret_resolution', message }) };
    }
    const unstorable = await create(deps, delivery, await plannedRun(deps, delivery, source, workflow, runId));
    return { workflow: workflow.name, runId, ...(unstorable === null ? {} : { initFailure: unstorable }) };
  }

  return {
    /**
     * A workflow whose trigger cannot be evaluated becomes a failed run and the others go on (B15).
     * Anything else that throws here (the database, a lost lease, the sandbox itself) is not the
     * workflow's fault: it propagates, the delivery is retried, and the runs already started are
     * found again by their deterministic ids.
     */
    async matched(delivery, lock, source) {
      const started: StartedRun[] = [];
      const matchStarted = performance.now();
      const matches = matchWorkflows(lock.workflows, source.event);
      deps.onTriggersMatched?.((performance.now() - matchStarted) / 1000);
      delivery.trace?.mark('triggers.matched');
      for (const match of matches) {
        if (match.outcome === 'no_match') continue;
        if (match.outcome === 'matched') {
          started.push(await startOne(delivery, source, match.workflow));
          continue;
        }
        const name = match.workflow.name;
        const message = `workflow ${name} could not start: ${coerceError(match.error).message}`.slice(0, MAX_MESSAGE);
        deps.log.warn({ workflow: name, deliveryId: delivery.deliveryId, message }, 'workflow failed before its run started');
        const runId = await failedRun(delivery, source, { ...match.workflow, jobs: [] }, { scope: 'run', category: 'dynamic_eval', message });
        started.push({ workflow: name, runId, initFailure: message });
      }
      return started;
    },
    async corrupt(delivery, source, message) {
      const workflow: LockWorkflow = { name: UNRESOLVED, jobs: [] };
      const initFailure: InitFailure = { scope: 'run', category: 'lock_resolution', message: message.slice(0, MAX_MESSAGE) };
      return [await failedRun(delivery, source, workflow, initFailure)];
    },
  };
}

/** Runs of GitHub deliveries report a commit status (docs/http-api.md#commit-status-on-github). */
function withForgeStatus(input: RunInput, source: SourceBase): RunInput {
  return source.provider === 'github' ? { ...input, forgeStatus: forgeStatusFor(input.workflowName) } : input;
}

function toSource(source: SourceBase, workflow: LockWorkflow, delivery: Delivery, resolvedEnv: Record<string, Record<string, string>>, environments?: RunEnvironments): RunSource {
  const unsupported = unsupportedParts(workflow);
  return {
    ...source,
    workflow,
    ...(unsupported.length > 0 ? { unsupported } : {}),
    resolvedEnv,
    ...(environments ? { environments } : {}),
    delivery: { source: delivery.source, deliveryId: delivery.deliveryId },
  };
}
