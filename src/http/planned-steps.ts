import { isTerminalJobStatus } from '../../machines/status.ts';
import { lockJobNameOf } from '../../machines/run.matrix.ts';
import { isInitJobKey } from '../../machines/run.plan.ts';
import { isRunSource } from '../pipeline/run-source.ts';
import { lockStepNames } from './step-names.ts';

/** How a step the agent never reported shows: `not_run` once its job has ended, `pending` before. */
export type UnreportedStepStatus = 'not_run' | 'pending';

interface JobRowWithSteps {
  job_key: string;
  status: string;
  steps: unknown;
}

/**
 * Each job's steps as the agent reported them, then every step of its lock-file job it did not
 * report, in order: a job that ended early lists the steps that never started as `not_run`, a job
 * still running lists them `pending`. Init jobs and jobs not in the lock file are left as reported.
 */
export function withPlannedSteps<T extends JobRowWithSteps>(jobs: T[], inputSummary: unknown): T[] {
  const source = isRunSource(inputSummary) ? inputSummary : null;
  if (!source) return jobs;
  const planned = new Map<string, string[]>();
  for (const job of source.workflow.jobs) if (job._type === 'static') planned.set(job.name, lockStepNames(job.steps));
  return jobs.map((job) => {
    const names = isInitJobKey(job.job_key) ? undefined : planned.get(lockJobNameOf(job.job_key));
    if (!names) return job;
    const reported = Array.isArray(job.steps) ? (job.steps as { index?: unknown }[]) : [];
    const seen = new Set(reported.map((step) => step.index));
    const status: UnreportedStepStatus = isTerminalJobStatus(job.status) ? 'not_run' : 'pending';
    const missing = names.flatMap((name, index) => (seen.has(index) ? [] : [{ index, name, status, hook: null, durationMs: null, exitCode: null, error: null }]));
    if (missing.length === 0) return job;
    const steps = [...reported, ...missing].sort((a, b) => Number(a.index) - Number(b.index));
    return { ...job, steps };
  });
}
