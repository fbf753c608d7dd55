import type { Kysely } from 'kysely';
import type { Registry } from 'prom-client';
import type { Schema } from '../db/schema.ts';
import { sendJson, sendText } from './respond.ts';
import type { Router } from './router.ts';
import { databaseHealth } from '../db/health.ts';

export interface HealthDeps {
  db: Kysely<Schema>;
  registry: Registry;
  leaseHeld: () => boolean;
  coordinatorId: string;
}

/** `/healthz` (process up), `/readyz` (database, migrations, lease), `/metrics` (Prometheus). */
export function registerHealthRoutes(router: Router, deps: HealthDeps): void {
  router
    .on('GET', '/healthz', ({ res }) => sendJson(res, 200, { ok: true, coordinatorId: deps.coordinatorId }))
    .on('GET', '/readyz', async ({ res }) => {
      const checks = { ...(await databaseHealth(deps.db)), lease: deps.leaseHeld() };
      const ready = checks.database && checks.migrations && checks.lease;
      sendJson(res, ready ? 200 : 503, { ready, checks });
    })
    .on('GET', '/metrics', async ({ res }) => {
      sendText(res, 200, deps.registry.contentType, await deps.registry.metrics());
    });
}
