import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { systemClock } from '../actors/clock.ts';
import type { NewRun } from '../actors/runs/ports.ts';
import type { Clock } from '../actors/clock.ts';
import { createAgentGateway } from './ws/agent-gateway.ts';
import type { CompiledConfig } from './config/index.ts';
import { jobTimeoutsOf } from './config/timeouts.ts';
import { openDatabase } from './db/database.ts';
import type { Database } from './db/database.ts';
import type { AgentTokenRecord } from './db/agent-tokens.ts';
import { loadAdminTokenHash } from './http/admin-token.ts';
import { registerAgentTokenRoutes } from './http/api-agent-tokens.ts';
import { registerScalerRoutes } from './http/api-scalers.ts';
import { registerLogRoutes } from './http/api-logs.ts';
import { registerMachineRoutes } from './http/api-machines.ts';
import { registerReplayRoutes } from './http/api-replay.ts';
import { registerRunRoutes } from './http/api-runs.ts';
import { registerHealthRoutes } from './http/health.ts';
import { Router } from './http/router.ts';
import { createHttpServer, listen } from './http/server.ts';
import { registerSourceRoutes } from './http/api-sources.ts';
import { registerGithubWebhook } from './http/webhooks.ts';
import { registerGenericWebhook } from './http/webhooks-generic.ts';
import { createIntake } from './intake.ts';
import { listenForPeers } from './db/peer-bus.ts';
import type { ListenForPeers } from './peers.ts';
import { createRuntime } from './runtime.ts';
import { createScalerManager } from './scaler/index.ts';
import type { Runtime } from './runtime.ts';
import { connectionCounters, createAgentMetrics } from './ws/metrics.ts';
import { attachAgentServer } from './ws/server.ts';
import { attachObserveServer } from './ws/observe.ts';
import { startTokenExpirySweep } from './ws/token-expiry.ts';
import { registerVisualizerRoutes } from './http/visualizer.ts';

export interface CloseOptions {
  /** Let running jobs finish for up to this long first (new work is no longer placed). @default 0 */
  drainMs?: number;
  /** Ends the drain early (a second Ctrl-C). */
  abort?: AbortSignal;
}

export interface Coordinator {
  port: number;
  url: string;
  runtime: Runtime;
  close(options?: CloseOptions): Promise<void>;
}

export interface CoordinatorHooks {
  /** Ownership was lost; the coordinator has stopped writing. The CLI exits the process. */
  onFenced?: () => void;
}

/** The composition root: database → runtime → agent gateway → HTTP and WebSocket. */
export async function startCoordinator(config: CompiledConfig, log: Logger, clock: Clock = systemClock, hooks: CoordinatorHooks = {}): Promise<Coordinator> {
  const { db, ...database } = await openDatabase(config, log);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const onFenced = () => {
    log.fatal('this coordinator lost its lease (fenced); it stops so that nothing more is written');
    void close().finally(() => hooks.onFenced?.());
  };
  const listenToPeers: ListenForPeers = (channels, onSignal) => listenForPeers(database.connection, channels, onSignal, log.child({ component: 'peer-bus' }));
  const runtime = createRuntime({ config, db, clock, log, registry, onFenced, listen: listenToPeers });
  const agentMetrics = createAgentMetrics(registry, () => runtime.registry.size);
  const gateway = createAgentGateway({
    ...{ db, config, registry: runtime.registry, shared: runtime.shared, supervisor: runtime.supervisor, deliver: runtime.deliver },
    now: () => clock.now(),
    log,
    ...connectionCounters(agentMetrics),
  });
  const router = adminRoutes({ db, config, clock, registry, runtime, kickToken: gateway.kickToken });
  const intake = createIntake({ db, config, registry, createRun: (run) => runtime.createRun(run), now: () => clock.now(), log });
  registerGithubWebhook(router, intake.webhooks);
  registerGenericWebhook(router, intake.webhooks);
  registerSourceRoutes(router, { db, now: () => clock.now(), onRequeued: (key) => intake.queue.notify(key) });
  const scaler = await attachScalers({ config, db, clock, log, registry, runtime, router });
  const adminTokenHash = await loadAdminTokenHash(config.adminToken, config.dataDir, log);
  await runtime.start();
  await scaler.start();
  await intake.queue.start();
  const server: Server = createHttpServer({ router, adminTokenHash, log: log.child({ component: 'http' }) });
  const agents = attachAgentServer(server, gateway.connection, log);
  const observers = attachObserveServer(server, { observe: (listener) => runtime.supervisor.observe(listener), adminTokenHash, log });
  const port = await listen(server, config.port, config.host);
  scaler.setOrchestratorUrl(config.scaler.orchestratorUrl ?? agentUrl(config.host, port));
  log.info({ port, host: config.host, coordinatorId: config.coordinatorId, database: database.kind }, 'coordinator listening');
  let closing: Promise<void> | null = null;
  async function close(options: CloseOptions = {}): Promise<void> {
    closing ??= (async () => {
      await intake.stop();
      const busy = await drainJobs(runtime, options, log);
      await scaler.stop({ keep: busy });
      await runtime.stop({ release: true });
      await agents.close();
      await observers.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await runtime.executor.idle().catch(() => undefined);
      await database.close();
    })();
    return closing;
  }
  return { port, url: `http://${config.host}:${port}`, runtime, close };
}

