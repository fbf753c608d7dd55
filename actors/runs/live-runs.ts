import type { HeldJob } from '../agents/peer-sync.ts';
import type { LiveRuns } from './lifecycle-metrics.ts';
import type { Supervisor } from './supervisor.ts';

/** What run metrics read of the runs owned here at each scrape: how many are active, and why their jobs wait. */
export function liveRunsOf(supervisor: Supervisor): LiveRuns {
  return {
    activeCount: () => supervisor.size,
    waitingCounts: () => supervisor.waitingCounts(),
  };
}

/** Jobs of the runs owned here that hold an agent's slot, with that agent. */
export function heldJobsOf(supervisor: Supervisor): HeldJob[] {
  return supervisor.ownedRunIds().flatMap((runId) =>
    supervisor.jobsOf(runId).flatMap((job) => {
      const agentId = job.context.assignment?.agentId;
      return agentId !== undefined && supervisor.jobHasTag(runId, job.jobKey, 'holds-slot') ? [{ runId, jobKey: job.jobKey, agentId }] : [];
    }),
  );
}
