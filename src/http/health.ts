import { sql } from 'kysely';
import type { Kysely } from 'kysely';
import type { Registry } from 'prom-client';
import type { Schema } from '../db/schema.ts';
import { sendJson, sendText } from './respond.ts';
import type { Router } from './router.ts';

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
      const checks = { database: false, migrations: false, lease: deps.leaseHeld() };
      try {
        await sql`select 1`.execute(deps.db);
        checks.database = true;
        const applied = await sql<{ n: number }>`select count(*)::int as n from kysely_migration`.execute(deps.db);
        checks.migrations = (applied.rows[0]?.n ?? 0) > 0;
      } catch {
        // checks stay false: the answer below says which one failed
      }
      const ready = checks.database && checks.migrations && checks.lease;
      sendJson(res, ready ? 200 : 503, { ready, checks });
    })
    .on('GET', '/metrics', async ({ res }) => {
      sendText(res, 200, deps.registry.contentType, await deps.registry.metrics());
    });
}
