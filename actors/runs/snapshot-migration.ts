import { JOB_MACHINE_VERSION } from '../../machines/job.machine.ts';
import { RUN_MACHINE_VERSION } from '../../machines/run.machine.ts';

/** One number for the pair of charts a snapshot holds: the run and its job children. */
export const SNAPSHOT_VERSION = RUN_MACHINE_VERSION * 1000 + JOB_MACHINE_VERSION;

/**
 * Stored snapshots of earlier releases, brought to this release's format when they are read
 * (docs/upgrades.md#what-a-release-may-change). Each step is pure and takes one stored version to
 * the next; a version with no step here is refused, never guessed (UnknownMachineVersionError).
 */

/** The run's fields fixed at creation, grouped in `spec` from snapshot version 5005 on (machines/run.machine.ts `RunSpec`). */
const RUN_SPEC_KEYS = ['runId', 'workflowName', 'createdAt', 'maxAttempts', 'concurrencyScope', 'workflowTimeoutMs', 'approvalTimeoutMs', 'forgeStatus'];
/** The job's, likewise (machines/job.context.ts `JobSpec`). */
const JOB_SPEC_KEYS = ['runId', 'jobKey', 'baseName', 'matrix', 'createdAt', 'requirements', 'timeouts', 'maxAttempts', 'initFor'];

type Json = Record<string, unknown>;

/** `context` with `keys` moved into `spec` (in that order, as a new context has them), the rest as they were. */
function grouped(context: Json, keys: readonly string[]): Json {
  const spec: Json = {};
  for (const key of keys) spec[key] = context[key] ?? null;
  const rest: Json = {};
  for (const [key, value] of Object.entries(context)) if (!keys.includes(key)) rest[key] = value;
  return { spec, ...rest };
}

/** 4004 → 5005: the run's and every job's fixed fields are grouped in `spec` (a context of more than 19 keys is slow to copy). */
function groupSpecs(persisted: Json): Json {
  const children: Json = {};
  for (const [key, child] of Object.entries((persisted.children ?? {}) as Record<string, Json>)) {
    const snapshot = child.snapshot as Json | undefined;
    children[key] = snapshot?.context ? { ...child, snapshot: { ...snapshot, context: grouped(snapshot.context as Json, JOB_SPEC_KEYS) } } : child;
  }
  return { ...persisted, context: grouped(persisted.context as Json, RUN_SPEC_KEYS), children };
}

/** Each stored version this build reads, and the step from it to the next. */
const STEPS = new Map<number, { to: number; step: (persisted: Json) => Json }>([[4004, { to: 5005, step: groupSpecs }]]);

/** The snapshot of `version` in this build's format (`SNAPSHOT_VERSION`), or null when no chain of steps leads there. */
export function migrateSnapshot(version: number, persisted: unknown): unknown {
  let [at, snapshot] = [version, persisted as Json];
  while (at !== SNAPSHOT_VERSION) {
    const next = STEPS.get(at);
    if (!next) return null;
    [at, snapshot] = [next.to, next.step(snapshot)];
  }
  return snapshot;
}
