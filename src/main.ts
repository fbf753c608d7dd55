import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { systemClock } from '../actors/ports.ts';
import type { Clock } from '../actors/ports.ts';
import { createAgentGateway } from './agent-gateway.ts';
import type { CompiledConfig } from './config/index.ts';
import { jobTimeoutsOf } from './config/timeouts.ts';
import { openDatabase } from './db/database.ts';
import { loadAdminTokenHash } from './http/admin-token.ts';
import { registerAgentTokenRoutes } from './http/api-agent-tokens.ts';
import { registerLogRoutes } from './http/api-logs.ts';
import { registerMachineRoutes } from './http/api-machines.ts';
import { registerReplayRoutes } from './http/api-replay.ts';
import { registerRunRoutes } from './http/api-runs.ts';
import { registerHealthRoutes } from './http/health.ts';
import { Router } from './http/router.ts';
import { createHttpServer, listen } from './http/server.ts';
import { registerIntakeRoutes } from './http/api-intake.ts';
import { registerGithubWebhook } from './http/webhooks.ts';
import { registerGenericWebhook } from './http/webhooks-generic.ts';
import { createIntake } from './intake.ts';
import { createRuntime } from './runtime.ts';
import type { Runtime } from './runtime.ts';
import { createAgentMetrics } from './ws/metrics.ts';
import { attachAgentServer } from './ws/server.ts';
import { attachObserveServer } from './ws/observe.ts';
import { registerVisualizerRoutes } from '../visualize/serve.ts';

export interface Coordinator {
  port: number;
  url: string;
  runtime: Runtime;
  close(): Promise<void>;
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
  const runtime = createRuntime({ config, db, clock, log, registry, onFenced });
  const agentMetrics = createAgentMetrics(registry, () => runtime.registry.size);
  const gateway = createAgentGateway({
    ...{ db, config, registry: runtime.registry, supervisor: runtime.supervisor, deliver: runtime.deliver },
    now: () => clock.now(),
    log,
    onUnknownType: (type) => agentMetrics.unknownMessages.inc({ type: type.slice(0, 64) }),
    onViolation: () => agentMetrics.ownershipViolations.inc(),
  });
  Object.assign(runtime.handlers, gateway.handlers);
  const router = new Router();
  registerHealthRoutes(router, { db, registry, leaseHeld: () => runtime.ownership.held, coordinatorId: config.coordinatorId });
  registerRunRoutes(router, {
    ...{ db, supervisor: runtime.supervisor, deliver: runtime.deliver },
    ...{ timeouts: jobTimeoutsOf(config), maxAttempts: config.maxDispatchAttempts, now: () => clock.now() },
  });
  registerAgentTokenRoutes(router, { db, now: () => clock.now(), onRevoked: gateway.kickToken });
  registerLogRoutes(router, { db });
  registerMachineRoutes(router);
  registerReplayRoutes(router, { db });
  registerVisualizerRoutes(router);
  const intake = createIntake({ db, config, registry, createRun: (run) => runtime.supervisor.createRun(run), now: () => clock.now(), log });
  registerGithubWebhook(router, intake.webhooks);
  registerGenericWebhook(router, intake.webhooks);
  registerIntakeRoutes(router, { db, now: () => clock.now(), onRequeued: (key) => intake.queue.notify(key) });
  const adminTokenHash = await loadAdminTokenHash(config.adminToken, config.dataDir, log);
  await runtime.start();
  await intake.queue.start();
  const server: Server = createHttpServer({ router, adminTokenHash, log: log.child({ component: 'http' }) });
  const agents = attachAgentServer(server, gateway.connection, log);
  const observers = attachObserveServer(server, { observe: (listener) => runtime.supervisor.observe(listener), adminTokenHash, log });
  const port = await listen(server, config.port, config.host);
  log.info({ port, host: config.host, coordinatorId: config.coordinatorId, database: database.kind }, 'coordinator listening');
  let closing: Promise<void> | null = null;
  async function close(): Promise<void> {
    closing ??= (async () => {
      await intake.stop();
      runtime.stop();
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
