import { sql } from 'kysely';
import { Counter, Gauge, type Registry } from 'prom-client';
import { runRetentionPass, type RetentionDeps, type RetentionPolicy, type RetentionReport } from './pass.ts';

const JOB = 'retention';
/** A pass's lease: past it another coordinator may run the job (a pass is safe to run twice). */
const LEASE_MS = 15 * 60_000;

export interface RetentionScheduleOptions extends RetentionDeps {
  coordinatorId: string;
  /** Null when runs, or deliveries, are kept forever. */
  runsOlderThanMs: number | null;
  deliveriesOlderThanMs: number | null;
  intervalMs: number;
  registry: Registry;
}

const NEVER = Number.MAX_SAFE_INTEGER;

/**
 * The retention job: its next run time and lease live in `maintenance_jobs`, so one coordinator at
 * a time runs it (whichever claims it when it is due), and a restart neither skips nor repeats a pass.
 * Each coordinator only looks whether it is due, at most once a minute.
 */
export class RetentionSchedule {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> = Promise.resolve();
  private stopped = false;
  private readonly metrics;

  constructor(private readonly options: RetentionScheduleOptions) {
    this.options = { ...options, stopping: () => this.stopped };
    const registers = [options.registry];
    this.metrics = {
      archived: new Counter({ name: 'switchyard_retention_runs_archived_total', help: 'Ended runs archived into the blob store by retention passes', registers }),
      archiveBytes: new Counter({ name: 'switchyard_retention_archive_bytes_total', help: 'Bytes of run archives written', registers }),
      removed: new Counter({ name: 'switchyard_retention_rows_removed_total', help: 'Rows retention removed from the database, by table', labelNames: ['table'], registers }),
      freed: new Counter({ name: 'switchyard_retention_database_bytes_removed_total', help: 'Bytes of database rows retention removed (pg_column_size)', registers }),
      failures: new Counter({ name: 'switchyard_retention_failures_total', help: 'Runs a retention pass could not archive (tried again by the next pass)', registers }),
      lastPass: new Gauge({ name: 'switchyard_retention_last_pass_timestamp_seconds', help: 'When the last retention pass on this coordinator ended', registers }),
    };
  }

  get policy(): RetentionPolicy {
    return { runsOlderThanMs: this.options.runsOlderThanMs ?? NEVER, deliveriesOlderThanMs: this.options.deliveriesOlderThanMs ?? NEVER };
  }

  start(): void {
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One pass now (`switchyard retention`), outside the schedule; a pass is safe beside another. A stop ends it after the run in hand. */
  async runNow(policy: RetentionPolicy, dryRun: boolean): Promise<RetentionReport> {
    const pass = runRetentionPass(this.options, policy, { dryRun });
    this.running = Promise.all([this.running, pass.catch(() => undefined)]); // stop() waits for this pass and a scheduled one
    const report = await pass;
    if (!dryRun) this.record(report);
    return report;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = this.tick().catch((thrown: unknown) => this.options.log.warn({ err: thrown }, 'retention: the scheduled pass failed; it is tried again when due'));
      void this.running.finally(() => this.schedule(Math.min(this.options.intervalMs, 60_000)));
    }, delayMs);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    const { db, now, coordinatorId } = this.options;
    const at = now();
    await sql`INSERT INTO maintenance_jobs (name, next_run_at) VALUES (${JOB}, ${at}) ON CONFLICT (name) DO NOTHING`.execute(db);
    const claimed = await sql`
      UPDATE maintenance_jobs SET holder = ${coordinatorId}, lease_until = ${at + LEASE_MS}
       WHERE name = ${JOB} AND next_run_at <= ${at} AND (lease_until IS NULL OR lease_until < ${at})
      RETURNING name`.execute(db);
    if (claimed.rows.length === 0 || this.stopped) return;
    const report = await runRetentionPass(this.options, this.policy, { dryRun: false });
    this.record(report);
    await sql`
      UPDATE maintenance_jobs SET next_run_at = ${now() + this.options.intervalMs}, holder = NULL, lease_until = NULL, last_report = ${JSON.stringify(report)}::jsonb
       WHERE name = ${JOB} AND holder = ${coordinatorId}`.execute(db);
    this.options.log.info({ archived: report.runs.archived, deliveriesRemoved: report.deliveries.removed, failed: report.failed.length, tookMs: report.tookMs }, 'retention pass done');
  }

  private record(report: RetentionReport): void {
    this.metrics.archived.inc(report.runs.archived);
    this.metrics.archiveBytes.inc(report.runs.archiveBytes);
    for (const [table, rows] of Object.entries(report.runs.rowsRemoved)) this.metrics.removed.inc({ table }, rows);
    this.metrics.removed.inc({ table: 'deliveries' }, report.deliveries.removed);
    this.metrics.freed.inc(report.runs.databaseBytesRemoved + report.deliveries.databaseBytesRemoved);
    this.metrics.failures.inc(report.failed.length);
    this.metrics.lastPass.set(this.options.now() / 1000);
  }
}