/** Health, runs, jobs, logs, agent tokens, machines, replay and the visualizer. */
function adminRoutes(deps: { db: Database['db']; config: CompiledConfig; clock: Clock; registry: Registry; runtime: Runtime; kickToken: (record: AgentTokenRecord) => void }): Router {
  const { db, config, clock, runtime } = deps;
  const router = new Router();
  registerHealthRoutes(router, { db, registry: deps.registry, leaseHeld: () => runtime.ownership.held, coordinatorId: config.coordinatorId });
  registerRunRoutes(router, {
    ...{ db, createRun: (run: NewRun) => runtime.createRun(run), deliver: runtime.deliver },
    ...{ timeouts: jobTimeoutsOf(config), maxAttempts: config.maxDispatchAttempts, now: () => clock.now() },
  });
  registerAgentTokenRoutes(router, { db, now: () => clock.now(), onRevoked: deps.kickToken });
  registerLogRoutes(router, { db });
  registerMachineRoutes(router);
  registerReplayRoutes(router, { db });
  registerVisualizerRoutes(router);
  return router;
}

const DRAIN_POLL_MS = 200;

/**
 * A clean stop lets running jobs finish: nothing new is placed, and the wait ends when no agent here
 * holds a slot, at `drainMs`, or on `abort`. The agents still busy then are returned: they are left
 * running, and reclaim their jobs from the restarted coordinator within the recovery window.
 */
async function drainJobs(runtime: Runtime, options: CloseOptions, log: Logger): Promise<string[]> {
  runtime.dispatcher.pause();
  const busy = () => runtime.registry.all().filter((session) => session.slots.size > 0).map((session) => session.agentId);
  const until = Date.now() + (options.drainMs ?? 0);
  if (busy().length > 0 && Date.now() < until) log.info({ agents: busy().length, waitMs: options.drainMs }, 'draining: waiting for running jobs to finish (Ctrl-C again to stop now)');
  while (busy().length > 0 && Date.now() < until && options.abort?.aborted !== true) await new Promise((resolve) => setTimeout(resolve, DRAIN_POLL_MS));
  const left = busy();
  if (left.length > 0) log.warn({ agents: left }, 'stopping with jobs still running: their agents reclaim them after the restart');
  return left;
}

/** The scaler manager (orchestration.md §15), its API, and the sweep of expired agent tokens (protocol.md §3.2). */
async function attachScalers(deps: { config: CompiledConfig; db: Database['db']; clock: Clock; log: Logger; registry: Registry; runtime: Runtime; router: Router }) {
  const { config, clock, runtime } = deps;
  const scalers = await createScalerManager({
    ...{ config, db: deps.db, clock, log: deps.log, metricsRegistry: deps.registry, agents: runtime.registry, dispatcher: runtime.dispatcher },
    ...{ supervisor: runtime.supervisor, deliver: runtime.deliver, epoch: () => runtime.ownership.epoch },
  });
  registerScalerRoutes(deps.router, {
    ...{ scaler: scalers.manager, tracker: scalers.tracker, coordinatorId: config.coordinatorId, now: () => clock.now() },
    ...{ agentsConnected: () => runtime.registry.size, jobsWaiting: () => runtime.dispatcher.waitingCount },
  });
  let stopSweep = () => {};
  return {
    setOrchestratorUrl: (url: string) => scalers.manager.setOrchestratorUrl(url),
    /** Scaler writes are fenced by the lease, so this runs once the lease is held; waiting jobs then ask again. */
    async start() {
      if (config.scaler.backends.length > 0) await scalers.manager.start();
      void runtime.dispatcher.offer();
      stopSweep = startTokenExpirySweep({ db: deps.db, registry: runtime.registry, now: () => clock.now(), log: deps.log.child({ component: 'token-expiry' }) });
    },
    async stop(options: { keep?: readonly string[] } = {}) {
      stopSweep();
      await scalers.manager.stop(options);
    },
  };
}

/** Where spawned agents reach this coordinator: a wildcard bind address is reached on loopback. */
function agentUrl(host: string, port: number): string {
  const reachable = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return `ws://${reachable.includes(':') ? `[${reachable}]` : reachable}:${port}/ws/agent`;
}
