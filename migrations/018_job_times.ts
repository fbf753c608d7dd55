import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * When each job last entered each status (`pending` is its creation), as the job chart stamps them
 * (`enteredAt`): the API and the runs page show a job's queued time (created → dispatched) and its run
 * time from them. Jobs written before it have none.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE jobs ADD COLUMN times jsonb`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE jobs DROP COLUMN times`.execute(db);
}
