import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { after as afterAll, before, describe, it } from 'node:test';
import pg from 'pg';
import { skipReason } from '../support/database.ts';
import { createLockRepo, lockFileWith, pushWorkflow, runJob } from '../support/lock-repo.ts';
import { after, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../support/processes.ts';
import type { CoordinatorProcess } from '../support/processes.ts';
import { eventually } from '../support/runtime.ts';
import { githubHeaders, pushPayload } from '../support/webhooks.ts';

const SECRET = 'metrics-webhook-secret';

/** Every family of the metrics table (docs/http-api.md#metrics), scaler families included. */
const FAMILIES = [
  'switchyard_webhooks_received_total',
  'switchyard_webhooks_processed_total',
  'switchyard_webhook_dedup_hits_total',
  'switchyard_deliveries_dead',
  'switchyard_webhook_accept_seconds',
  'switchyard_lockfile_fetch_total',
  'switchyard_lockfile_cache_hits_total',
  'switchyard_trigger_match_seconds',
  'switchyard_runs_total',
  'switchyard_run_duration_seconds',
  'switchyard_runs_active',
  'switchyard_init_failures_total',
  'switchyard_jobs_waiting',
  'switchyard_dispatch_ack_timeouts_total',
  'switchyard_requeues_total',
  'switchyard_dispatch_attempts_exhausted_total',
  'switchyard_recovery_total',
  'switchyard_jobs_stale_total',
  'switchyard_job_pickup_seconds',
  'switchyard_agents_connected',
  'switchyard_agent_slots',
  'switchyard_ws_ownership_violations_total',
  'switchyard_ws_unknown_messages_total',
  'switchyard_scaler_spawn_failures_total',
  'switchyard_scaler_spawn_refusals_total',
  'switchyard_scaler_agents',
  'switchyard_scaler_cpus_reserved',
  'switchyard_scaler_memory_bytes_reserved',
  'switchyard_actor_events_total',
  'switchyard_commit_seconds',
  'switchyard_group_commit_batch_size',
  'switchyard_timers_armed',
  'switchyard_outbox_pending',
  'switchyard_lease_takeovers_total',
  'switchyard_adoption_seconds',
  'switchyard_log_bytes_stored_total',
  'switchyard_dispatch_path_stage_seconds',
];

/** The stages a GitHub push with a cached-or-read lock file passes on its way to its first dispatch. */
const PATH_STAGES = ['request.read', 'request.verified', 'intake.sent', 'lockfile.read', 'triggers.matched', 'run.planned', 'actor.started', 'run.committed', 'dispatch.sent'];

/** The value of one sample line, `name{labels} value`; 0 when the series is not there. */
function sample(text: string, series: string): number {
  const line = text.split('\n').find((candidate) => candidate.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

describe('GET /metrics after real deliveries, runs and an agent (real processes)', { skip: await skipReason('external') }, () => {
  let coordinator: CoordinatorProcess;
  let agent: ChildProcess;
  let db: pg.Client;
  let repo: Awaited<ReturnType<typeof createLockRepo>>;

  async function push(payload: unknown, deliveryId: string): Promise<number> {
    const body = JSON.stringify(payload);
    const response = await fetch(`${coordinator.url}/webhooks/github`, { method: 'POST', body, headers: await githubHeaders(SECRET, body, deliveryId, 'push') });
    return response.status;
  }

  before(async () => {
    const databaseUrl = await sharedDatabaseUrl('external');
    db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    repo = await createLockRepo();
    coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, GITHUB_WEBHOOK_SECRET: SECRET, SWITCHYARD_COORDINATOR_ID: 'coord-metrics' });
    const registered = await coordinator.api('/api/v1/repositories', { method: 'POST', body: JSON.stringify({ name: 'acme/app', provider: 'local', path: repo.path }) });
    assert.equal(registered.status, 201);
    const token = (await (await coordinator.api('/api/v1/agent-tokens', { method: 'POST', body: '{}' })).json()) as { token: string };
    const wsUrl = `${coordinator.url.replace('http', 'ws')}/ws/agent`;
    agent = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'agent', '--url', wsUrl, '--token', token.token, '--labels', 'linux', '--agent-id', 'agent-m'], { stdio: 'ignore' });
  });

  afterAll(async () => {
    agent.kill('SIGKILL');
    await stopProcess(coordinator);
    await db.end();
    for (const cleanup of after.splice(0)) await cleanup();
  });

  it('every family is exported, and the ones a delivery, a run, a waiting job, a corrupt lock and a dead delivery drive have moved', async () => {
    const jobs = [runJob('build', ['echo built']), runJob('deploy', ['true'], { runsOn: [{ kind: 'exact', value: 'label-nobody-has' }] })];
    const sha = repo.commit({ '.kici/kici.lock.json': lockFileWith([pushWorkflow('ci', jobs)]) });
    assert.equal(await push(pushPayload(sha), 'm-1'), 202);
    assert.equal(await push(pushPayload(sha), 'm-1'), 200, 'a duplicate');
    assert.equal(await push(pushPayload(sha), 'm-2'), 202, 'the same commit again: its lock file comes from the cache');
    const corrupt = repo.commit({ '.kici/kici.lock.json': '{ not json' });
    assert.equal(await push(pushPayload(corrupt), 'm-3'), 202);
    assert.equal(await push(pushPayload('not-a-commit-id'), 'm-4'), 202);
    await eventually(async () => {
      const { rows } = await db.query<{ n: number }>("select count(*)::int as n from jobs where job_key = 'build' and status = 'success'");
      return rows[0]?.n === 2;
    }, 60_000, 'both builds to succeed');
    await eventually(async () => {
      const { rows } = await db.query<{ status: string }>("select status from deliveries where delivery_id in ('m-3', 'm-4') order by delivery_id");
      return rows.map((row) => row.status).join() === 'lockfile_corrupt,dead';
    }, 30_000, 'the corrupt lock file and the malformed sha to be settled');
    const text = await eventually(async () => {
      const scraped = await (await fetch(`${coordinator.url}/metrics`)).text();
      return sample(scraped, 'switchyard_runs_total{status="failed"}') >= 1 ? scraped : null;
    }, 10_000, 'the failed run of the corrupt lock file to be counted');
    const missing = FAMILIES.filter((family) => !text.includes(`# TYPE ${family} `));
    assert.deepEqual(missing, [], 'every family is exported');
    const moved: Record<string, number> = {
      accepted: sample(text, 'switchyard_webhooks_received_total{source="github",outcome="accepted"}'),
      duplicates: sample(text, 'switchyard_webhook_dedup_hits_total'),
      processed: sample(text, 'switchyard_webhooks_processed_total{result="processed"}'),
      dead: sample(text, 'switchyard_deliveries_dead'),
      acceptTimes: sample(text, 'switchyard_webhook_accept_seconds_count'),
      lockFound: sample(text, 'switchyard_lockfile_fetch_total{outcome="found"}'),
      cacheHits: sample(text, 'switchyard_lockfile_cache_hits_total'),
      triggerMatches: sample(text, 'switchyard_trigger_match_seconds_count'),
      failedRuns: sample(text, 'switchyard_runs_total{status="failed"}'),
      runDurations: sample(text, 'switchyard_run_duration_seconds_count'),
      runsActive: sample(text, 'switchyard_runs_active'),
      lockInitFailures: sample(text, 'switchyard_init_failures_total{category="lock_resolution"}'),
      waitingForAgent: sample(text, 'switchyard_jobs_waiting{reason="no_matching_agent"}'),
      pickups: sample(text, 'switchyard_job_pickup_seconds_count'),
      agents: sample(text, 'switchyard_agents_connected'),
      freeSlots: sample(text, 'switchyard_agent_slots{state="free"}'),
      actorEvents: sample(text, 'switchyard_actor_events_total'),
      commits: sample(text, 'switchyard_commit_seconds_count'),
      logBytes: sample(text, 'switchyard_log_bytes_stored_total'),
    };
    const still = Object.entries(moved).filter(([, value]) => !(value > 0));
    assert.deepEqual(still, [], `every driven metric moved: ${JSON.stringify(moved)}`);
    assert.ok(moved['cacheHits'] !== undefined && moved['cacheHits'] >= 1);
    assert.equal(moved['runsActive'], 2, 'the two runs whose deploy job waits for an agent');
  });

  it("the dispatch path's stages: each delivery that reached an agent is traced once, and its stages add up to its whole way", async () => {
    const text = await (await fetch(`${coordinator.url}/metrics`)).text();
    const series = (stage: string, kind: 'sum' | 'count') => sample(text, `switchyard_dispatch_path_stage_seconds_${kind}{stage="${stage}"}`);
    assert.equal(series('total', 'count'), 2, 'the two builds dispatched (the deploy jobs never are)');
    const missing = PATH_STAGES.filter((stage) => series(stage, 'count') !== 2);
    assert.deepEqual(missing, [], 'every stage of the path was marked once a delivery');
    const stages = [...text.matchAll(/^switchyard_dispatch_path_stage_seconds_sum\{stage="([^"]+)"\} (\S+)$/gm)].filter((m) => m[1] !== 'total');
    const sum = stages.reduce((total, m) => total + Number(m[2]), 0);
    assert.ok(Math.abs(sum - series('total', 'sum')) < 1e-6, `the stages (${sum} s) add up to the whole way (${series('total', 'sum')} s)`);
  });
});
