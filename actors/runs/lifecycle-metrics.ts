import { Counter, Gauge, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';
import { isTerminalJobStatus, isTerminalRunStatus } from '../../machines/status.ts';
import type { CommitEntry } from './ports.ts';
import { jobKeyOf } from '../../lib/job-key.ts';

/** What the metrics read of the runs owned here when they are scraped. */
export interface LiveRuns {
  /** Runs owned here that have not finished. */
  activeCount(): number;
  /** Jobs owned here that wait, by the kind of their waiting reason (placement, capacity, concurrency, gates). */
  waitingCounts(): ReadonlyMap<string, number>;
}

interface SeenJob {
  status: string;
  dispatchId: string | null;
  initFailed: boolean;
  /** When the current attempt was queued: the start of its pickup time. */
  queuedAt: number | null;
}

/** The event types that end an attempt, and the cause a requeue after them is counted under. */
const REQUEUE_CAUSES: Record<string, string> = {
  'timer.ack.expired': 'ack_timeout',
  'agent.job.reject': 'rejected',
  'agent.job.lost': 'agent_lost',
  'agent.disconnected': 'agent_lost',
  'timer.recovery.expired': 'agent_lost',
  'timer.replay.expired': 'agent_lost',
  'timer.lease.expired': 'lease_expired',
  'provision.failed': 'provisioning',
};

/** Jobs followed at most; a job forgotten early only misses a pickup time or a requeue count. */
const MAX_TRACKED_JOBS = 100_000;

type Entry = Pick<CommitEntry, 'runId' | 'run' | 'jobs' | 'events' | 'removedJobs'>;

/**
 * Run and dispatch metrics (runs, their durations, init failures, requeues by cause, ack timeouts,
 * recoveries, stale jobs, pickup time), counted from committed entries: what is counted is what is
 * durable. Jobs waiting and runs active are read from the live runs at each scrape.
 */
export class LifecycleMetrics {
  private readonly jobs = new Map<string, SeenJob>();
  private readonly finishedRuns = new Set<string>();
  private readonly runsTotal: Counter;
  private readonly runDuration: Histogram;
  private readonly initFailures: Counter;
  private readonly ackTimeouts: Counter;
  private readonly requeues: Counter;
  private readonly exhausted: Counter;
  private readonly recoveries: Counter;
  private readonly stale: Counter;
  private readonly pickup: Histogram;

  constructor(registry: Registry, live: LiveRuns) {
    const registers = [registry];
    this.runsTotal = new Counter({ name: 'switchyard_runs_total', help: 'Runs finished, by status', labelNames: ['status'], registers });
    for (const status of ['success', 'failed', 'cancelled']) this.runsTotal.inc({ status }, 0);
    this.runDuration = new Histogram({ name: 'switchyard_run_duration_seconds', help: 'Time from run creation to its end', buckets: [1, 5, 15, 60, 300, 900, 3600, 14_400], registers });
    this.initFailures = new Counter({ name: 'switchyard_init_failures_total', help: 'Runs and jobs that failed before executing a step, by category', labelNames: ['category'], registers });
    this.ackTimeouts = new Counter({ name: 'switchyard_dispatch_ack_timeouts_total', help: 'Dispatches not acknowledged in time (their attempt is requeued)', registers });
    this.requeues = new Counter({ name: 'switchyard_requeues_total', help: 'Attempts given up and queued again, by cause', labelNames: ['cause'], registers });
    this.exhausted = new Counter({ name: 'switchyard_dispatch_attempts_exhausted_total', help: 'Jobs failed because every dispatch attempt was used', registers });
    this.recoveries = new Counter({ name: 'switchyard_recovery_total', help: 'Jobs that lost their agent, by outcome: reclaimed, requeued or failed', labelNames: ['outcome'], registers });
    this.stale = new Counter({ name: 'switchyard_jobs_stale_total', help: 'Jobs ended timed_out_stale (queued too long after a dispatch)', registers });
    this.pickup = new Histogram({ name: 'switchyard_job_pickup_seconds', help: 'Time from queued to running, per attempt', buckets: [0.01, 0.05, 0.25, 1, 5, 30, 120, 600], registers });
    new Gauge({
      name: 'switchyard_runs_active',
      help: 'Runs owned by this coordinator that have not finished',
      registers,
      collect() {
        this.set(live.activeCount());
      },
    });
    new Gauge({
      name: 'switchyard_jobs_waiting',
      help: 'Jobs owned here that wait, by the kind of their waiting reason',
      labelNames: ['reason'],
      registers,
      collect() {
        this.reset();
        for (const [reason, count] of live.waitingCounts()) this.set({ reason }, count);
      },
    });
  }

  /** One committed entry of a run. */
  observe(entry: Entry): void {
    const last = entry.events[entry.events.length - 1];
    const at = last?.receivedAt ?? Date.now();
    for (const job of entry.jobs) this.observeJob(entry, job, at);
    for (const jobKey of entry.removedJobs) this.jobs.delete(jobKeyOf(entry.runId, jobKey));
    this.observeRun(entry);
  }

  private observeRun(entry: Entry): void {
    const { run, runId } = entry;
    if (!isTerminalRunStatus(run.status) || this.finishedRuns.has(runId)) return;
    this.finishedRuns.add(runId);
    if (this.finishedRuns.size > 10_000) this.finishedRuns.delete(this.finishedRuns.values().next().value as string);
    this.runsTotal.inc({ status: run.status });
    if (run.finishedAt !== null) this.runDuration.observe(Math.max(0, run.finishedAt - run.createdAt) / 1000);
    const failure = run.initFailure as { category?: string } | null;
    if (failure?.category) this.initFailures.inc({ category: failure.category });
    for (const job of entry.jobs) this.jobs.delete(jobKeyOf(runId, job.jobKey));
  }

  private observeJob(entry: Entry, job: Entry['jobs'][number], at: number): void {
    const key = jobKeyOf(entry.runId, job.jobKey);
    const before = this.jobs.get(key);
    // A run's own init failure is copied onto its jobs; it is counted once, with the run.
    const initFailure = job.initFailure as { category?: string; scope?: string } | null;
    if (initFailure?.category && initFailure.scope !== 'run' && !before?.initFailed) this.initFailures.inc({ category: initFailure.category });
    const seen: SeenJob = { status: job.status, dispatchId: job.dispatchId, initFailed: initFailure !== null, queuedAt: before?.queuedAt ?? null };
    if (before) this.transition(entry, job, before, seen, at);
    if (!before && job.status === 'queued') seen.queuedAt = at;
    if (isTerminalJobStatus(job.status)) this.jobs.delete(key);
    else this.jobs.set(key, seen);
    // Jobs of runs that moved to another coordinator never end here: the oldest are forgotten.
    if (this.jobs.size > MAX_TRACKED_JOBS) this.jobs.delete(this.jobs.keys().next().value as string);
  }

  private transition(entry: Entry, job: Entry['jobs'][number], before: SeenJob, after: SeenJob, at: number): void {
    const attemptEnded = before.dispatchId !== null && after.dispatchId !== before.dispatchId;
    if (attemptEnded) {
      const cause = causeOf(entry, job.jobKey);
      if (cause === 'ack_timeout') this.ackTimeouts.inc();
      if (!isTerminalJobStatus(after.status)) this.requeues.inc({ cause });
      else if (after.status === 'failed' && job.outcome?.startsWith('re-dispatch attempts exhausted')) this.exhausted.inc();
    }
    if (before.status === after.status) return;
    if (after.status === 'queued' && after.queuedAt === null) after.queuedAt = at;
    if (after.status === 'running' && before.queuedAt !== null) {
      this.pickup.observe(Math.max(0, at - before.queuedAt) / 1000);
      after.queuedAt = null;
    }
    if (before.status === 'recovering') this.recoveries.inc({ outcome: recoveryOutcome(after.status) });
    if (after.status === 'timed_out_stale') this.stale.inc();
  }
}

function recoveryOutcome(status: string): string {
  if (status === 'running') return 'reclaimed';
  return isTerminalJobStatus(status) ? 'failed' : 'requeued';
}

/** The cause of whatever ended the job's attempt in this entry: the first event about it that ends attempts. */
function causeOf(entry: Entry, jobKey: string): string {
  for (const { event } of entry.events) {
    const { type, jobKey: about } = event as { type?: unknown; jobKey?: unknown };
    if (typeof type === 'string' && type in REQUEUE_CAUSES && (about === undefined || about === jobKey)) return REQUEUE_CAUSES[type] as string;
  }
  return 'other';
}

