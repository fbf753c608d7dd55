import { sql } from 'kysely';
import type { Kysely } from 'kysely';

/**
 * Runs get a number per repository (#1, #2…), as every CI shows. The database hands them out as a run
 * row is first inserted, from one counter row per repository (`run_counters`), so two coordinators
 * never give the same number and a number is never reused. Later writes of the same run (the group
 * commit's `INSERT … ON CONFLICT DO UPDATE`) keep it: the trigger skips a run that already has a row.
 * Runs stored before this migration are numbered in the order they were created.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE runs ADD COLUMN number int8`.execute(db);
  await sql`CREATE TABLE run_counters (repository text PRIMARY KEY, last_number int8 NOT NULL)`.execute(db);
  await sql`
    UPDATE runs SET number = n.number
      FROM (SELECT run_id, row_number() OVER (PARTITION BY coalesce(repository, '') ORDER BY created_at, run_id) AS number FROM runs) AS n
     WHERE runs.run_id = n.run_id`.execute(db);
  await sql`
    INSERT INTO run_counters (repository, last_number)
    SELECT coalesce(repository, ''), max(number) FROM runs GROUP BY coalesce(repository, '')`.execute(db);
  await sql`CREATE UNIQUE INDEX runs_repository_number ON runs (coalesce(repository, ''), number)`.execute(db);
  await sql`CREATE INDEX runs_run_id_prefix ON runs (run_id text_pattern_ops)`.execute(db);
  await sql`
    CREATE FUNCTION switchyard_number_run() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.number IS NOT NULL OR EXISTS (SELECT 1 FROM runs WHERE run_id = NEW.run_id) THEN
        RETURN NEW;
      END IF;
      INSERT INTO run_counters AS c (repository, last_number) VALUES (coalesce(NEW.repository, ''), 1)
        ON CONFLICT (repository) DO UPDATE SET last_number = c.last_number + 1
        RETURNING last_number INTO NEW.number;
      RETURN NEW;
    END $$`.execute(db);
  await sql`CREATE TRIGGER runs_number BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION switchyard_number_run()`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TRIGGER runs_number ON runs`.execute(db);
  await sql`DROP FUNCTION switchyard_number_run()`.execute(db);
  await sql`DROP INDEX runs_run_id_prefix`.execute(db);
  await sql`DROP INDEX runs_repository_number`.execute(db);
  await sql`DROP TABLE run_counters`.execute(db);
  await sql`ALTER TABLE runs DROP COLUMN number`.execute(db);
}
