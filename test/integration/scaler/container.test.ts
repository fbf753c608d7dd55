import assert from 'node:assert/strict';
import { after as afterAll, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import pg from 'pg';
import { pino } from 'pino';
import { reapOrphans } from '../../../actors/scaler/reaper.ts';
import { REFERENCE_AGENT } from '../../../src/config/agent-launch.ts';
import { ContainerBackend } from '../../../src/scaler/container.ts';
import { containerEngineUnavailable, IMAGE_NODE, startContainerEngine } from '../../support/container-engine.ts';
import type { ContainerEngine } from '../../support/container-engine.ts';
import { skipReason, tempDir } from '../../support/database.ts';
import { after, sharedDatabaseUrl, startCoordinatorProcess, stopProcess } from '../../support/processes.ts';
import { eventually } from '../../support/runtime.ts';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const unavailable = containerEngineUnavailable();
if (unavailable) process.stdout.write(`# container backend NOT verified against a real engine on this machine: ${unavailable}\n`);
const skip = unavailable ?? (await skipReason('external'));

describe('container scaler against podman (Docker API)', { skip }, () => {
  let engine: ContainerEngine;
  let docker: Docker;

  before(async () => {
    engine = await startContainerEngine();
    docker = new Docker({ socketPath: engine.socketPath });
  });

  afterAll(async () => {
    for (const cleanup of after.splice(0)) await cleanup();
    const leftovers = await docker.listContainers({ all: true, filters: { label: ['switchyard.test=container-suite'] } });
    for (const info of leftovers) await docker.getContainer(info.Id).remove({ force: true });
    await engine.stop();
  });

  function definition(name: string) {
    return {
      type: 'container',
      name,
      image: engine.image,
      socketPath: engine.socketPath,
      command: [IMAGE_NODE, '--no-node-snapshot', '--import', 'tsx', `${ROOT}src/cli/main.ts`],
      workingDir: ROOT,
      binds: [`${ROOT}:${ROOT}:ro`],
      network: 'host',
      ulimits: [{ name: 'nofile', soft: 1024, hard: 1024 }, { name: 'nproc', soft: 4096, hard: 4096 }],
      resources: { cpu: 1, memoryBytes: 512 * 1024 * 1024 },
      maxAgents: 2,
    };
  }

  it('a job with no agent runs in a spawned container with SCL-4 labels and limits; the container is removed after it', async () => {
    const databaseUrl = await sharedDatabaseUrl('external');
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    const coordinator = await startCoordinatorProcess({
      ...{ DATABASE_URL: databaseUrl, SWITCHYARD_SCALERS: JSON.stringify([definition('podman')]), SWITCHYARD_DATA_DIR: await tempDir('sy-container-') },
      SWITCHYARD_SCALER_TICK_MS: '200',
    });
    try {
      const workflow = {
        name: 'boxed',
        jobs: [{ _type: 'static', name: 'build', runsOn: [{ kind: 'exact', value: 'kici:os:linux' }], needs: [], steps: [{ name: 'a', hasOutputs: false, run: 'echo "inside $(hostname)"; sleep 3' }] }],
      };
      const created = await coordinator.api('/api/v1/runs', { method: 'POST', body: JSON.stringify({ workflow, repository: 'acme/app' }) });
      const { runId } = (await created.json()) as { runId: string };
      const { rows } = await db.query<{ id: string }>('select id from installation');
      const owner = rows[0]?.id ?? '';
      const [info] = await eventually(async () => {
        const found = await docker.listContainers({ all: true, filters: { label: [`switchyard.owner=${owner}`] } });
        return found.length > 0 ? found : null;
      }, 30_000, 'the agent container');
      assert.ok(info);
      assert.equal(info.Labels['switchyard.managed'], 'true');
      assert.equal(info.Labels['switchyard.scaler'], 'podman');
      assert.equal(info.Labels['switchyard.bound-job-id'], 'build');
      assert.equal(info.Labels['switchyard.run-id'], runId);
      assert.match(info.Labels['switchyard.agent-id'] ?? '', /^scaler-container-[0-9a-f]{8}$/);
      const inspected = await docker.getContainer(info.Id).inspect();
      assert.equal(inspected.HostConfig.Memory, 512 * 1024 * 1024);
      assert.equal(inspected.HostConfig.NanoCpus, 1e9);
      assert.equal(inspected.HostConfig.NetworkMode, 'host');
      await eventually(async () => {
        const status = await db.query<{ status: string }>('select status from runs where run_id = $1', [runId]);
        return status.rows[0]?.status === 'success';
      }, 90_000, 'the run to succeed in the container').catch(async (error: unknown) => {
        const jobs = await db.query('select status, waiting_reason, outcome from jobs where run_id = $1', [runId]);
        throw new Error(`${String(error)}\n${JSON.stringify(jobs.rows)}\n${coordinator.output().slice(-3000)}`);
      });
      const logs = await (await coordinator.api(`/api/v1/runs/${runId}/logs?job=build`)).text();
      assert.match(logs, /inside /);
      await eventually(async () => (await docker.listContainers({ all: true, filters: { label: [`switchyard.owner=${owner}`] } })).length === 0, 30_000, 'the container to be removed');
    } finally {
      await stopProcess(coordinator);
      await db.end();
    }
  });

  it("B14: orphan reaping removes only this installation's unaccounted containers, never another owner's", async () => {
    const create = (owner: string, agentId: string) =>
      docker.createContainer({
        Image: engine.image,
        Cmd: ['/bin/sleep', '60'],
        Labels: { 'switchyard.managed': 'true', 'switchyard.owner': owner, 'switchyard.scaler': 'podman', 'switchyard.agent-id': agentId, 'switchyard.test': 'container-suite' },
        HostConfig: { NetworkMode: 'none', Ulimits: [{ Name: 'nofile', Soft: 1024, Hard: 1024 }, { Name: 'nproc', Soft: 4096, Hard: 4096 }] },
      });
    const ours = await create('sy-ours', 'scaler-container-0000000a');
    const known = await create('sy-ours', 'scaler-container-0000000b');
    const theirs = await create('sy-theirs', 'scaler-container-0000000c');
    await theirs.start();
    const backend = new ContainerBackend({
      ...{ name: 'podman', installationId: 'sy-ours', labelSets: [{ labels: ['kici:os:linux'], mandatoryLabels: [], properties: {}, resources: null, warmPool: null }] },
      ...{ maxAgents: 2, socketPath: engine.socketPath, remoteHost: null, image: engine.image, agent: REFERENCE_AGENT, command: ['/bin/true'], workingDir: null, network: 'none' },
      ...{ binds: [], ulimits: [], isolation: null, stopGraceSeconds: 1, now: () => Date.now(), log: pino({ level: 'silent' }) },
    });
    assert.deepEqual((await backend.listOwned()).map((r) => r.agentId).sort(), ['scaler-container-0000000a', 'scaler-container-0000000b'], "another owner's container is not even listed");
    const store = {
      load: () => Promise.resolve(null),
      save: () => Promise.resolve(true),
      all: () => Promise.resolve([{ coordinatorId: 'coord-x', machineVersion: 1, updatedAt: 0, snapshot: { context: { agents: { b: { agentId: 'scaler-container-0000000b', backend: 'podman' } } } } }]),
      abandoned: () => Promise.resolve([]),
      dropAbandoned: () => Promise.resolve(true),
    };
    const reaped = await reapOrphans({ backends: new Map([['podman', backend]]), store, log: pino({ level: 'silent' }), now: () => Date.now() }, () => []);
    assert.equal(reaped, 1);
    const remaining = (await docker.listContainers({ all: true, filters: { label: ['switchyard.test=container-suite'] } })).map((c) => c.Id);
    assert.ok(!remaining.includes(ours.id), 'the unaccounted container of ours is reaped');
    assert.ok(remaining.includes(known.id), 'a container some coordinator accounts for is kept');
    assert.ok(remaining.includes(theirs.id), "another installation's running container is untouched");
  });
});
