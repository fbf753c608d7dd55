import type { SerializedEntry } from './ports.ts';

/**
 * The most events a run's journal tail holds: the events after its stored snapshot, which a restore
 * replays onto it (docs/architecture.md#snapshots-and-journal-tails).
 */
export const MAX_TAIL_EVENTS = 16;

/** What a run handle remembers of its stored snapshot and of the journal tail after it. */
export interface StoredSnapshotMark {
  /** The seq of the state the stored snapshot row holds; the journal rows after it are the run's tail. */
  storedSeq: number;
  /** The JSON length of the stored snapshot; 0 when not known (a restored run), so the next change stores one. */
  snapshotBytes: number;
  /** The JSON length of the journal rows after it. */
  tailBytes: number;
}

/**
 * Whether the event that makes the tail `tail` events long (1: it is the first after the snapshot) may
 * join it instead of storing a snapshot: the tail stays under MAX_TAIL_EVENTS and the journal written
 * since the snapshot still weighs less than the snapshot. A run of many jobs has a large snapshot and
 * small events, so it writes the snapshot about once every MAX_TAIL_EVENTS events instead of every
 * few; a run whose events are large writes it about as often as its journal outweighs it.
 */
export function mayJoinTail(mark: StoredSnapshotMark, tail: number): boolean {
  return tail < MAX_TAIL_EVENTS && mark.tailBytes < mark.snapshotBytes;
}

/** Records what a serialized entry leaves stored: a new snapshot, a longer tail, or (an unchanged entry with no tail) neither. */
export function noteSerialized(mark: StoredSnapshotMark, entry: SerializedEntry): void {
  if (entry.snapshot.json !== null) {
    mark.snapshotBytes = entry.snapshot.json.length;
    mark.tailBytes = 0;
  } else if (entry.deferred === true) {
    for (const row of entry.events) mark.tailBytes += row.length;
  }
}
