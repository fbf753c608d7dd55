import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { WebSocket } from 'ws';
import type { Schema } from '../../../src/db/schema.ts';
import { registerMachineRoutes } from '../../../src/http/api-machines.ts';
import { RunHistory } from '../../../src/retention/run-history.ts';
import { registerReplayRoutes } from '../../../src/http/api-replay.ts';
import { Router } from '../../../src/http/router.ts';
import { createHttpServer, listen } from '../../../src/http/server.ts';
import { attachObserveServer } from '../../../src/ws/observe.ts';
import type { RunUpdateFrame } from '../../../src/ws/observe.ts';
import { registerVisualizerRoutes } from '../../../src/http/pages.ts';
import { skipReason, testLog, withTestDatabase } from '../../support/database.ts';
import { eventually, startTestRuntime, waitingWorkflow } from '../../support/runtime.ts';
import type { TestRuntime } from '../../support/runtime.ts';
import { RunDriver } from './drive.ts';

const token = `sya_${randomBytes(16).toString('hex')}`;

async function serve(db: Kysely<Schema>, runtime: TestRuntime) {
  const router = new Router();
  registerMachineRoutes(router);
  registerReplayRoutes(router, { history: new RunHistory(db, null) });
  registerVisualizerRoutes(router);
  const adminTokenHash = createHash('sha256').update(token).digest();
  const server = createHttpServer({ router, adminTokenHash, log: testLog });
  const observers = attachObserveServer(server, { observe: (listener) => runtime.supervisor.observe(listener), adminTokenHash, log: testLog });
  const port = await listen(server, 0, '127.0.0.1');
  const base = `http://127.0.0.1:${port}`;
  const get = (path: string, auth = true) => fetch(`${base}${path}`, auth ? { headers: { authorization: `Bearer ${token}` } } : {});
  const close = async () => {
    await observers.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  };
  return { base, get, observers, close };
}

function connect(url: string): Promise<{ ws: WebSocket; frames: RunUpdateFrame[] }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url);
    const frames: RunUpdateFrame[] = [];
    ws.on('message', (data: Buffer) => {
      const frame = JSON.parse(data.toString()) as RunUpdateFrame | { type: 'observe.ready' };
      if (frame.type === 'observe.ready') resolve({ ws, frames });
      else frames.push(frame);
    });
    ws.once('error', reject);
  });
}

