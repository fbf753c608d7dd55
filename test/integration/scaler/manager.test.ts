import assert from 'node:assert/strict';
import type { Kysely } from 'kysely';
import { randomUUID } from 'node:crypto';
import { it } from 'node:test';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { systemClock } from '../../../actors/clock.ts';
import { ScalerManager } from '../../../actors/scaler/manager.ts';
import { createAgentToken } from '../../../src/db/agent-tokens.ts';
import type { Schema } from '../../../src/db/schema.ts';
import type { ExitListener, LabelSet, OwnedResource, ScalerBackend, SpawnContext, SpawnedAgent } from '../../../actors/scaler/ports.ts';
import { loadConfig } from '../../../src/config/index.ts';
import { FailureTracker } from '../../../actors/scaler/failure-tracker.ts';
import { scalerJobs, scalerStore } from '../../../src/scaler/index.ts';
import { loadScalerState } from '../../../src/db/scaler-state.ts';
import { createScalerMetrics } from '../../../actors/scaler/metrics.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';
import { eventually, planFor, startTestRuntime } from '../../support/runtime.ts';
import type { TestRuntime } from '../../support/runtime.ts';

const LABEL = 'scaled';
const silent = pino({ level: process.env.TEST_LOG_LEVEL ?? 'silent' });

/** A backend that starts nothing: it records spawns and destroys, and fails the spawns it is told to. */
class RecordingBackend implements ScalerBackend {
  readonly type = 'bare-metal' as const;
  readonly spawnsOnLocalHost = true;
  readonly labelSets: LabelSet[];
  readonly spawned: { agentId: string; context: SpawnContext | null; token: string }[] = [];
  readonly destroyed: string[] = [];
  readonly live = new Set<string>();
  failNext: string | null = null;
  /** Runs before a destroy is recorded: what the test wants to know at that moment. */
  beforeDestroy: ((agentId: string) => Promise<void>) | null = null;
  /** `properties` as the compiled label set of that agent kind: the reference agent declares run steps. */
  constructor(
    readonly maxAgents: number,
    readonly name = 'fake',
    properties: LabelSet['properties'] = { 'switchyard.runSteps': true },
  ) {
    this.labelSets = [{ labels: [LABEL], mandatoryLabels: [], properties, resources: null, warmPool: null }];
  }
  getActiveCount = () => this.live.size;
  onExit(_listener: ExitListener): void {}
  spawn(labelSet: LabelSet, agentId: string, _url: string, _limits: unknown, context: SpawnContext | null, credentials: { token: string }): Promise<SpawnedAgent> {
    if (this.failNext) {
      const message = this.failNext;
      this.failNext = null;
      return Promise.reject(new Error(message));
    }
    this.spawned.push({ agentId, context, token: credentials.token });
    this.live.add(agentId);
    return Promise.resolve({ id: agentId, labelSet, backendRef: agentId, spawnedAt: Date.now(), state: 'spawning' });
  }
  async destroy(agentId: string): Promise<void> {
    await this.beforeDestroy?.(agentId);
    this.destroyed.push(agentId);
    this.live.delete(agentId);
  }
  listOwned(): Promise<OwnedResource[]> {
    return Promise.resolve([...this.live].map((agentId) => ({ agentId, backendRef: agentId, scaler: this.name, boundJobId: null, runId: null })));
  }
  shutdownAll = () => Promise.resolve();
  reload = () => ({ ok: true as const });
}

