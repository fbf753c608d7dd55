import { sql, type Kysely } from 'kysely';
import type { CommitEntry } from '../../../src/db/commit.types.ts';
import type { Schema } from '../../../src/db/schema.ts';

export const TABLES = ['coordinators', 'run_owner', 'run_events', 'run_snapshots', 'runs', 'jobs', 'timers', 'outbox'] as const;

/** One accepted event of a run, with a snapshot and projections that name its seq. */
export function entry(runId: string, seq: number, overrides: Partial<CommitEntry> = {}): CommitEntry {
  const at = 1_000 + seq;
  return {
    runId,
    isNewRun: seq === 1,
    events: [{ seq, event: { type: 'test.event', at, n: seq }, receivedAt: at, stateAfter: { value: `s${seq}` } }],
    snapshot: {
      seq,
      machineId: 'run',
      machineVersion: 1,
      snapshot: { status: 'active', value: `s${seq}`, context: { seq } },
      status: 'running',
      updatedAt: at,
    },
    run: {
      workflowName: 'build',
      repository: seq === 1 ? 'acme/widgets' : null,
      status: 'running',
      createdAt: 1_001,
      finishedAt: null,
      failureReason: null,
      initFailure: null,
    },
    jobs: [
      {
        jobKey: 'compile',
        status: 'queued',
        waitingReason: null,
        attempt: seq,
        agentId: null,
        dispatchId: null,
        outcome: null,
        initFailure: null,
        steps: [],
        durationMs: null,
        outputs: null,
      },
    ],
    removedJobs: [],
    timers: [],
    effects: [],
    ...overrides,
  };
}

export async function rowCounts(db: Kysely<Schema>): Promise<Record<(typeof TABLES)[number], number>> {
  const { rows } = await sql<Record<(typeof TABLES)[number], number>>`
    SELECT ${sql.join(TABLES.map((t) => sql`(SELECT count(*) FROM ${sql.table(t)}) AS ${sql.ref(t)}`))}`.execute(db);
  const counts = rows[0];
  if (counts === undefined) throw new Error('no counts');
  return counts;
}
