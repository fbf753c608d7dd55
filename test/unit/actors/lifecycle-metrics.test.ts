import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Registry } from 'prom-client';
import { LifecycleMetrics } from '../../../actors/runs/lifecycle-metrics.ts';

type Job = { jobKey: string; status: string; dispatchId?: string | null; outcome?: string | null; initFailure?: unknown };

function entry(runId: string, runStatus: string, jobs: Job[], events: { type: string; jobKey?: string }[], at: number, times: { createdAt?: number; finishedAt?: number | null } = {}) {
  return {
    runId,
    run: { workflowName: 'w', repository: null, status: runStatus, createdAt: times.createdAt ?? 0, finishedAt: times.finishedAt ?? null, failureReason: null, initFailure: null },
    jobs: jobs.map((job) => ({ waitingReason: null, attempt: 1, agentId: null, steps: [], durationMs: null, outputs: null, initFailure: null, outcome: null, dispatchId: null, ...job })),
    events: events.map((event, seq) => ({ seq, event, receivedAt: at, stateAfter: null })),
    removedJobs: [],
  };
}

async function value(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = await registry.getSingleMetric(name)?.get();
  const found = metric?.values.find((v) => Object.entries(labels).every(([key, wanted]) => v.labels[key] === wanted) && !('le' in v.labels));
  return found?.value ?? 0;
}

describe('run and dispatch metrics from committed entries', () => {
  it('counts finished runs, requeues by cause, ack timeouts, recoveries, stale jobs and pickup time, once each', async () => {
    const registry = new Registry();
    const waiting = new Map([['capacity', 2], ['needs', 1]]);
    const metrics = new LifecycleMetrics(registry, { activeCount: () => 2, waitingCounts: () => waiting });
    metrics.observe(entry('r1', 'running', [{ jobKey: 'a', status: 'queued' }], [{ type: 'run.created' }], 1_000));
    metrics.observe(entry('r1', 'running', [{ jobKey: 'a', status: 'queued', dispatchId: 'd1' }], [{ type: 'placement.granted', jobKey: 'a' }], 1_100));
    metrics.observe(entry('r1', 'running', [{ jobKey: 'a', status: 'queued', dispatchId: null }], [{ type: 'timer.ack.expired', jobKey: 'a' }], 1_200));
    metrics.observe(entry('r1', 'running', [{ jobKey: 'a', status: 'queued', dispatchId: 'd2' }], [{ type: 'placement.granted', jobKey: 'a' }], 1_300));
    metrics.observe(entry('r1', 'running', [{ jobKey: 'a', status: 'running', dispatchId: 'd2' }], [{ type: 'agent.job.status', jobKey: 'a' }], 3_000));
    metrics.observe(entry('r1', 'running', [{ jobKey: 'a', status: 'recovering', dispatchId: 'd2' }], [{ type: 'agent.disconnected' }], 3_500));
    metrics.observe(entry('r1', 'running', [{ jobKey: 'a', status: 'running', dispatchId: 'd2' }], [{ type: 'agent.job.reclaim', jobKey: 'a' }], 3_600));
    const done = entry('r1', 'success', [{ jobKey: 'a', status: 'success', dispatchId: 'd2' }], [{ type: 'agent.job.status', jobKey: 'a' }], 4_000, { createdAt: 1_000, finishedAt: 4_000 });
    metrics.observe(done);
    metrics.observe(done);
    metrics.observe(entry('r2', 'running', [{ jobKey: 'b', status: 'queued', dispatchId: 'd3' }], [{ type: 'placement.granted', jobKey: 'b' }], 5_000));
    metrics.observe(entry('r2', 'failed', [{ jobKey: 'b', status: 'timed_out_stale', dispatchId: 'd3' }], [{ type: 'timer.queue.expired', jobKey: 'b' }], 6_000, { createdAt: 5_000, finishedAt: 6_000 }));
    assert.equal(await value(registry, 'switchyard_runs_total', { status: 'success' }), 1, 'a run is counted once however often its final entry is seen');
    assert.equal(await value(registry, 'switchyard_runs_total', { status: 'failed' }), 1);
    assert.equal(await value(registry, 'switchyard_dispatch_ack_timeouts_total'), 1);
    assert.equal(await value(registry, 'switchyard_requeues_total', { cause: 'ack_timeout' }), 1);
    assert.equal(await value(registry, 'switchyard_recovery_total', { outcome: 'reclaimed' }), 1);
    assert.equal(await value(registry, 'switchyard_jobs_stale_total'), 1);
    const text = await registry.metrics();
    assert.match(text, /^switchyard_job_pickup_seconds_sum 2$/m, 'queued at 1.0 s, running at 3.0 s');
    assert.match(text, /^switchyard_run_duration_seconds_sum 4$/m, 'r1 took 3 s, r2 1 s');
    assert.equal(await value(registry, 'switchyard_runs_active'), 2);
    assert.equal(await value(registry, 'switchyard_jobs_waiting', { reason: 'capacity' }), 2);
    assert.equal(await value(registry, 'switchyard_jobs_waiting', { reason: 'needs' }), 1);
  });

  it('init failures by category, and attempts exhausted', async () => {
    const registry = new Registry();
    const metrics = new LifecycleMetrics(registry, { activeCount: () => 0, waitingCounts: () => new Map() });
    metrics.observe(entry('r3', 'running', [{ jobKey: 'c', status: 'failed', initFailure: { scope: 'job', category: 'dynamic_eval', message: 'x' } }], [{ type: 'job.init.failed', jobKey: 'c' }], 1));
    metrics.observe(entry('r4', 'running', [{ jobKey: 'd', status: 'queued', dispatchId: 'd9' }], [{ type: 'placement.granted', jobKey: 'd' }], 1));
    metrics.observe(entry('r4', 'failed', [{ jobKey: 'd', status: 'failed', dispatchId: null, outcome: 're-dispatch attempts exhausted after 5 attempts' }], [{ type: 'timer.ack.expired', jobKey: 'd' }], 2));
    assert.equal(await value(registry, 'switchyard_init_failures_total', { category: 'dynamic_eval' }), 1);
    assert.equal(await value(registry, 'switchyard_dispatch_attempts_exhausted_total'), 1);
    assert.equal(await value(registry, 'switchyard_requeues_total', { cause: 'ack_timeout' }), 0, 'the last attempt is not requeued');
  });
});
