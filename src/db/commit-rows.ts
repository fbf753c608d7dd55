import type { CommitEntry, JobProjection, RunProjection, SnapshotRow, TimerChange } from './commit.types.ts';

/**
 * One group commit as row objects per table, keyed by column name: each list is sent as ONE jsonb
 * parameter and expanded with jsonb_to_recordset (far cheaper to parse than a Postgres array literal).
 */
export interface CommitRows {
  newRunIds: string[];
  existingRunIds: string[];
  events: { run_id: string; seq: number; event: unknown; received_at: number; state_after: unknown }[];
  snapshots: {
    run_id: string;
    seq: number;
    machine_id: string;
    machine_version: number;
    snapshot: unknown;
    status: string;
    updated_at: number;
  }[];
  runs: {
    run_id: string;
    workflow_name: string;
    repository: string | null;
    status: string;
    created_at: number;
    updated_at: number;
    finished_at: number | null;
    failure_reason: string | null;
    init_failure: unknown;
    input_summary: unknown;
  }[];
  jobs: {
    run_id: string;
    job_key: string;
    status: string;
    waiting_reason: unknown;
    attempt: number;
    agent_id: string | null;
    dispatch_id: string | null;
    outcome: string | null;
    init_failure: unknown;
    updated_at: number;
    steps: unknown[];
    duration_ms: number | null;
    outputs: unknown;
  }[];
  removedJobs: { run_id: string; job_key: string }[];
  armed: { run_id: string; deadline_id: string; kind: string; job_key: string | null; due_at: number }[];
  disarmed: { run_id: string; deadline_id: string }[];
  effects: { effect_id: string; run_id: string; kind: string; payload: unknown }[];
}

interface MergedRun {
  isNew: boolean;
  snapshot: SnapshotRow;
  run: RunProjection;
  repository: string | null;
  inputSummary: unknown;
  jobs: Map<string, JobProjection>;
  removedJobs: Set<string>;
  timers: Map<string, TimerChange>;
}

/**
 * Folds a batch into one row per table key. Entries of the same run are consecutive events: the
 * snapshot with the highest seq, the last projection of each job and the last change to each
 * deadline win; repository and input summary, given when the run is created, stick unless
 * restated. Every journal event and every effect is kept, in order.
 */
export function toCommitRows(entries: readonly CommitEntry[]): CommitRows {
  const rows: CommitRows = {
    newRunIds: [], existingRunIds: [], events: [], snapshots: [], runs: [], jobs: [], removedJobs: [], armed: [], disarmed: [], effects: [],
  };
  const runs = new Map<string, MergedRun>();
  for (const entry of entries) {
    const run_id = entry.runId;
    for (const e of entry.events) {
      rows.events.push({ run_id, seq: e.seq, event: e.event, received_at: e.receivedAt, state_after: e.stateAfter });
    }
    for (const fx of entry.effects) rows.effects.push({ effect_id: fx.effectId, run_id, kind: fx.kind, payload: fx.payload });
    mergeEntry(runs, entry);
  }
  for (const [runId, merged] of runs) pushRun(rows, runId, merged);
  return rows;
}

function mergeEntry(runs: Map<string, MergedRun>, entry: CommitEntry): void {
  let merged = runs.get(entry.runId);
  if (merged === undefined) {
    merged = {
      isNew: false,
      snapshot: entry.snapshot,
      run: entry.run,
      repository: null,
      inputSummary: undefined,
      jobs: new Map(),
      removedJobs: new Set(),
      timers: new Map(),
    };
    runs.set(entry.runId, merged);
  }
  merged.isNew ||= entry.isNewRun;
  if (entry.snapshot.seq >= merged.snapshot.seq) merged.snapshot = entry.snapshot;
  merged.run = entry.run;
  merged.repository = entry.run.repository ?? merged.repository;
  if (entry.run.inputSummary !== undefined) merged.inputSummary = entry.run.inputSummary;
  for (const job of entry.jobs) merged.jobs.set(job.jobKey, job);
  for (const key of entry.removedJobs) merged.removedJobs.add(key);
  for (const timer of entry.timers) merged.timers.set(timer.deadlineId, timer);
}

function pushRun(rows: CommitRows, run_id: string, merged: MergedRun): void {
  (merged.isNew ? rows.newRunIds : rows.existingRunIds).push(run_id);
  const { snapshot: s, run } = merged;
  rows.snapshots.push({
    run_id,
    seq: s.seq,
    machine_id: s.machineId,
    machine_version: s.machineVersion,
    snapshot: s.snapshot,
    status: s.status,
    updated_at: s.updatedAt,
  });
  rows.runs.push({
    run_id,
    workflow_name: run.workflowName,
    repository: merged.repository,
    status: run.status,
    created_at: run.createdAt,
    updated_at: s.updatedAt,
    finished_at: run.finishedAt,
    failure_reason: run.failureReason,
    init_failure: run.initFailure ?? null,
    input_summary: merged.inputSummary ?? null,
  });
  for (const job of merged.jobs.values()) {
    rows.jobs.push({
      run_id,
      job_key: job.jobKey,
      status: job.status,
      waiting_reason: job.waitingReason ?? null,
      attempt: job.attempt,
      agent_id: job.agentId,
      dispatch_id: job.dispatchId,
      outcome: job.outcome,
      init_failure: job.initFailure ?? null,
      updated_at: s.updatedAt,
      steps: job.steps,
      duration_ms: job.durationMs,
      outputs: job.outputs ?? null,
    });
  }
  for (const job_key of merged.removedJobs) rows.removedJobs.push({ run_id, job_key });
  for (const timer of merged.timers.values()) {
    if (timer.op === 'disarm') rows.disarmed.push({ run_id, deadline_id: timer.deadlineId });
    else rows.armed.push({ run_id, deadline_id: timer.deadlineId, kind: timer.kind, job_key: timer.jobKey, due_at: timer.dueAt });
  }
}
