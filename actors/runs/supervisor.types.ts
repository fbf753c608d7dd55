import type { Actor } from 'xstate';
import type { Logger } from 'pino';
import type { Clock } from '../clock.ts';
import type { FencedError } from './errors.ts';
import type { CommitRetryPolicy } from './group-commit.ts';
import type { RuntimeRunMachine } from './intent-recorder.ts';
import type { RuntimeMetrics } from './metrics.ts';
import type { Effect, RunCommit, RunStore } from './ports.ts';
import type { InlinePlacement } from './inline-placement.ts';
import type { StoredSnapshotMark } from './snapshot-policy.ts';
import type { WrittenJob } from './commit-plan.ts';
import type { DispatchPathTraces } from '../../lib/stage-trace.ts';

/** One run actor owned here, with what its commits need to remember. */
export interface RunHandle extends StoredSnapshotMark {
  actor: Actor<RuntimeRunMachine>;
  seq: number;
  /** Each job's projection as last written, so an event rewrites only the jobs it changed. */
  written: Map<string, WrittenJob>;
  /** Finished or failing: it takes no more events and leaves memory once its last entry settles. */
  closing: boolean;
}

export interface SupervisorOptions {
  store: RunStore;
  clock: Clock;
  log: Logger;
  metrics: RuntimeMetrics;
  maxBatch: number;
  batching: boolean;
  /** Runs committed effects (dispatches, cancels, placement requests). */
  executeEffects: (effects: Effect[]) => void;
  /**
   * The effects of an entry just queued for commit, before it commits: work that sends nothing may
   * start (a dispatch's frame is built while its entry commits). They run, as ever, after the commit.
   */
  onSubmitted?: (effects: Effect[]) => void;
  /** The entry was not committed: what `onSubmitted` started for its effects is dropped. */
  onNotCommitted?: (effects: Effect[]) => void;
  /** Called once when a write finds this coordinator fenced; the supervisor has already stopped. */
  onFenced: (error: FencedError) => void;
  /** Told of every entry once it is durable (run and dispatch metrics). */
  onCommitted?: (entry: RunCommit) => void;
  /** Grants placement requests within the transition that made them; without it every request is an effect. */
  inlinePlacement?: InlinePlacement;
  /** Where traced runs' time goes (lib/stage-trace.ts); their creating entry marks its stages. */
  traces?: DispatchPathTraces;
  /** Bound of transient commit retries; the default suits production. */
  commitRetry?: CommitRetryPolicy;
}

export interface RestoreReport {
  restored: string[];
  refused: { runId: string; error: Error }[];
}
