import type { LockFile, LockJob, LockNeed, LockStaticJob, LockWorkflow } from '../../machines/lock.types.ts';
import { expressionProblem } from './check-expression.ts';
import { matcherRegexProblem, triggerRegexProblem } from './check-regex.ts';
import { stepsProblem } from './check-steps.ts';
import type { LockProblem } from './errors.ts';

type Path = readonly PropertyKey[];

/**
 * Rules 5–8 of docs/lockfile.md#what-counts-as-corrupt over a structurally valid lock file, in document order:
 * per workflow its name, triggers, then per job its name, matchers, needs, inline values and steps,
 * and last the workflow's `needs` cycles.
 */
export function findSemanticProblem(lock: LockFile): LockProblem | null {
  const workflowNames = new Set<string>();
  for (const [index, workflow] of lock.workflows.entries()) {
    const path = ['workflows', index];
    if (workflowNames.has(workflow.name)) {
      return graphProblem([...path, 'name'], `duplicate workflow name ${JSON.stringify(workflow.name)}`);
    }
    workflowNames.add(workflow.name);
    const problem = workflowProblem(workflow, path);
    if (problem !== null) return problem;
  }
  return null;
}

/** Rules 5–8 for one workflow given on its own (a run started by hand), with paths under `workflow`. */
export function findWorkflowProblem(workflow: LockWorkflow): LockProblem | null {
  return workflowProblem(workflow, ['workflow']);
}

function workflowProblem(workflow: LockWorkflow, path: Path): LockProblem | null {
  for (const [index, trigger] of (workflow.triggers ?? []).entries()) {
    const problem = trigger === null ? null : triggerRegexProblem(trigger, [...path, 'triggers', index]);
    if (problem !== null) return problem;
  }
  const jobNames = new Set(staticJobs(workflow.jobs).map(([, job]) => job.name));
  const seen = new Set<string>();
  for (const [index, job] of workflow.jobs.entries()) {
    const jobPath = [...path, 'jobs', index];
    if (job._type === 'static') {
      if (seen.has(job.name)) {
        return graphProblem([...jobPath, 'name'], `duplicate job name ${JSON.stringify(job.name)}`);
      }
      seen.add(job.name);
    }
    const problem = unknownNeedProblem(job.needs ?? [], jobNames, [...jobPath, 'needs']) ??
      (job._type === 'static' ? staticJobProblem(job, jobPath) : null);
    if (problem !== null) return problem;
  }
  return cycleProblem(workflow.jobs, path);
}

function staticJobProblem(job: LockStaticJob, path: Path): LockProblem | null {
  return (
    matcherRegexProblem(job.runsOn, [...path, 'runsOn']) ??
    matcherRegexProblem(job.excludeLabels, [...path, 'excludeLabels']) ??
    fanoutRegexProblem(job, path) ??
    inlineProblem(job, path) ??
    stepsProblem(job.steps, [...path, 'steps'])
  );
}

function fanoutRegexProblem(job: LockStaticJob, path: Path): LockProblem | null {
  if (job.runsOnAll === undefined) return null;
  for (const [index, matchers] of job.runsOnAll.include.entries()) {
    const problem = matcherRegexProblem(matchers, [...path, 'runsOnAll', 'include', index]);
    if (problem !== null) return problem;
  }
  return matcherRegexProblem(job.runsOnAll.exclude, [...path, 'runsOnAll', 'exclude']);
}

/** Inline expressions of `environments[].value`, `env` and `concurrencyGroup` (rule 7). */
function inlineProblem(job: LockStaticJob, path: Path): LockProblem | null {
  const inline: [Path, string][] = [];
  for (const [index, environment] of (job.environments ?? []).entries()) {
    if (typeof environment.value !== 'string') {
      inline.push([[...path, 'environments', index, 'value', 'expression'], environment.value.expression]);
    }
  }
  if (job.env?._type === 'inline' && typeof job.env.expression === 'string') {
    inline.push([[...path, 'env', 'expression'], job.env.expression]);
  }
  if (typeof job.concurrencyGroup === 'object') {
    inline.push([[...path, 'concurrencyGroup', 'expression'], job.concurrencyGroup.expression]);
  }
  for (const [expressionPath, expression] of inline) {
    const problem = expressionProblem(expression);
    if (problem !== null) return { path: expressionPath, problem, rule: 'expression' };
  }
  return null;
}

function unknownNeedProblem(needs: readonly LockNeed[], jobNames: ReadonlySet<string>, path: Path): LockProblem | null {
  for (const [index, need] of needs.entries()) {
    const name = needName(need);
    if (name !== null && !jobNames.has(name)) {
      return graphProblem([...path, index], `unknown needs target ${JSON.stringify(name)}`);
    }
  }
  return null;
}

/** Depth-first search over name needs; reports the edge that closes the first cycle found. */
function cycleProblem(jobs: readonly LockJob[], path: Path): LockProblem | null {
  const byName = new Map(staticJobs(jobs).map(([index, job]) => [job.name, { index, job }]));
  const state = new Map<string, 'visiting' | 'done'>();
  const trail: string[] = [];
  const visit = (name: string): LockProblem | null => {
    const entry = byName.get(name);
    if (entry === undefined || state.get(name) === 'done') return null;
    state.set(name, 'visiting');
    trail.push(name);
    for (const [needIndex, need] of entry.job.needs.entries()) {
      const target = needName(need);
      if (target === null) continue;
      if (state.get(target) === 'visiting') {
        const cycle = [...trail.slice(trail.indexOf(target)), target].join(' → ');
        return graphProblem([...path, 'jobs', entry.index, 'needs', needIndex], `needs cycle: ${cycle}`);
      }
      const problem = visit(target);
      if (problem !== null) return problem;
    }
    trail.pop();
    state.set(name, 'done');
    return null;
  };
  for (const name of byName.keys()) {
    const problem = visit(name);
    if (problem !== null) return problem;
  }
  return null;
}

function staticJobs(jobs: readonly LockJob[]): [number, LockStaticJob][] {
  return [...jobs.entries()].filter((entry): entry is [number, LockStaticJob] => entry[1]._type === 'static');
}

function needName(need: LockNeed): string | null {
  if (typeof need === 'string') return need;
  return 'name' in need ? need.name : null;
}

function graphProblem(path: Path, problem: string): LockProblem {
  return { path, problem, rule: 'graph' };
}
