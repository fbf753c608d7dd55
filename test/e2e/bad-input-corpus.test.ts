import assert from 'node:assert/strict';
import { request } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { WebSocket } from 'ws';
import { CLOSE_CODES } from '../../src/ws/messages.ts';
import { skipReason } from '../support/database.ts';
import { dropDatabase, FakeAgent } from '../support/fake-agent.ts';
import { createLockRepo } from '../support/lock-repo.ts';
import { ADMIN_TOKEN, after as processCleanups, sharedDatabaseUrl, startCoordinatorProcess } from '../support/processes.ts';
import type { CoordinatorProcess } from '../support/processes.ts';
import { eventually } from '../support/runtime.ts';
import { pushPayload } from '../support/webhooks.ts';
import {
  API_CASES,
  GENERIC_SECRET,
  GENERIC_SOURCE,
  LOCK_CASES,
  SECRET,
  STALLING_CASES,
  WEBHOOK_CASES,
  github,
  goodLock,
  withAdminToken,
} from './bad-input-corpus.cases.ts';
import type { HttpCase, LockCase, Processing, Wire } from './bad-input-corpus.cases.ts';

// Issue 8, item 3: a corpus of bad input against one real coordinator; nothing good may be lost.

interface Answer {
  status: number;
  text: string;
  json: Record<string, unknown> | null;
}

interface DeliveryRow {
  delivery_id: string;
  status: string;
  attempts: number;
  last_error: string | null;
  outcome: { reason?: string; runIds?: string[]; error?: string } | null;
}

interface RunRow {
  run_id: string;
  workflow_name: string;
  status: string;
  failure_reason: string | null;
  input_summary: unknown;
  init_failure: { scope: string; category: string; message: string } | null;
}

interface RunView {
  run: RunRow;
  jobs: { job_key: string; status: string; init_failure: RunRow['init_failure'] }[];
}

const MiB = 1024 * 1024;
const UNFINISHED = new Set(['received', 'processing']);

/** Sends a wire request with node:http: any path, a declared length without a body, or a chunked stream. */
function send(base: string, wire: Wire): Promise<Answer> {
  const { hostname, port } = new URL(base);
  return new Promise((resolve, reject) => {
    const headers = { ...wire.headers, ...(wire.declaredLength === undefined ? {} : { 'content-length': String(wire.declaredLength) }) };
    // agent: false: one connection per case, so a connection the server refused is never reused.
    const req = request({ hostname, port, method: wire.method, path: wire.path, headers, agent: false, timeout: 20_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, text, json: parseJson(text) });
        req.destroy();
      });
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`no answer to ${wire.method} ${wire.path.slice(0, 80)} within 20 s`)));
    if (wire.declaredLength !== undefined) req.flushHeaders();
    else if (wire.streamBytes !== undefined) void stream(req, wire.streamBytes);
    else req.end(wire.body);
  });
}

/** Writes `bytes` in 1 MiB chunks, stopping quietly once the server has answered and closed. */
async function stream(req: ReturnType<typeof request>, bytes: number): Promise<void> {
  const chunk = Buffer.alloc(MiB, 0x20);
  for (let sent = 0; sent < bytes && !req.destroyed; sent += MiB) {
    if (!req.write(chunk)) {
      await new Promise<void>((resolve) => {
        const done = () => {
          req.off('drain', done).off('close', done);
          resolve();
        };
        req.on('drain', done).on('close', done);
      });
    }
  }
  if (!req.destroyed) req.end();
}

function parseJson(text: string): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : null;
  } catch {
    return null; // 431 and other answers from Node's HTTP layer have no JSON body
  }
}

