import type { CommitEntry, JobProjection, RunProjection, SnapshotRow, TimerChange } from './commit.types.ts';
import { toJson, toNullableJson } from './json.ts';

/** Column arrays for one group commit, each bound as a single array parameter and unnest()ed. */
export interface CommitRows {
  newRunIds: string[];
  existingRunIds: string[];
  events: { runId: string[]; seq: number[]; event: string[]; receivedAt: number[]; stateAfter: string[] };
  snapshots: {
    runId: string[];
    seq: number[];
    machineId: string[];
    machineVersion: number[];
    snapshot: string[];
    status: string[];
    updatedAt: number[];
  };
  runs: {
    runId: string[];
    workflowName: string[];
    repository: (string | null)[];
    status: string[];
    createdAt: number[];
    updatedAt: number[];
    finishedAt: (number | null)[];
    failureReason: (string | null)[];
    initFailure: (string | null)[];
    inputSummary: (string | null)[];
  };
  jobs: {
    runId: string[];
    jobKey: string[];
    status: string[];
    waitingReason: (string | null)[];
    attempt: number[];
    agentId: (string | null)[];
    dispatchId: (string | null)[];
    outcome: (string | null)[];
    initFailure: (string | null)[];
    updatedAt: number[];
  };
  armed: { runId: string[]; deadlineId: string[]; kind: string[]; jobKey: (string | null)[]; dueAt: number[] };
  disarmed: { runId: string[]; deadlineId: string[] };
  effects: { effectId: string[]; runId: string[]; kind: string[]; payload: string[] };
}

interface MergedRun {
  isNew: boolean;
  snapshot: SnapshotRow;
  run: RunProjection;
  repository: string | null;
  inputSummary: unknown;
  jobs: Map<string, JobProjection>;
  timers: Map<string, TimerChange>;
}

/**
 * Folds a batch into one row per table key. Entries of the same run are consecutive events: the
 * snapshot with the highest seq, the last projection of each job and the last change to each
 * deadline win; repository and input summary, given when the run is created, stick unless
 * restated. Every journal event and every effect is kept, in order.
 */
export function toCommitRows(entries: readonly CommitEntry[]): CommitRows {
  const rows = emptyRows();
  const runs = new Map<string, MergedRun>();
  for (const entry of entries) {
    for (const e of entry.events) {
      pushRow(rows.events, { runId: entry.runId, seq: e.seq, event: toJson(e.event), receivedAt: e.receivedAt, stateAfter: toJson(e.stateAfter) });
    }
    for (const fx of entry.effects) {
      pushRow(rows.effects, { effectId: fx.effectId, runId: entry.runId, kind: fx.kind, payload: toJson(fx.payload) });
    }
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
  for (const timer of entry.timers) merged.timers.set(timer.deadlineId, timer);
}

function pushRun(rows: CommitRows, runId: string, merged: MergedRun): void {
  (merged.isNew ? rows.newRunIds : rows.existingRunIds).push(runId);
  const { snapshot: s, run } = merged;
  pushRow(rows.snapshots, {
    runId,
    seq: s.seq,
    machineId: s.machineId,
    machineVersion: s.machineVersion,
    snapshot: toJson(s.snapshot),
    status: s.status,
    updatedAt: s.updatedAt,
  });
  pushRow(rows.runs, {
    runId,
    workflowName: run.workflowName,
    repository: merged.repository,
    status: run.status,
    createdAt: run.createdAt,
    updatedAt: s.updatedAt,
    finishedAt: run.finishedAt,
    failureReason: run.failureReason,
    initFailure: toNullableJson(run.initFailure),
    inputSummary: toNullableJson(merged.inputSummary),
  });
  for (const job of merged.jobs.values()) {
    pushRow(rows.jobs, {
      runId,
      jobKey: job.jobKey,
      status: job.status,
      waitingReason: toNullableJson(job.waitingReason),
      attempt: job.attempt,
      agentId: job.agentId,
      dispatchId: job.dispatchId,
      outcome: job.outcome,
      initFailure: toNullableJson(job.initFailure),
      updatedAt: s.updatedAt,
    });
  }
  for (const timer of merged.timers.values()) {
    if (timer.op === 'disarm') pushRow(rows.disarmed, { runId, deadlineId: timer.deadlineId });
    else pushRow(rows.armed, { runId, deadlineId: timer.deadlineId, kind: timer.kind, jobKey: timer.jobKey, dueAt: timer.dueAt });
  }
}

/** Appends one row to a set of parallel column arrays. */
function pushRow<C extends { [K in keyof C]: unknown[] }>(columns: C, row: { [K in keyof C]: C[K][number] }): void {
  for (const key in row) columns[key].push(row[key]);
}

function emptyRows(): CommitRows {
  return {
    newRunIds: [],
    existingRunIds: [],
    events: { runId: [], seq: [], event: [], receivedAt: [], stateAfter: [] },
    snapshots: { runId: [], seq: [], machineId: [], machineVersion: [], snapshot: [], status: [], updatedAt: [] },
    runs: {
      runId: [], workflowName: [], repository: [], status: [], createdAt: [], updatedAt: [],
      finishedAt: [], failureReason: [], initFailure: [], inputSummary: [],
    },
    jobs: {
      runId: [], jobKey: [], status: [], waitingReason: [], attempt: [], agentId: [],
      dispatchId: [], outcome: [], initFailure: [], updatedAt: [],
    },
    armed: { runId: [], deadlineId: [], kind: [], jobKey: [], dueAt: [] },
    disarmed: { runId: [], deadlineId: [] },
    effects: { effectId: [], runId: [], kind: [], payload: [] },
  };
}
