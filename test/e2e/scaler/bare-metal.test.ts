import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { after as afterAll, describe, it } from 'node:test';
import { sign } from '@octokit/webhooks-methods';
import pg from 'pg';
import { findMarkedProcesses } from '../../../src/scaler/process-table.ts';
import { skipReason, tempDir } from '../../support/database.ts';
import { createLockRepo, lockFileWith, pushWorkflow } from '../../support/lock-repo.ts';
import { ADMIN_TOKEN, after, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';
import { eventually } from '../../support/runtime.ts';

const SECRET = 'scaler-webhook-secret';
const BARE_METAL = JSON.stringify([{ type: 'bare-metal', name: 'bare-metal', maxAgents: 3 }]);
const LEASE = { SWITCHYARD_LEASE_RENEW_MS: '200', SWITCHYARD_LEASE_TTL_MS: '1500' };

afterAll(async () => {
  for (const cleanup of after.splice(0)) await cleanup();
});

function linuxJob(name: string, steps: string[], extra: object = {}): object {
  return {
    _type: 'static',
    name,
    runsOn: [{ kind: 'exact', value: 'kici:os:linux' }],
    runsOnPick: 'deterministic',
    needs: [],
    steps: steps.map((run, i) => ({ name: `step-${i + 1}`, hasOutputs: false, run })),
    ...extra,
  };
}

async function pushWebhook(coordinator: CoordinatorProcess, sha: string, deliveryId: string): Promise<number> {
  const body = JSON.stringify({
    ref: 'refs/heads/main',
    after: sha,
    before: '0'.repeat(40),
    deleted: false,
    commits: [],
    repository: { id: 1, full_name: 'acme/app', name: 'app', default_branch: 'main', private: false, owner: { login: 'acme', id: 1 } },
    sender: { login: 'octo', id: 2 },
    pusher: { name: 'octo' },
  });
  const headers = { 'content-type': 'application/json', 'x-github-event': 'push', 'x-github-delivery': deliveryId, 'x-hub-signature-256': await sign(SECRET, body) };
  return (await fetch(`${coordinator.url}/webhooks/github`, { method: 'POST', body, headers })).status;
}

async function installation(db: pg.Client): Promise<string> {
  const { rows } = await db.query<{ id: string }>('select id from installation');
  return rows[0]?.id ?? 'none';
}

async function agentProcesses(owner: string) {
  return findMarkedProcesses({ SWITCHYARD_OWNER: owner });
}

async function runStatus(db: pg.Client, workflow: string) {
  const { rows } = await db.query<{ run_id: string; status: string }>('select run_id, status from runs where workflow_name = $1', [workflow]);
  return rows;
}

async function jobsDump(db: pg.Client): Promise<string> {
  const { rows } = await db.query('select run_id, job_key, status, waiting_reason, outcome, agent_id from jobs order by run_id, job_key');
  return JSON.stringify(rows);
}

describe('bare-metal scaler (real processes)', { skip: await skipReason('external') }, () => {
  it('a job no agent can take gets a bound bare-metal agent, runs, and the agent is destroyed after it (SCL-3, SCL-7)', async () => {
    const databaseUrl = await sharedDatabaseUrl('external');
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    const repo = await createLockRepo();
    const coordinator = await startCoordinatorProcess({
      ...{ DATABASE_URL: databaseUrl, GITHUB_WEBHOOK_SECRET: SECRET, SWITCHYARD_SCALERS: BARE_METAL, SWITCHYARD_DATA_DIR: await tempDir('sy-scaler-data-') },
      SWITCHYARD_SCALER_TICK_MS: '200',
    });
    try {
      const registered = await coordinator.api('/api/v1/repositories', { method: 'POST', body: JSON.stringify({ name: 'acme/app', provider: 'local', path: repo.path }) });
      assert.equal(registered.status, 201);
      const lock = lockFileWith([pushWorkflow('ci', [linuxJob('build', ['echo "scaler says $((6 * 7))"', 'test -f README'])])]);
      const sha = repo.commit({ '.kici/kici.lock.json': lock, README: 'hello' });
      assert.equal(await pushWebhook(coordinator, sha, 'scaler-delivery-1'), 202);
      const [run] = await eventually(async () => {
        const rows = await runStatus(db, 'ci');
        return rows[0]?.status === 'success' ? rows : null;
      }, 60_000, 'the run to succeed on a spawned agent').catch(async (error: unknown) => {
        throw new Error(`${String(error)}\n${await jobsDump(db)}\n${coordinator.output().slice(-3000)}`);
      });
      const { rows: jobs } = await db.query<{ agent_id: string }>('select agent_id from jobs where run_id = $1', [run?.run_id]);
      assert.match(jobs[0]?.agent_id ?? '', /^scaler-bare-metal-[0-9a-f]{8}$/);
      const { rows: events } = await db.query<{ event: { type: string; reason?: { kind: string; message: string } } }>(
        "select event from run_events where run_id = $1 and event->>'type' = 'placement.none' order by seq",
        [run?.run_id],
      );
      const reason = events.map((e) => e.event.reason).find((r) => r?.kind === 'scaler_spawning');
      assert.match(reason?.message ?? '', /^spawning on bare-metal \(agent scaler-bare-metal-[0-9a-f]{8}\)$/, 'the waiting reason showed the spawn');
      const logs = await (await coordinator.api(`/api/v1/runs/${run?.run_id}/logs?job=build`)).text();
      assert.match(logs, /scaler says 42/);
      const owner = await installation(db);
      await eventually(async () => (await agentProcesses(owner)).length === 0, 15_000, 'the single-use agent to be destroyed');
      const scalers = await eventually(async () => {
        const status = (await (await coordinator.api('/api/v1/scalers')).json()) as { agents: unknown[]; backends: { name: string; spawnsOnLocalHost: boolean }[] };
        return status.agents.length === 0 ? status : null;
      }, 15_000, 'no reservation left');
      assert.deepEqual(scalers.backends.map((b) => [b.name, b.spawnsOnLocalHost]), [['bare-metal', true]]);
      const metrics = await (await fetch(`${coordinator.url}/metrics`)).text();
      assert.match(metrics, /switchyard_scaler_spawns_total\{backend="bare-metal",bound="true"\} 1/);
    } finally {
      await stopProcess(coordinator);
      await db.end();
    }
  });

  it('a failing backend is attributed to the job with a readable reason, counts attempts, and shows in diagnose', async () => {
    const databaseUrl = await sharedDatabaseUrl('external');
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    const broken = JSON.stringify([{ type: 'container', name: 'broken', image: 'switchyard-agent:none', socketPath: '/nonexistent/docker.sock' }]);
    const coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, SWITCHYARD_SCALERS: broken, SWITCHYARD_MAX_DISPATCH_ATTEMPTS: '2' });
    try {
      const workflow = { name: 'doomed', jobs: [linuxJob('build', ['true'])] };
      const created = await coordinator.api('/api/v1/runs', { method: 'POST', body: JSON.stringify({ workflow, repository: 'acme/app' }) });
      assert.equal(created.status, 201);
      const waiting = await eventually(async () => {
        const { rows } = await db.query<{ waiting_reason: { kind: string; message: string } | null }>("select waiting_reason from jobs where job_key = 'build'");
        return rows[0]?.waiting_reason?.kind === 'scaler_failed' ? rows[0].waiting_reason : null;
      }, 20_000, 'the job to wait with scaler_failed');
      assert.match(waiting.message, /^scaler broken could not provide an agent: .*nonexistent\/docker\.sock/);
      const failed = await eventually(async () => {
        const { rows } = await db.query<{ status: string; outcome: string; attempt: number }>("select status, outcome, attempt from jobs where job_key = 'build'");
        return rows[0]?.status === 'failed' ? rows[0] : null;
      }, 30_000, 'the job to fail after its attempts');
      assert.equal(failed.attempt, 2, 'each failed bound spawn counted one attempt');
      assert.match(failed.outcome, /attempts exhausted after 2 attempts/);
      // Not execFileSync: a test loop blocked for seconds misses the server closing its idle keep-alive socket, and the next fetch fails.
      const { stdout: diagnose } = await promisify(execFile)(process.execPath, ['--no-node-snapshot', '--import', 'tsx', 'src/cli/main.ts', 'diagnose', '--url', coordinator.url], {
        env: { ...process.env, SWITCHYARD_ADMIN_TOKEN: ADMIN_TOKEN },
        encoding: 'utf8',
      });
      assert.match(diagnose, /broken\s+container\s+yes\s+4\s+0\s+0\s+0\s+0\s+2\/0\s+scaler-container-[0-9a-f]{8}: .*nonexistent/);
      const metrics = await (await fetch(`${coordinator.url}/metrics`)).text();
      assert.match(metrics, /switchyard_scaler_spawn_failures_total\{backend="broken",bound="true"\} 2/);
    } finally {
      await stopProcess(coordinator);
      await db.end();
    }
  });

  it('SIGKILL of the coordinator while agents spawn: after takeover no orphaned process remains and the jobs run', async () => {
    const databaseUrl = await sharedDatabaseUrl('external');
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    // The first coordinator's agents dial a dead port, so they are still spawning when it dies.
    const first = await startCoordinatorProcess({
      ...{ DATABASE_URL: databaseUrl, SWITCHYARD_SCALERS: BARE_METAL, SWITCHYARD_COORDINATOR_ID: 'coord-a', ...LEASE },
      ...{ SWITCHYARD_SCALER_URL: 'ws://127.0.0.1:9/ws/agent', SWITCHYARD_DATA_DIR: await tempDir('sy-scaler-a-') },
    });
    let second: CoordinatorProcess | null = null;
    try {
      for (const name of ['one', 'two', 'three', 'four']) {
        const workflow = { name, jobs: [linuxJob('build', [`echo ${name}`])] };
        assert.equal((await first.api('/api/v1/runs', { method: 'POST', body: JSON.stringify({ workflow, repository: 'acme/app' }) })).status, 201);
      }
      const owner = await installation(db);
      const spawned = await eventually(async () => {
        const found = await agentProcesses(owner);
        return found.length === 3 ? found : null;
      }, 20_000, 'three agents spawning (maxAgents 3)');
      first.child.kill('SIGKILL');
      await first.exited;
      assert.equal((await agentProcesses(owner)).length, 3, 'the agents outlive their coordinator (own process groups)');
      second = await startCoordinatorProcess({
        ...{ DATABASE_URL: databaseUrl, SWITCHYARD_SCALERS: BARE_METAL, SWITCHYARD_COORDINATOR_ID: 'coord-b', ...LEASE },
        ...{ SWITCHYARD_SCALER_TICK_MS: '200', SWITCHYARD_DATA_DIR: await tempDir('sy-scaler-b-') },
      });
      const deadIds = new Set(spawned.map((p) => p.env['SWITCHYARD_AGENT_ID']));
      await eventually(async () => (await agentProcesses(owner)).every((p) => !deadIds.has(p.env['SWITCHYARD_AGENT_ID'])), 30_000, "coord-a's agents to be destroyed");
      await eventually(async () => {
        const { rows } = await db.query<{ n: number }>("select count(*)::int as n from runs where status = 'success'");
        return rows[0]?.n === 4;
      }, 90_000, 'all four runs to succeed on coord-b').catch(async (error: unknown) => {
        throw new Error(`${String(error)}\n${await jobsDump(db)}\n${second?.output().slice(-3000) ?? ''}`);
      });
      const { rows: states } = await db.query<{ coordinator_id: string }>('select coordinator_id from scaler_state order by coordinator_id');
      assert.deepEqual(states.map((s) => s.coordinator_id), ['coord-b'], "coord-a's scaler state was released");
      await stopProcess(second);
      assert.deepEqual(await agentProcesses(owner), [], 'nothing of ours is left running');
    } finally {
      if (second) await stopProcess(second);
      await stopProcess(first, 'SIGKILL');
      await db.end();
    }
  });
});
