import type { CommitEntry, SerializedEntry } from '../../actors/runs/ports.ts';

/** The supervisor's port (actors/ports.ts) defines what a commit writes; these name its parts. */
export type { CommitEntry, RunFailureRecord, SerializedEntry, TimerChange } from '../../actors/runs/ports.ts';
export type JournalEvent = CommitEntry['events'][number];
export type SnapshotRow = CommitEntry['snapshot'];
export type RunProjection = CommitEntry['run'];
export type JobProjection = CommitEntry['jobs'][number];
export type OutboxEffect = CommitEntry['effects'][number];

export interface CommitBatchInput {
  coordinatorId: string;
  epoch: number;
  now: number;
  entries: readonly SerializedEntry[];
}