function managerFor(runtime: TestRuntime, db: Kysely<Schema>, backend: RecordingBackend | RecordingBackend[], coordinatorId: string, spawnTimeoutMs = 60_000) {
  const config = loadConfig({ SWITCHYARD_COORDINATOR_ID: coordinatorId, DATABASE_URL: 'postgres://unused' });
  const manager = new ScalerManager({
    backends: Array.isArray(backend) ? backend : [backend],
    caps: { maxAgents: 3, maxCpu: null, maxMemoryBytes: null },
    ...{ spawnTimeoutMs, tokenTtlMs: 3_600_000, tickMs: 50 },
    store: scalerStore({ db, config, clock: systemClock, epoch: () => runtime.ownership.epoch }),
    registry: runtime.registry,
    jobs: scalerJobs(runtime.supervisor),
    deliver: runtime.deliver,
    offer: () => void runtime.dispatcher.offer(),
    mintToken: async (args) => {
      const { token, record } = await createAgentToken(db, { agentType: 'ephemeral', createdBy: args.agentId, labels: args.labels, expiresAt: args.expiresAt, now: Date.now() });
      return { token, tokenId: record.id };
    },
    revokeToken: () => Promise.resolve(),
    tracker: new FailureTracker(),
    metrics: createScalerMetrics(new Registry()),
    clock: systemClock,
    log: silent,
  });
  runtime.dispatcher.attachScaler(manager);
  manager.setOrchestratorUrl('ws://127.0.0.1:9/ws/agent');
  return manager;
}

/** Runs of one job `build` on LABEL: a shell step by default; `typescript` makes it a TypeScript step. */
async function createRuns(runtime: TestRuntime, count: number, step: 'run' | 'typescript' = 'run'): Promise<string[]> {
  const ids = Array.from({ length: count }, () => randomUUID());
  const steps = [step === 'run' ? { name: 's', hasOutputs: false, run: 'true' } : { name: 's', hasOutputs: false }];
  const workflow = { name: 'scaled', jobs: [{ _type: 'static' as const, name: 'build', runsOn: [{ kind: 'exact' as const, value: LABEL }], needs: [], steps }] };
  await Promise.all(ids.map((id) => runtime.supervisor.createRun({ input: planFor(id, workflow), repository: 'acme/app' })));
  return ids;
}

async function reasons(db: Kysely<Schema>, runIds: string[]) {
  const rows = await db.selectFrom('jobs').select(['run_id', 'waiting_reason', 'status', 'attempt']).where('run_id', 'in', runIds).execute();
  return rows.map((row) => ({ ...row, reason: row.waiting_reason as { kind: string; message: string } | null }));
}