describe('replay, history, machines and observe endpoints (external Postgres)', { skip: await skipReason('external') }, () => {
  it('serves the history, the replay report, the machine graphs and the page; refuses without the token', async () => {
    await withTestDatabase('external', async ({ db }) => {
      const runtime = await startTestRuntime(db, 'coord-a');
      const http = await serve(db, runtime);
      const run = new RunDriver(db, runtime);
      await run.create(waitingWorkflow('wf'));
      await run.until('build', { waiting: 'agent' });
      await run.send({ type: 'run.cancel', reason: 'test', force: false, by: 'test' });
      assert.equal(await run.finalStatus(), 'cancelled');

      const history = (await (await http.get(`/api/v1/runs/${run.runId}/history`)).json()) as { lastSeq: number; events: { seq: number; stateAfter: { run: unknown } }[] };
      assert.equal(history.events.length, history.lastSeq + 1);
      assert.equal(history.events.at(-1)?.stateAfter.run, 'cancelled');
      const replay = (await (await http.get(`/api/v1/runs/${run.runId}/replay`)).json()) as { exact: boolean; steps: unknown[] };
      assert.equal(replay.exact, true);
      assert.equal(replay.steps.length, history.events.length);
      const partial = (await (await http.get(`/api/v1/runs/${run.runId}/replay?to=0`)).json()) as { to: number; snapshot: { value: unknown } };
      assert.deepEqual([partial.to, partial.snapshot.value], [0, { active: 'pending' }]);
      assert.equal((await http.get(`/api/v1/runs/${run.runId}/replay?to=99`)).status, 400);
      assert.equal((await http.get(`/api/v1/runs/${run.runId}/replay?to=x`)).status, 400);
      assert.equal((await http.get('/api/v1/runs/nope/replay')).status, 404);
      assert.equal((await http.get('/api/v1/runs/nope/history')).status, 404);
      assert.equal((await http.get(`/api/v1/runs/${run.runId}/replay`, false)).status, 401);

      await db.updateTable('run_snapshots').set({ machine_version: 999 }).where('run_id', '=', run.runId).execute();
      const refused = await http.get(`/api/v1/runs/${run.runId}/replay`);
      assert.equal(refused.status, 409);
      assert.match(((await refused.json()) as { reason: string }).reason, /version 999.*force/);
      assert.equal((await http.get(`/api/v1/runs/${run.runId}/replay?force=true`)).status, 200);

      const machines = (await (await http.get('/api/v1/machines')).json()) as { machines: { id: string; nodes: unknown[]; edges: unknown[] }[] };
      assert.deepEqual(machines.machines.map((m) => m.id), ['run', 'job', 'concurrency', 'scaler', 'scalerAgent']);
      assert.equal((await http.get('/api/v1/machines', false)).status, 401);

      const redirect = await fetch(`${http.base}/visualize?token=abc`, { redirect: 'manual' });
      assert.equal(redirect.status, 302);
      assert.equal(redirect.headers.get('location'), '/visualize/?token=abc');
      const page = await http.get('/visualize/', false);
      assert.match(await page.text(), /<script src="elk.bundled.js"><\/script>/);
      assert.equal((await http.get('/visualize/elk.bundled.js', false)).status, 200);
      assert.equal((await http.get('/visualize/__proto__', false)).status, 404);
      assert.equal((await http.get('/visualize/..%2Fserve.ts', false)).status, 404);
      await runtime.stop();
      await http.close();
    });
  });

  it('/ws/observe streams each committed event with its state after; a wrong token is refused', async () => {
    await withTestDatabase('external', async ({ db }) => {
      const runtime = await startTestRuntime(db, 'coord-a');
      const http = await serve(db, runtime);
      const wsBase = http.base.replace('http', 'ws');
      await assert.rejects(connect(`${wsBase}/ws/observe?token=wrong`), /401/);
      await assert.rejects(connect(`${wsBase}/ws/observe`), /401/);
      const all = await connect(`${wsBase}/ws/observe?token=${token}`);
      const run = new RunDriver(db, runtime);
      const other = new RunDriver(db, runtime);
      const only = await connect(`${wsBase}/ws/observe?token=${token}&runId=${run.runId}`);
      assert.equal(http.observers.clients, 2);
      await run.create(waitingWorkflow('wf'));
      await other.create(waitingWorkflow('other'));
      await run.until('build', { waiting: 'agent' });
      await run.send({ type: 'run.cancel', reason: 'test', force: false, by: 'test' });
      const frames = await eventually(() => {
        const mine = all.frames.filter((frame) => frame.runId === run.runId);
        return mine.at(-1)?.status === 'cancelled' ? mine : null;
      }, 5000, 'the cancel frame');
      assert.deepEqual(frames.map((frame) => frame.seq), frames.map((_, i) => i));
      assert.deepEqual(frames[0] && { type: frames[0].type, event: (frames[0].event as { type: string }).type }, { type: 'run.update', event: 'run.created' });
      assert.equal((frames.at(-1)?.stateAfter as { run: unknown }).run, 'cancelled');
      assert.ok(all.frames.some((frame) => frame.runId === other.runId));
      await eventually(() => only.frames.length === frames.length, 5000, 'the filtered stream');
      assert.ok(only.frames.every((frame) => frame.runId === run.runId));
      all.ws.close();
      only.ws.close();
      await eventually(() => http.observers.clients === 0, 5000, 'observers to leave');
      await runtime.stop();
      await http.close();
    });
  });
});
