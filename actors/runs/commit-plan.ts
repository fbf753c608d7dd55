import { hash } from 'node:crypto';
import { UNRECORDED_EFFECTS } from '../../machines/intents.ts';
import { mayJoinTail, type StoredSnapshotMark } from './snapshot-policy.ts';

/**
 * What one transition of a run persists: the supervisor's commit path asks here and carries out the
 * answer (docs/architecture.md#what-an-entry-writes). The policy, in one place:
 *
 * 1. Every accepted event writes its journal row: the journal is the record, replayable to the end.
 * 2. The state (the snapshot and the run and job rows) is written only when the event changed it: an
 *    event that left every snapshot object as it was, fired no deadline and asked for nothing that
 *    must survive a restart writes its journal row alone (`journal`).
 * 3. The snapshot is stored, or deferred behind the journal tail while the tail may take the event
 *    (snapshot-policy.ts: under MAX_TAIL_EVENTS, and lighter than the snapshot); a new run, a run that
 *    finished and a run being closed always store it. A restore replays the tail onto the snapshot.
 * 4. Only the jobs whose live snapshot changed since their row was written are projected, and of
 *    those only the rows whose text differs are written.
 * 5. Effects are written to the outbox, except those that live only in this process's memory and
 *    that a restore asks for again by itself (UNRECORDED_EFFECTS: placement requests).
 * 6. A fired deadline's row is deleted with the entry, unless the deadline was armed again since
 *    (its new row stays).
 */

/** What is known of an entry when it is planned. */
export interface EntryFacts {
  /** The event is a deadline firing (its row goes with the entry). */
  firesDeadline: boolean;
  /** The run and every job hold the very snapshot objects they held before the event. */
  stateUnchanged: boolean;
  /** The entry asks for something that must survive a restart: a stored effect, or an inline placement answer. */
  asksDurable: boolean;
  /** Events since the stored snapshot, this one included: 1 when nothing lies between. */
  tail: number;
  isNewRun: boolean;
  /** The event finished the run. */
  runDone: boolean;
  /** The run is being closed (finished or failing): it takes no more events. */
  closing: boolean;
}

export interface EntryPlan {
  /** `journal`: the journal row alone; `state`: the journal row with the run's state. */
  write: 'journal' | 'state';
  /** `store`: the snapshot is stored as of this entry (the tail starts over); `defer`: the entry joins the tail. */
  snapshot: 'store' | 'defer';
}

export function planEntry(facts: EntryFacts, mark: StoredSnapshotMark): EntryPlan {
  const tailTakesIt = mayJoinTail(mark, facts.tail);
  const unchanged = !facts.firesDeadline && facts.stateUnchanged && !facts.asksDurable;
  // Behind a tail the stored snapshot's seq cannot move (the restore would skip the tail): an unchanged
  // entry joins the tail, and one the tail cannot take stores a snapshot instead.
  if (unchanged && (facts.tail === 1 || tailTakesIt)) return { write: 'journal', snapshot: facts.tail > 1 ? 'defer' : 'store' };
  const defer = !facts.isNewRun && !facts.runDone && !facts.closing && tailTakesIt;
  return { write: 'state', snapshot: defer ? 'defer' : 'store' };
}

/** Rule 5: the effects the outbox keeps. */
export function storedEffects<E extends { kind: string }>(effects: readonly E[]): E[] {
  return effects.filter((effect) => !UNRECORDED_EFFECTS.has(effect.kind));
}

/** Rule 2: whether an entry's intents ask for nothing durable (every one lives in memory only). */
export function asksNothingDurable(intents: readonly { type: string }[]): boolean {
  return intents.every((intent) => UNRECORDED_EFFECTS.has(intent.type));
}

/** A job row as last written: a digest of its text, and the live snapshot it was projected from. */
export interface WrittenJob {
  digest: string;
  from: unknown;
}

/** Rule 4, first half: a job is projected only if its live snapshot is not the one its written row came from. */
export function jobChanged(written: ReadonlyMap<string, WrittenJob>, jobKey: string, live: unknown): boolean {
  return written.get(jobKey)?.from !== live;
}

/**
 * Rule 4, second half: of the projected job rows, those whose text differs from the written one.
 * `written` is brought up to date (it describes what is stored once the entry commits).
 */
export function jobRowsToWrite<R extends { jobKey: string; json: string }>(rows: readonly R[], written: Map<string, WrittenJob>, liveOf: (jobKey: string) => unknown): R[] {
  return rows.filter((row) => {
    const digest = hash('sha1', row.json, 'base64');
    const from = liveOf(row.jobKey);
    const last = written.get(row.jobKey);
    if (last?.digest === digest) {
      last.from = from;
      return false;
    }
    written.set(row.jobKey, { digest, from });
    return true;
  });
}
