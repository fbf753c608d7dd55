import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { systemClock } from '../actors/ports.ts';
import type { Clock } from '../actors/ports.ts';
import type { CompiledConfig } from './config/index.ts';
import { openDatabase } from './db/database.ts';
import { loadAdminTokenHash } from './http/admin-token.ts';
import { registerRunRoutes } from './http/api-runs.ts';
import { registerHealthRoutes } from './http/health.ts';
import { Router } from './http/router.ts';
import { createHttpServer, listen } from './http/server.ts';
import { jobTimeoutsOf } from './config/timeouts.ts';
import { createRuntime } from './runtime.ts';
import type { Runtime } from './runtime.ts';

export interface Coordinator {
  port: number;
  url: string;
  runtime: Runtime;
  close(): Promise<void>;
}

/** The composition root: database → runtime → HTTP. Everything else is built from here. */
export interface CoordinatorHooks {
  /** Ownership was lost; the coordinator has stopped writing. The CLI exits the process. */
  onFenced?: () => void;
}

export async function startCoordinator(
  config: CompiledConfig,
  log: Logger,
  clock: Clock = systemClock,
  hooks: CoordinatorHooks = {},
): Promise<Coordinator> {
  const database = await openDatabase(config, log);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  let server: Server | null = null;
  const runtime = createRuntime({
    config,
    db: database.db,
    clock,
    log,
    registry,
    onFenced: () => {
      log.fatal('this coordinator lost its lease (fenced); it stops so that nothing more is written');
      void close().finally(() => hooks.onFenced?.());
    },
  });
  const router = new Router();
  registerHealthRoutes(router, { db: database.db, registry, leaseHeld: () => runtime.ownership.held, coordinatorId: config.coordinatorId });
  registerRunRoutes(router, {
    db: database.db,
    supervisor: runtime.supervisor,
    deliver: (runId, event) => runtime.router.deliver(runId, event),
    timeouts: jobTimeoutsOf(config),
    maxAttempts: config.maxDispatchAttempts,
    now: () => clock.now(),
  });
  const adminTokenHash = await loadAdminTokenHash(config.adminToken, config.dataDir, log);
  await runtime.start();
  server = createHttpServer({ router, adminTokenHash, log: log.child({ component: 'http' }) });
  const port = await listen(server, config.port, config.host);
  log.info({ port, host: config.host, coordinatorId: config.coordinatorId, database: database.kind }, 'coordinator listening');
  let closing: Promise<void> | null = null;
  async function close(): Promise<void> {
    closing ??= (async () => {
      runtime.stop();
      await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
      await runtime.executor.idle().catch(() => undefined);
      await database.close();
    })();
    return closing;
  }
  return { port, url: `http://${config.host}:${port}`, runtime, close };
}
