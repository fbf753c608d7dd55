import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { after as afterAll, describe, it } from 'node:test';
import pg from 'pg';
import { findMarkedProcesses } from '../../../src/scaler/process-table.ts';
import { skipReason, tempDir } from '../../support/database.ts';
import { after, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import type { CoordinatorProcess } from '../../support/processes.ts';
import { eventually } from '../../support/runtime.ts';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const KICI_AGENT_CLI = `${ROOT}test/support/kici-agent-cli.ts`;
/** What the stand-in agent answers an init job with: a dynamic matrix of two combinations. */
const INIT_RESULT = JSON.stringify({ matrixValues: [{ shard: '1' }, { shard: '2' }] });
/** `--import tsx` resolves from the working directory, so the stand-in agent runs in the checkout. */
const KICI_BACKEND = {
  type: 'bare-metal',
  name: 'kici',
  maxAgents: 2,
  agent: { kind: 'kici', command: [process.execPath, '--no-node-snapshot', '--import', 'tsx', KICI_AGENT_CLI, '--init-result', INIT_RESULT], workingDir: ROOT },
};

afterAll(async () => {
  for (const cleanup of after.splice(0)) await cleanup();
});

function linuxJob(name: string, steps: object[]): object {
  return { _type: 'static', name, runsOn: [{ kind: 'exact', value: 'kici:os:linux' }], runsOnPick: 'deterministic', needs: [], steps };
}

async function createRun(coordinator: CoordinatorProcess, workflow: object): Promise<string> {
  const created = await coordinator.api('/api/v1/runs', { method: 'POST', body: JSON.stringify({ workflow, repository: 'acme/app' }) });
  assert.equal(created.status, 201, await created.clone().text());
  return ((await created.json()) as { runId: string }).runId;
}

async function startWithKiciBackend(databaseUrl: string): Promise<CoordinatorProcess> {
  return startCoordinatorProcess({
    ...{ DATABASE_URL: databaseUrl, SWITCHYARD_SCALERS: JSON.stringify([KICI_BACKEND]), SWITCHYARD_DATA_DIR: await tempDir('sy-kici-scaler-') },
    SWITCHYARD_SCALER_TICK_MS: '200',
  });
}

async function runSucceeds(db: pg.Client, coordinator: CoordinatorProcess, runId: string, what: string): Promise<void> {
  await eventually(async () => {
    const { rows } = await db.query<{ status: string }>('select status from runs where run_id = $1', [runId]);
    return rows[0]?.status === 'success';
  }, 90_000, what).catch(async (error: unknown) => {
    throw new Error(`${String(error)}\n${await jobsDump(db)}\n${coordinator.output().slice(-4000)}`);
  });
}

async function jobsDump(db: pg.Client): Promise<string> {
  const { rows } = await db.query('select run_id, job_key, status, waiting_reason, outcome, agent_id from jobs order by run_id, job_key');
  return JSON.stringify(rows);
}

describe('bare-metal scaler spawning a KiCI agent (real processes)', { skip: await skipReason('external') }, () => {
  it('a TypeScript-step job gets a spawned KiCI agent and succeeds; a run-step job is told no backend runs it', async () => {
    const databaseUrl = await sharedDatabaseUrl('external');
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    const coordinator = await startWithKiciBackend(databaseUrl);
    try {
      const typescript = await createRun(coordinator, { name: 'typescript', jobs: [linuxJob('build', [{ name: 'compile', hasOutputs: false }, { name: 'test', hasOutputs: false }])] });
      const shell = await createRun(coordinator, { name: 'shell', jobs: [linuxJob('lint', [{ name: 'lint', hasOutputs: false, run: 'true' }])] });
      await runSucceeds(db, coordinator, typescript, 'the TypeScript run to succeed on a spawned KiCI agent');
      const { rows: jobs } = await db.query<{ agent_id: string }>('select agent_id from jobs where run_id = $1', [typescript]);
      assert.match(jobs[0]?.agent_id ?? '', /^scaler-bare-metal-[0-9a-f]{8}$/);
      const { rows: events } = await db.query<{ event: { reason?: { kind: string; message: string } } }>(
        "select event from run_events where run_id = $1 and event->>'type' = 'placement.none' order by seq",
        [typescript],
      );
      const spawning = events.map((e) => e.event.reason).find((r) => r?.kind === 'scaler_spawning');
      assert.match(spawning?.message ?? '', /^spawning on kici \(agent scaler-bare-metal-[0-9a-f]{8}\)$/);

      const waiting = await eventually(async () => {
        const { rows } = await db.query<{ waiting_reason: { kind: string; message: string } | null }>('select waiting_reason from jobs where run_id = $1', [shell]);
        return rows[0]?.waiting_reason?.kind === 'no_matching_agent' ? rows[0].waiting_reason : null;
      }, 20_000, 'the run-step job to wait');
      assert.equal(
        waiting.message,
        'needs an agent that can execute run steps; none connected and no scaler backend spawns one for labels kici:os:linux (kici spawns KiCI agents, which do not execute run steps)',
      );

      const { rows: owners } = await db.query<{ id: string }>('select id from installation');
      const owner = owners[0]?.id ?? 'none';
      await eventually(async () => (await findMarkedProcesses({ SWITCHYARD_OWNER: owner })).length === 0, 20_000, 'the single-use KiCI agent to be destroyed');
      const metrics = await (await fetch(`${coordinator.url}/metrics`)).text();
      assert.match(metrics, /switchyard_scaler_spawns_total\{backend="kici",bound="true"\} 1/, 'exactly one spawn: none for the run-step job');
    } finally {
      await stopProcess(coordinator);
      await db.end();
    }
  });

  it('an init job (dynamic matrix) runs on a spawned KiCI agent with the init-runner role, then every child does', async () => {
    const databaseUrl = await sharedDatabaseUrl('external');
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    const coordinator = await startWithKiciBackend(databaseUrl);
    try {
      const fanned = { ...linuxJob('a', [{ name: 'echo', hasOutputs: false }]), matrix: { _type: 'dynamic', source: { file: '.kici/workflows/fanout.ts', jobName: 'a' } } };
      const downstream = { ...linuxJob('b', [{ name: 'done', hasOutputs: false }]), needs: ['a'] };
      const runId = await createRun(coordinator, { name: 'fanout', jobs: [fanned, downstream] });
      await runSucceeds(db, coordinator, runId, 'the fan-out run to succeed on spawned KiCI agents');
      const { rows } = await db.query<{ job_key: string; status: string; agent_id: string | null }>('select job_key, status, agent_id from jobs where run_id = $1 order by job_key', [runId]);
      const ran = rows.filter((row) => row.agent_id !== null);
      assert.ok(ran.some((row) => row.job_key === '__init__fanout__a'), `the init job ran on an agent: ${JSON.stringify(rows)}`);
      assert.equal(ran.length, 4, `init, two matrix children and b each ran: ${JSON.stringify(rows)}`);
      assert.ok(ran.every((row) => row.status === 'success' && /^scaler-bare-metal-[0-9a-f]{8}$/.test(row.agent_id ?? '')), JSON.stringify(rows));
      assert.equal(new Set(ran.map((row) => row.agent_id)).size, 4, 'single-use agents: one per job');
    } finally {
      await stopProcess(coordinator);
      await db.end();
    }
  });
});