describe('bad-input corpus against one coordinator (external Postgres)', { skip: await skipReason('external') }, () => {
  let coordinator: CoordinatorProcess;
  let databaseUrl: string;
  let repo: Awaited<ReturnType<typeof createLockRepo>>;
  let goodSha: string;
  let agentToken: string;
  const goodIds: string[] = [];
  const lockIds: string[] = [];
  const passed = new Map<string, number>();
  let nothingLost = false;

  before(async () => {
    databaseUrl = await sharedDatabaseUrl('external');
    repo = await createLockRepo();
    goodSha = repo.commit({ '.kici/kici.lock.json': goodLock(), README: 'good' }, 'good lock file');
    coordinator = await startCoordinatorProcess({ DATABASE_URL: databaseUrl, GITHUB_WEBHOOK_SECRET: SECRET, SWITCHYARD_COORDINATOR_ID: 'coord-corpus', LOG_LEVEL: 'warn' });
    const registered = await coordinator.api('/api/v1/repositories', { method: 'POST', body: JSON.stringify({ name: 'acme/app', provider: 'local', path: repo.path }) });
    assert.equal(registered.status, 201);
    const source = { name: GENERIC_SOURCE, verification: 'hmac-sha256', secret: GENERIC_SECRET, repository: 'acme/app' };
    assert.equal((await coordinator.api('/api/v1/sources', { method: 'POST', body: JSON.stringify(source) })).status, 201);
    agentToken = ((await (await coordinator.api('/api/v1/agent-tokens', { method: 'POST', body: '{}' })).json()) as { token: string }).token;
    await sendGood();
  });

  after(async () => {
    for (const agent of agents.splice(0)) agent.drop();
    await stopOrKill(coordinator, 10_000);
    await dropDatabase(databaseUrl);
    for (const cleanup of processCleanups.splice(0)) await cleanup();
  });

  function count(category: string): void {
    passed.set(category, (passed.get(category) ?? 0) + 1);
  }

  /** A correctly signed push of the good commit with a fresh delivery id: it must be accepted and, in the end, run once. */
  async function sendGood(): Promise<void> {
    const id = `good-${goodIds.length}`;
    goodIds.push(id);
    const answer = await send(coordinator.url, github(JSON.stringify(pushPayload(goodSha)), { delivery: id }));
    assert.equal(answer.status, 202, `good delivery ${id}: ${answer.text}`);
  }

  async function deliveries(): Promise<DeliveryRow[]> {
    return ((await (await coordinator.api('/api/v1/deliveries')).json()) as { deliveries: DeliveryRow[] }).deliveries;
  }

  async function finished(id: string, until = (row: DeliveryRow) => !UNFINISHED.has(row.status), timeoutMs = 20_000): Promise<DeliveryRow> {
    return eventually(async () => (await deliveries()).find((row) => row.delivery_id === id && until(row)), timeoutMs, `delivery ${id} to be processed`);
  }

  async function run(runId: string): Promise<RunView> {
    const res = await coordinator.api(`/api/v1/runs/${runId}`);
    assert.equal(res.status, 200, `run ${runId}`);
    return (await res.json()) as RunView;
  }

  async function checkProcessing(id: string, expected: Processing, timeoutMs: number): Promise<void> {
    const row = await finished(id, undefined, timeoutMs);
    assert.equal(row.status, expected.status, `delivery ${id}: ${JSON.stringify(row)}`);
    if (expected.status === 'processed') assert.equal(row.outcome?.runIds?.length, 1, 'one run for the delivery');
    const detail = expected.status === 'retrying' || expected.status === 'dead' ? row.last_error : row.outcome?.reason;
    if (expected.detail) assert.match(String(detail), expected.detail);
  }

  async function checkHttpCase(c: HttpCase, processingTimeoutMs = 20_000): Promise<void> {
    const wire = withAdminToken(c.wire(goodSha), ADMIN_TOKEN);
    const answer = await send(coordinator.url, wire).catch((error: NodeJS.ErrnoException): null => {
      if (c.resetAllowed === undefined || (error.code !== 'ECONNRESET' && error.code !== 'EPIPE')) throw error;
      return null; // the connection closed before the answer arrived: a known race, accepted for this case
    });
    if (answer === null) return;
    assert.equal(answer.status, c.status, `answered ${answer.status}: ${answer.text.slice(0, 300)}`);
    if (c.status >= 400 && c.status !== 431) assert.equal(typeof answer.json?.error, 'string', 'a refusal names its error');
    if (c.error !== undefined) assert.equal(answer.json?.error, c.error);
    if (c.reason !== undefined) assert.match(String(answer.json?.reason), c.reason);
    const deliveryId = wire.headers['x-github-delivery'];
    if (c.processing !== undefined && deliveryId !== undefined) await checkProcessing(deliveryId, c.processing, processingTimeoutMs);
  }

  async function checkLockCase(c: LockCase, index: number): Promise<void> {
    const sha = repo.commit({ '.kici/kici.lock.json': c.lock }, c.name);
    const id = `lock-${index}`;
    lockIds.push(id);
    const answer = await send(coordinator.url, github(JSON.stringify(pushPayload(sha)), { delivery: id }));
    assert.equal(answer.status, 202, answer.text);
    const row = await finished(id);
    assert.equal(row.status, c.expect === 'corrupt' ? 'lockfile_corrupt' : 'processed', JSON.stringify(row));
    assert.equal(row.attempts, 0, 'processed at the first attempt');
    const [runId, ...more] = row.outcome?.runIds ?? [];
    assert.ok(runId !== undefined && more.length === 0, `one run: ${JSON.stringify(row.outcome)}`);
    const view = await eventually(async () => {
      const current = await run(runId);
      return current.run.status === 'failed' ? current : null;
    }, 15_000, `run ${runId} to fail`);
    if (c.expect === 'corrupt') {
      assert.equal(view.run.workflow_name, '(unresolved workflow)');
      assert.deepEqual({ ...view.run.init_failure, message: undefined }, { scope: 'run', category: 'lock_resolution', message: undefined });
      assert.match(view.run.init_failure?.message ?? '', c.message);
      assert.deepEqual(view.jobs, [], 'nothing to dispatch');
    } else {
      const build = view.jobs.find((j) => j.job_key === 'build');
      assert.equal(build?.init_failure?.category, 'dynamic_eval', JSON.stringify(view.jobs));
      assert.match(build?.init_failure?.message ?? '', c.message);
    }
  }

  for (const [category, cases] of [['webhook', WEBHOOK_CASES], ['api', API_CASES]] as const) {
    describe(category, () => {
      for (const c of cases) {
        it(c.name, { todo: c.todo }, async () => {
          await checkHttpCase(c);
          await sendGood();
          count(category);
        });
      }
    });
  }

  describe('lockfile', () => {
    LOCK_CASES.forEach((c, index) => {
      it(c.name, async () => {
        await checkLockCase(c, index);
        await sendGood();
        count('lockfile');
      });
    });
  });

  const agents: FakeAgent[] = [];
  const open = async () => {
    const agent = await FakeAgent.open(`${coordinator.url.replace(/^http/, 'ws')}/ws/agent`, { compress: false, heartbeatMs: 0 });
    agents.push(agent);
    return agent;
  };
  const wsCases: [string, () => Promise<void>][] = [
    ['garbage text as the first frame: error invalid_message, close 4003', async () => {
      const agent = await open();
      agent.sendRaw('{"type": "auth.request", oops');
      assert.equal((await agent.next('error')).code, 'invalid_message');
      assert.equal((await agent.closed).code, CLOSE_CODES.INVALID_MESSAGE);
    }],
    ['a binary first frame: close 4003', async () => {
      const agent = await open();
      agent.sendRaw(Buffer.from('{"type":"auth.request"}'), true);
      const closed = await agent.closed;
      assert.equal(closed.code, CLOSE_CODES.INVALID_MESSAGE);
      assert.match(closed.reason, /Binary/);
    }],
    ['a heartbeat before auth.request: auth.failure, close 4010', async () => {
      const agent = await open();
      agent.send({ type: 'heartbeat', timestamp: Date.now() });
      assert.match((await agent.next('auth.failure')).reason, /Expected auth\.request/);
      assert.equal((await agent.closed).code, CLOSE_CODES.AUTH_FAILED);
    }],
    ['agent.register with labels a number: error naming the field, close 4003', async () => {
      const agent = await open();
      await agent.authenticate(agentToken);
      agent.send({ ...agent.registerMessage(), labels: 7 });
      assert.match((await agent.next('error')).message, /agent\.register: labels/);
      assert.equal((await agent.closed).code, CLOSE_CODES.INVALID_MESSAGE);
    }],
    ['100 000 nested arrays after auth: error, close 4003', async () => {
      const agent = await open();
      await agent.authenticate(agentToken);
      agent.sendRaw('['.repeat(100_000) + ']'.repeat(100_000));
      assert.equal((await agent.next('error')).code, 'invalid_message');
      assert.equal((await agent.closed).code, CLOSE_CODES.INVALID_MESSAGE);
    }],
    ['invalid UTF-8 in a text frame: close 1007', async () => {
      const agent = await open();
      agent.sendRaw(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]));
      assert.equal((await agent.closed).code, 1007);
    }],
    ['invalid UTF-8 to the observer stream: close 1007, the coordinator lives', async () => {
      const observer = new WebSocket(`${coordinator.url.replace(/^http/, 'ws')}/ws/observe?token=${ADMIN_TOKEN}`);
      observer.on('error', () => undefined);
      await new Promise((resolve) => observer.once('open', resolve));
      const closed = new Promise<number>((resolve) => observer.once('close', resolve));
      observer.send(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), { binary: false });
      assert.equal(await closed, 1007);
    }],
    ['a frame over the 25 MiB cap: close 1009', async () => {
      const agent = await open();
      agent.sendRaw(`{"type":"auth.request","token":"${'x'.repeat(26 * MiB)}"}`);
      assert.equal((await agent.closed).code, 1009);
    }],
  ];

  describe('websocket', () => {
    for (const [name, body] of wsCases) {
      it(name, async () => {
        await body();
        assert.equal(coordinator.child.exitCode, null, 'the coordinator is still running');
        count('websocket');
      });
    }
  });

  it('nothing lost: every good delivery ran exactly once, every corrupt lock file was processed, and the coordinator is healthy', async () => {
    const unprocessed = async () => {
      const rows = await deliveries();
      return goodIds.filter((id) => rows.find((r) => r.delivery_id === id)?.status !== 'processed').map((id) => `${id}: ${rows.find((r) => r.delivery_id === id)?.status ?? 'missing'}`);
    };
    await eventually(async () => (await unprocessed()).length === 0, 30_000, 'every good delivery to be processed').catch(async (error: unknown) => {
      throw new Error(`${String(error)}; not processed: ${(await unprocessed()).join(', ')}`);
    });
    const rows = await deliveries();
    assert.ok(rows.length < 200, 'the deliveries API lists them all (it returns at most 200)');
    const runIds = rows.filter((r) => goodIds.includes(r.delivery_id)).map((r) => r.outcome?.runIds ?? []);
    assert.ok(runIds.every((ids) => ids.length === 1), 'one run per good delivery');
    assert.equal(new Set(runIds.flat()).size, goodIds.length, 'no two good deliveries share a run');
    const runs = ((await (await coordinator.api('/api/v1/runs?workflow=ci&limit=1000')).json()) as { runs: { input_summary: { delivery?: { deliveryId: string } } }[] }).runs;
    const perGood = goodIds.map((id) => runs.filter((r) => r.input_summary.delivery?.deliveryId === id).length);
    assert.deepEqual(perGood, goodIds.map(() => 1), 'exactly one ci run per good delivery');
    const lockRows = rows.filter((r) => lockIds.includes(r.delivery_id));
    assert.equal(lockRows.length, LOCK_CASES.length);
    assert.ok(lockRows.every((r) => r.status === 'lockfile_corrupt' || r.status === 'processed'), 'no corrupt-lock delivery is dead, retrying or lost');
    const unreadable = (r: DeliveryRow) => /is not a commit id/.test(r.last_error ?? '');
    assert.deepEqual(rows.filter((r) => r.status === 'dead' && !unreadable(r)), [], 'no delivery is dead but those naming no commit');
    assert.equal((await fetch(`${coordinator.url}/healthz`)).status, 200);
    assert.equal((await fetch(`${coordinator.url}/readyz`)).status, 200);
    assert.equal(coordinator.child.exitCode, null);
    nothingLost = true;
  });

  /** The run of a case's delivery, as its `run` expectation says. */
  async function checkRun(c: HttpCase): Promise<void> {
    const deliveryId = withAdminToken(c.wire(goodSha), ADMIN_TOKEN).headers['x-github-delivery'];
    if (c.run === undefined || deliveryId === undefined) return;
    const runId = (await finished(deliveryId)).outcome?.runIds?.[0];
    assert.ok(runId !== undefined, 'the delivery names its run');
    const view = await run(runId);
    assert.match(view.run.status, c.run.status, `run ${runId}: ${view.run.status} ${view.run.failure_reason ?? ''}`);
    if (c.run.summary) assert.match(JSON.stringify(view.run.input_summary), c.run.summary);
  }

  describe('group-commit poisoning (run last: before the fix they stalled every run write)', () => {
    for (const c of STALLING_CASES) {
      it(c.name, { todo: c.todo }, async () => {
        const fixed = { ...c, wire: memo(c.wire) };
        await checkHttpCase(fixed, 8_000);
        await checkRun(fixed);
        await sendGood();
        await finished(goodIds.at(-1) ?? '', (row) => row.status === 'processed', 8_000);
      });
    }
  });

  it('summary', (t) => {
    const categories = { webhook: WEBHOOK_CASES.filter((c) => !c.todo).length, api: API_CASES.filter((c) => !c.todo).length, lockfile: LOCK_CASES.length, websocket: wsCases.length };
    const total = Object.values(categories).reduce((a, b) => a + b, 0);
    const failing = Object.entries(categories).filter(([name, n]) => passed.get(name) !== n);
    const todos = [...WEBHOOK_CASES, ...API_CASES, ...STALLING_CASES].filter((c) => c.todo).length;
    const verdict = failing.length === 0 ? 'all answered as expected' : `NOT as expected in ${failing.map(([name]) => name).join(', ')}`;
    const line = `bad-input corpus: ${total} cases — ${Object.entries(categories).map(([name, n]) => `${name} ${n}`).join(', ')} — ${verdict}; ${todos} known bugs as todo; ${goodIds.length} good deliveries interleaved, ${nothingLost ? 'none lost' : 'SOME LOST'}`;
    t.diagnostic(line);
    assert.deepEqual(failing, []);
    assert.ok(nothingLost, 'the nothing-lost check passed');
  });
});

/** The same wire (same random delivery id) every time it is asked for. */
function memo(wire: HttpCase['wire']): HttpCase['wire'] {
  const made = new Map<string, Wire>();
  return (sha) => {
    const cached = made.get(sha) ?? wire(sha);
    made.set(sha, cached);
    return cached;
  };
}

/** SIGTERM, then SIGKILL if a stalled commit keeps the coordinator from shutting down. */
async function stopOrKill(coordinator: CoordinatorProcess, graceMs: number): Promise<void> {
  if (coordinator.child.exitCode !== null || coordinator.child.signalCode !== null) return;
  coordinator.child.kill('SIGTERM');
  const timer = setTimeout(() => coordinator.child.kill('SIGKILL'), graceMs);
  await coordinator.exited;
  clearTimeout(timer);
}
