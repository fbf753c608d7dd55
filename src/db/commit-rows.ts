import { UnstorableEntryError } from './errors.ts';
import type { CommitEntry, SerializedEntry, TimerChange } from './commit.types.ts';
import { UnstorableJsonError, toJson } from './json.ts';
import { TERMINAL_RUN_STATUSES } from './run-status.ts';

/**
 * One group commit as JSON row texts per table, keyed by column name: each list is sent as ONE json
 * parameter and expanded with json_to_recordset (far cheaper to parse than a Postgres array literal).
 */
export interface CommitRows {
  newRunIds: string[];
  existingRunIds: string[];
  /** Runs the batch finishes, new or existing: their owner rows are no longer live. */
  finishedRunIds: string[];
  events: string[];
  snapshots: string[];
  /** Runs whose state no entry of the batch changed: their stored snapshot only moves to the new seq. */
  snapshotSeqs: string[];
  runs: string[];
  jobs: string[];
  removedJobs: string[];
  armed: string[];
  disarmed: string[];
  effects: string[];
}

/** JSON of a string column (through toJson, so unstorable characters are replaced). */
const str = (value: string | null): string => (value === null ? 'null' : toJson(value));
const num = (value: number | null): string => (value === null || !Number.isFinite(value) ? 'null' : String(value));

/**
 * Serializes every free-form value of an entry once (docs/architecture.md#ownership-leases-epochs-fencing-and-adoption): the journal and outbox rows,
 * the snapshot, the projections. A value JSON cannot hold throws UnstorableEntryError naming it.
 */
export function serializeEntry(entry: CommitEntry): SerializedEntry {
  const { runId, snapshot, run } = entry;
  const json = (part: string, value: unknown): string => {
    try {
      return toJson(value);
    } catch (thrown) {
      if (thrown instanceof UnstorableJsonError) throw new UnstorableEntryError(runId, snapshot.seq, part, thrown.detail);
      throw thrown;
    }
  };
  const run_id = str(runId);
  return {
    runId,
    isNewRun: entry.isNewRun,
    ...(entry.unchanged === true ? { unchanged: true } : {}),
    ...(entry.deferSnapshot === true ? { deferred: true } : {}),
    events: entry.events.map(
      (e) => `{"run_id":${run_id},"seq":${num(e.seq)},"received_at":${num(e.receivedAt)},"event":${json('event', e.event)},"state_after":${json('state summary', e.stateAfter)}}`,
    ),
    effects: entry.effects.map(
      (fx) => `{"effect_id":${str(fx.effectId)},"run_id":${run_id},"kind":${str(fx.kind)},"payload":${json(`${fx.kind} effect`, fx.payload)}}`,
    ),
    snapshot: {
      seq: snapshot.seq,
      machineId: snapshot.machineId,
      machineVersion: snapshot.machineVersion,
      status: snapshot.status,
      updatedAt: snapshot.updatedAt,
      json: entry.unchanged === true || entry.deferSnapshot === true ? null : json('snapshot', snapshot.snapshot),
    },
    run: {
      workflowName: run.workflowName,
      repository: run.repository,
      status: run.status,
      createdAt: run.createdAt,
      finishedAt: run.finishedAt,
      failureReason: run.failureReason,
      initFailure: json('run init failure', run.initFailure ?? null),
      ...(run.inputSummary === undefined ? {} : { inputSummary: json('input summary', run.inputSummary) }),
    },
    jobs: entry.jobs.map((job) => ({ jobKey: job.jobKey, json: json(`job ${job.jobKey}`, jobColumns(job)) })),
    removedJobs: entry.removedJobs,
    timers: entry.timers,
  };
}

function jobColumns(job: CommitEntry['jobs'][number]): Record<string, unknown> {
  return {
    job_key: job.jobKey,
    status: job.status,
    waiting_reason: job.waitingReason ?? null,
    attempt: job.attempt,
    agent_id: job.agentId,
    dispatch_id: job.dispatchId,
    outcome: job.outcome,
    init_failure: job.initFailure ?? null,
    steps: job.steps,
    duration_ms: job.durationMs,
    outputs: job.outputs ?? null,
    times: job.times ?? null,
  };
}

interface MergedRun {
  isNew: boolean;
  /** The snapshot row to write, if an entry of the batch writes it (one not `deferred`). */
  snapshot: SerializedEntry['snapshot'] | undefined;
  /** The last changed state's run row, if an entry of the batch changed the state. */
  run: SerializedEntry['run'] | undefined;
  /** The latest entry's time: the rows' `updated_at`. */
  updatedAt: number;
  repository: string | null;
  inputSummary: string | undefined;
  jobs: Map<string, string>;
  removedJobs: Set<string>;
  timers: Map<string, TimerChange>;
}

