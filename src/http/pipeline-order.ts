import { lockJobNameOf } from '../../machines/run.matrix.ts';
import { initTargetOf, isBuildJobKey, needEdgesOf } from '../../machines/run.plan.ts';
import { isRunSource } from '../pipeline/run-source.ts';

interface JobRowLike {
  job_key: string;
}

/** A job row with the jobs it needs (their names in the lock file, or a build or init job's key) and its stage. */
export type OrderedJob<T> = T & { needs: string[]; stage: number };

/**
 * The run's jobs in pipeline order: by stage of the needs graph (a job's stage is one more than the
 * latest stage it needs; the build job and jobs that need nothing are stage 0), then by name, each
 * with what it needs. Every job of a run with a build job needs it; a job with an init job needs it,
 * and the init job needs what its job needs. Rows of a run without a stored source keep their order.
 */
export function inPipelineOrder<T extends JobRowLike>(jobs: readonly T[], inputSummary: unknown): OrderedJob<T>[] {
  if (!isRunSource(inputSummary)) return jobs.map((job) => ({ ...job, needs: [], stage: 0 }));
  const workflow = inputSummary.workflow.name;
  const lockNeeds = new Map(inputSummary.workflow.jobs.flatMap((job) => (job._type === 'static' ? [[job.name, needEdgesOf(job.needs).map((edge) => edge.name)] as const] : [])));
  const build = jobs.find((job) => isBuildJobKey(job.job_key))?.job_key ?? null;
  const inits = new Map(jobs.flatMap((job) => {
    const target = initTargetOf(job.job_key, workflow);
    return target === null ? [] : [[target, job.job_key] as const];
  }));
  const needsOf = (jobKey: string): string[] => {
    if (jobKey === build) return [];
    const target = initTargetOf(jobKey, workflow);
    const name = target ?? lockJobNameOf(jobKey);
    const init = target === null ? inits.get(name) : undefined;
    return [...(build ? [build] : []), ...(init ? [init] : []), ...(lockNeeds.get(name) ?? [])];
  };
  const stages = new Map<string, number>();
  const stageOf = (name: string, seen: ReadonlySet<string>): number => {
    const known = stages.get(name);
    if (known !== undefined) return known;
    if (seen.has(name)) return 0; // a cycle cannot pass the lock-file checks; it must not hang the page either
    const deeper = new Set(seen).add(name);
    const stage = Math.max(-1, ...needsOf(name).map((need) => stageOf(need, deeper))) + 1;
    stages.set(name, stage);
    return stage;
  };
  const ordered = jobs.map((job) => {
    const key = initTargetOf(job.job_key, workflow) === null && job.job_key !== build ? lockJobNameOf(job.job_key) : job.job_key;
    return { ...job, needs: needsOf(job.job_key), stage: stageOf(key, new Set()) };
  });
  return ordered.sort((a, b) => a.stage - b.stage || a.job_key.localeCompare(b.job_key));
}