await describeEachKind('scaler manager on a real runtime', (kind) => {
  it(`a job whose matching agent is busy waits for capacity, not "none connected", when no backend serves it (${kind})`, async (t) => {
    await withTestDatabase(kind, async ({ db }) => {
      const runtime = await startTestRuntime(db, 'coord-busy');
      const manager = managerFor(runtime, db, new RecordingBackend(2, 'reference'), 'coord-busy');
      t.after(async () => {
        await manager.stop();
        await runtime.stop();
      });
      await manager.start();
      const link = { send: () => undefined, close: () => undefined };
      const busy = new Map([['other-dispatch', { runId: 'other-run', jobKey: 'other' }]]);
      runtime.registry.add({ ...{ agentId: 'kici-busy', labels: [LABEL], taints: [], properties: {}, connectionId: 'c-1', tokenId: null }, ...{ maxConcurrency: 1, scalerManaged: false, unusable: null, lastFrameAt: 0, slots: busy, sent: new Set<string>(), link } });
      const [tsRun] = await createRuns(runtime, 1, 'typescript');
      const reason = await eventually(async () => (await reasons(db, [tsRun as string]))[0]?.reason, 10_000, 'a waiting reason');
      assert.deepEqual(reason, { kind: 'capacity', message: '1 matching agent is busy' });
    });
  });

  it(`SCL-5: 50 jobs asking at once get exactly the capped number of spawns, the rest wait "scaler at capacity" (${kind})`, async (t) => {
    await withTestDatabase(kind, async ({ db }) => {
      const runtime = await startTestRuntime(db, 'coord-caps');
      const backend = new RecordingBackend(10);
      const manager = managerFor(runtime, db, backend, 'coord-caps');
      t.after(async () => {
        await manager.stop();
        await runtime.stop();
      });
      await manager.start();
      const runIds = await createRuns(runtime, 50);
      const settled = await eventually(async () => {
        const rows = await reasons(db, runIds);
        const spawning = rows.filter((r) => r.reason?.kind === 'scaler_spawning');
        const capacity = rows.filter((r) => r.reason?.kind === 'capacity');
        return spawning.length === 3 && capacity.length === 47 ? { spawning, capacity } : null;
      }, 15_000, '3 spawning and 47 at capacity');
      assert.ok(settled.capacity.every((r) => r.reason?.message === 'scaler at capacity'));
      assert.ok(settled.spawning.every((r) => /^spawning on fake \(agent scaler-bare-metal-[0-9a-f]{8}\)$/.test(r.reason?.message ?? '')));
      await eventually(() => backend.spawned.length === 3, 5_000, 'three spawns');
      await new Promise((resolve) => setTimeout(resolve, 300));
      assert.equal(backend.spawned.length, 3, 'never more than the cap, however often the dispatcher asks');
      assert.deepEqual(new Set(backend.spawned.map((s) => s.context?.runId)).size, 3, 'each spawn is bound to a different job');
      const stored = await db.selectFrom('scaler_state' as never).selectAll().execute();
      assert.equal(stored.length, 1, 'the reservations are stored');
    });
  });

  it(`a single-use agent destroyed after its job frees its reservation for a job refused "at capacity", with no other change to wake it (${kind})`, async (t) => {
    await withTestDatabase(kind, async ({ db }) => {
      const runtime = await startTestRuntime(db, 'coord-freed');
      const backend = new RecordingBackend(10);
      const manager = managerFor(runtime, db, backend, 'coord-freed');
      t.after(async () => {
        await manager.stop();
        await runtime.stop();
      });
      await manager.start();
      const runIds = await createRuns(runtime, 4);
      await eventually(async () => (await reasons(db, runIds)).filter((r) => r.reason?.message === 'scaler at capacity').length === 1, 10_000, 'three spawns and one job at capacity');
      // The reason is stored when the spawn is decided; the backend is asked only after the scaler's state is stored.
      await eventually(() => backend.spawned.length === 3, 10_000, 'the three spawns to reach the backend');
      const [first] = backend.spawned;
      const agentId = first?.agentId as string;
      // What its register.ack will say (SCL-3): a job waits for this agent; no other agent has one.
      assert.equal(manager.hasBoundJobWaiting(agentId), true, 'the spawned agent has a job waiting for it');
      assert.equal(manager.hasBoundJobWaiting('scaler-bare-metal-00000000'), false, 'an agent the scaler never spawned');
      const link = { send: () => undefined, close: () => undefined };
      runtime.registry.add({ ...{ agentId, labels: [LABEL], taints: [], properties: { 'switchyard.runSteps': true }, connectionId: 'c-1', tokenId: null }, ...{ maxConcurrency: 1, scalerManaged: true, unusable: null, lastFrameAt: 0, slots: new Map(), sent: new Set<string>(), link } });
      const session = await eventually(() => {
        const found = runtime.registry.get(agentId);
        return found && found.slots.size === 1 ? found : null;
      }, 10_000, 'the registered agent to be granted its bound job');
      await eventually(() => !manager.hasBoundJobWaiting(agentId), 10_000, 'its job granted: nothing waits for the agent any more');
      // The job ends: the slot frees while the agent is still busy, so the dispatcher's offer finds the scaler full;
      // the reservation frees only when the destroy completes, and that alone must wake the waiting job.
      runtime.registry.release(agentId, [...session.slots.keys()][0] as string);
      await eventually(() => backend.destroyed.includes(agentId), 10_000, 'the single-use agent to be destroyed');
      await eventually(() => backend.spawned.length === 4, 10_000, 'a spawn for the job that waited at capacity');
      assert.equal(new Set(backend.spawned.map((s) => s.context?.runId)).size, 4, 'each of the four jobs got its own agent');
    });
  });

  // Regression: an agent spawned for a job that went elsewhere was offered the next job and then idled out (or, a stock
  // agent, exited by itself) under it: an extra attempt for nothing.
  it(`a single-use agent whose own job went elsewhere is offered no other job; that job waits for its own agent (${kind})`, async (t) => {
    await withTestDatabase(kind, async ({ db }) => {
      const runtime = await startTestRuntime(db, 'coord-single');
      const backend = new RecordingBackend(10);
      const manager = managerFor(runtime, db, backend, 'coord-single');
      t.after(async () => {
        await manager.stop();
        await runtime.stop();
      });
      await manager.start();
      const [first] = await createRuns(runtime, 1);
      await eventually(() => backend.spawned.length === 1, 10_000, 'a spawn for the first job');
      await runtime.supervisor.send(first as string, { type: 'run.cancel', reason: 'not needed', force: false, by: 'test' });
      const [second] = await createRuns(runtime, 1);
      await eventually(() => backend.spawned.length === 2, 10_000, 'a spawn for the second job');
      const register = (agentId: string, connectionId: string) => {
        const link = { send: () => undefined, close: () => undefined };
        runtime.registry.add({ ...{ agentId, labels: [LABEL], taints: [], properties: { 'switchyard.runSteps': true }, connectionId, tokenId: null }, ...{ maxConcurrency: 1, scalerManaged: true, unusable: null, lastFrameAt: 0, slots: new Map(), sent: new Set<string>(), link } });
      };
      const [forFirst, forSecond] = backend.spawned.map((s) => s.agentId);
      register(forFirst as string, 'c-first');
      await eventually(() => manager.context?.agents[forFirst as string]?.state === 'idle', 10_000, 'the first agent registered');
      await runtime.dispatcher.offer();
      assert.equal(runtime.registry.get(forFirst as string)?.slots.size, 0, 'the agent spawned for the cancelled job is not given the second job');
      register(forSecond as string, 'c-second');
      // The grant is read from the job's row: these runs have no stored source, so the dispatch that follows
      // the grant fails at once and frees the slot again (polling the slot raced that).
      const granted = await eventually(() => db.selectFrom('jobs').select(['agent_id']).where('run_id', '=', second as string).where('agent_id', 'is not', null).executeTakeFirst(), 10_000, 'the second job granted');
      assert.equal(granted.agent_id, forSecond, 'the second job went to its own agent');
    });
  });

  it(`a bound spawn failure reaches its job as provision.failed with a readable reason; a spawn that never registers is released (B14) (${kind})`, async (t) => {
    await withTestDatabase(kind, async ({ db }) => {
      const runtime = await startTestRuntime(db, 'coord-fail');
      const backend = new RecordingBackend(1);
      backend.failNext = 'no capacity left in rack 7';
      const manager = managerFor(runtime, db, backend, 'coord-fail', 600);
      t.after(async () => {
        await manager.stop();
        await runtime.stop();
      });
      await manager.start();
      const [runId] = await createRuns(runtime, 1);
      const failed = await eventually(async () => {
        const [row] = await reasons(db, [runId as string]);
        return row?.reason?.kind === 'scaler_failed' ? row : null;
      }, 10_000, 'the job to wait with scaler_failed');
      assert.equal(failed.reason?.message, 'scaler fake could not provide an agent: no capacity left in rack 7');
      assert.equal(failed.attempt, 1, 'the failed spawn counted one attempt');
      // The retry spawns again; that agent never registers, so its deadline releases it and reports it.
      await eventually(() => backend.destroyed.length >= 1, 10_000, 'the unregistered spawn to be destroyed at its deadline');
      // The freed reservation re-offers at once, so the waiting reason may already read "spawning" again: the journal keeps what reached the job.
      const failures = await eventually(async () => {
        const rows = await db.selectFrom('run_events').select(['seq', 'event']).where('run_id', '=', runId as string).orderBy('seq').execute();
        const messages = rows.map((row) => row.event as { type?: string; message?: string }).filter((event) => event.type === 'provision.failed');
        return messages.length >= 2 ? messages.map((event) => event.message ?? '') : null;
      }, 10_000, 'the spawn timeout to reach the job');
      assert.match(failures[0] ?? '', /no capacity left in rack 7/);
      assert.match(failures[1] ?? '', /did not register within 1 s/, 'the second attempt failed at its spawn deadline');
      assert.ok(((await reasons(db, [runId as string]))[0]?.attempt ?? 0) >= 2);
      await eventually(() => backend.spawned.length >= 2, 10_000, 'the freed reservation to serve the next attempt');
      assert.ok((manager.context ? Object.keys(manager.context.agents).length : 9) <= 1, 'never more than one reservation (cap 1)');
    });
  });

  it(`DESIGN.md §4: the destroy an agent's own spawn deadline asks for runs only once the snapshot that asked for it is stored (${kind})`, async (t) => {
    await withTestDatabase(kind, async ({ db }) => {
      const runtime = await startTestRuntime(db, 'coord-durable');
      const backend = new RecordingBackend(1);
      const stored: { record?: string; child?: unknown }[] = [];
      backend.beforeDestroy = async (agentId) => {
        const state = await loadScalerState(db, 'coord-durable');
        const snapshot = state?.snapshot as { context: { agents: Record<string, { state: string }> }; children: Record<string, { snapshot: { value: unknown } }> };
        stored.push({ record: snapshot.context.agents[agentId]?.state, child: snapshot.children[agentId]?.snapshot.value });
      };
      const manager = managerFor(runtime, db, backend, 'coord-durable', 300);
      t.after(async () => {
        await manager.stop();
        await runtime.stop();
      });
      await manager.start();
      await createRuns(runtime, 1);
      await eventually(() => backend.destroyed.length >= 1, 10_000, 'the unregistered spawn to be destroyed at its deadline, with no tick');
      assert.deepEqual(stored[0], { record: 'destroying', child: 'destroying' });
    });
  });

  it(`a job goes only to a backend whose agent executes its steps; otherwise the reason names the agent it needs (${kind})`, async (t) => {
    const waitingReason = async (db: Kysely<Schema>, runId: string | undefined, what: string) =>
      eventually(async () => {
        const [row] = await reasons(db, [runId as string]);
        return row?.reason?.kind === 'no_matching_agent' ? row.reason.message : null;
      }, 10_000, what);
    await withTestDatabase(kind, async ({ db }) => {
      const runtime = await startTestRuntime(db, 'coord-executor');
      const reference = new RecordingBackend(2, 'reference');
      const manager = managerFor(runtime, db, reference, 'coord-executor');
      t.after(async () => {
        await manager.stop();
        await runtime.stop();
      });
      await manager.start();
      const [tsRun] = await createRuns(runtime, 1, 'typescript');
      assert.equal(
        await waitingReason(db, tsRun, 'the TypeScript job to wait for a KiCI agent'),
        `needs a KiCI agent (TypeScript steps); none connected and no scaler backend spawns one for labels ${LABEL} (reference spawns the reference agent, which executes only run steps)`,
      );
      assert.deepEqual(reference.spawned, [], 'the reference agent is never spawned for TypeScript steps');
    });
    await withTestDatabase(kind, async ({ db }) => {
      const runtime = await startTestRuntime(db, 'coord-executor-kici');
      const kici = new RecordingBackend(2, 'kici', {});
      const manager = managerFor(runtime, db, kici, 'coord-executor-kici');
      t.after(async () => {
        await manager.stop();
        await runtime.stop();
      });
      await manager.start();
      const [shellRun] = await createRuns(runtime, 1, 'run');
      assert.equal(
        await waitingReason(db, shellRun, 'the run-step job to wait for an agent that executes run steps'),
        `needs an agent that can execute run steps; none connected and no scaler backend spawns one for labels ${LABEL} (kici spawns KiCI agents, which do not execute run steps)`,
      );
      const [tsRun] = await createRuns(runtime, 1, 'typescript');
      await eventually(() => kici.spawned.length === 1, 10_000, 'a KiCI agent spawned for the TypeScript job');
      assert.equal(kici.spawned[0]?.context?.runId, tsRun);
    });
  });
});