/**
 * Folds a batch into one row per table key. Entries of the same run are consecutive events: the
 * snapshot with the highest seq, the last projection of each job and the last change to each
 * deadline win; repository and input summary, given when the run is created, stick unless
 * restated. Every journal event and every effect is kept, in order.
 */
export function toCommitRows(entries: readonly SerializedEntry[]): CommitRows {
  const rows: CommitRows = {
    newRunIds: [], existingRunIds: [], finishedRunIds: [], events: [], snapshots: [], snapshotSeqs: [], runs: [], jobs: [], removedJobs: [], armed: [], disarmed: [], effects: [],
  };
  const runs = new Map<string, MergedRun>();
  for (const entry of entries) {
    rows.events.push(...entry.events);
    rows.effects.push(...entry.effects);
    mergeEntry(runs, entry);
  }
  for (const [runId, merged] of runs) pushRun(rows, runId, merged);
  return rows;
}

function mergeEntry(runs: Map<string, MergedRun>, entry: SerializedEntry): void {
  let merged = runs.get(entry.runId);
  if (merged === undefined) {
    merged = {
      isNew: false,
      snapshot: undefined,
      run: undefined,
      updatedAt: entry.snapshot.updatedAt,
      repository: null,
      inputSummary: undefined,
      jobs: new Map(),
      removedJobs: new Set(),
      timers: new Map(),
    };
    runs.set(entry.runId, merged);
  }
  merged.isNew ||= entry.isNewRun;
  merged.updatedAt = Math.max(merged.updatedAt, entry.snapshot.updatedAt);
  const stored = merged.snapshot;
  if (entry.deferred !== true && (stored === undefined || entry.snapshot.seq >= stored.seq)) {
    // An unchanged state after a changed one in the same batch: the changed snapshot, at the later seq.
    const { seq, updatedAt } = entry.snapshot;
    merged.snapshot = entry.snapshot.json !== null || stored?.json == null ? entry.snapshot : { ...stored, seq, updatedAt };
  }
  if (entry.unchanged !== true) merged.run = entry.run;
  merged.repository = entry.run.repository ?? merged.repository;
  if (entry.run.inputSummary !== undefined) merged.inputSummary = entry.run.inputSummary;
  for (const job of entry.jobs) merged.jobs.set(job.jobKey, job.json);
  for (const key of entry.removedJobs) merged.removedJobs.add(key);
  for (const timer of entry.timers) merged.timers.set(timer.deadlineId, timer);
}

function pushRun(rows: CommitRows, runId: string, merged: MergedRun): void {
  (merged.isNew ? rows.newRunIds : rows.existingRunIds).push(runId);
  const { snapshot: s, run } = merged;
  const run_id = str(runId);
  const updated_at = num(merged.updatedAt);
  if (s?.json === null) {
    rows.snapshotSeqs.push(`{"run_id":${run_id},"seq":${num(s.seq)},"updated_at":${num(s.updatedAt)}}`);
  } else if (s !== undefined) {
    rows.snapshots.push(
      `{"run_id":${run_id},"seq":${num(s.seq)},"machine_id":${str(s.machineId)},"machine_version":${num(s.machineVersion)},` +
        `"status":${str(s.status)},"updated_at":${num(s.updatedAt)},"snapshot":${s.json}}`,
    );
  }
  if (run !== undefined) {
    pushRunRow(rows, run_id, updated_at, run, merged);
    if ((TERMINAL_RUN_STATUSES as readonly string[]).includes(run.status)) rows.finishedRunIds.push(runId);
  }
  const prefix = `{"run_id":${run_id},"updated_at":${updated_at},`;
  for (const job of merged.jobs.values()) rows.jobs.push(prefix + job.slice(1));
  for (const key of merged.removedJobs) rows.removedJobs.push(`{"run_id":${run_id},"job_key":${str(key)}}`);
  for (const timer of merged.timers.values()) {
    const deadline = `{"run_id":${run_id},"deadline_id":${str(timer.deadlineId)}`;
    if (timer.op === 'disarm') rows.disarmed.push(`${deadline}}`);
    else rows.armed.push(`${deadline},"kind":${str(timer.kind)},"job_key":${str(timer.jobKey)},"due_at":${num(timer.dueAt)}}`);
  }
}

function pushRunRow(rows: CommitRows, run_id: string, updated_at: string, run: SerializedEntry['run'], merged: MergedRun): void {
  rows.runs.push(
    `{"run_id":${run_id},"workflow_name":${str(run.workflowName)},"repository":${str(merged.repository)},"status":${str(run.status)},` +
      `"created_at":${num(run.createdAt)},"updated_at":${updated_at},"finished_at":${num(run.finishedAt)},` +
      `"failure_reason":${str(run.failureReason)},"init_failure":${run.initFailure},"input_summary":${merged.inputSummary ?? 'null'}}`,
  );
}
