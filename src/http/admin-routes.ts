import type { Kysely } from 'kysely';
import type { Registry } from 'prom-client';
import type { JobTimeouts } from '../../machines/types.ts';
import type { CompiledConfig } from '../config/index.ts';
import type { AgentTokenRecord } from '../db/agent-tokens.ts';
import type { Schema } from '../db/schema.ts';
import { registerAgentRoutes } from './api-agents.ts';
import type { AgentApiDeps } from './api-agents.ts';
import { registerAgentTokenRoutes } from './api-agent-tokens.ts';
import { registerEnvironmentRoutes } from './api-environments.ts';
import { registerCapabilityRoutes } from './api-capabilities.ts';
import { registerLogRoutes } from './api-logs.ts';
import { registerMachineRoutes } from './api-machines.ts';
import { registerReplayRoutes } from './api-replay.ts';
import { registerBackupRoutes } from './api-backup.ts';
import { backupDataDir } from '../backup/dump.ts';
import { registerRetentionRoutes } from './api-retention.ts';
import type { Retention } from '../retention/index.ts';
import { registerRunRoutes } from './api-runs.ts';
import type { RunApiDeps } from './api-runs.ts';
import { registerHealthRoutes } from './health.ts';
import { registerSecretRoutes } from './api-secrets.ts';
import { registerTestRunRoutes } from './api-test-runs.ts';
import type { SecretService } from '../secrets/service.ts';
import { Router } from './router.ts';
import { resolveRunRef } from './run-ref.ts';
import { registerRunsPageRoutes, registerVisualizerRoutes } from './pages.ts';

/** What the admin routes ask of the actor runtime. */
export interface AdminRuntime {
  createRun: RunApiDeps['createRun'];
  deliver: RunApiDeps['deliver'];
  registry: AgentApiDeps['agents'];
  ownership: { readonly held: boolean };
  secrets: { service: SecretService };
  repositories: { get: NonNullable<RunApiDeps['repository']> };
}

export interface AdminRouteDeps {
  db: Kysely<Schema>;
  config: CompiledConfig;
  timeouts: JobTimeouts;
  now: () => number;
  metrics: Registry;
  runtime: AdminRuntime;
  kickToken: (record: AgentTokenRecord) => void;
  /** Run histories (archived ones included) and the retention job. */
  retention: Retention;
}

/** Health, runs, test runs, approvals, environments, secrets, jobs, logs, agents, agent tokens, machines, replay, the visualizer and capabilities (docs/http-api.md#routes). */
export function adminRoutes(deps: AdminRouteDeps): Router {
  const { db, config, runtime, now } = deps;
  // A run is named by its id, a unique prefix of it, or its number in its repository (run-ref.ts).
  const router = new Router().resolveParam('/api/v1/runs/', 'id', (ref) => resolveRunRef(db, ref));
  registerHealthRoutes(router, { db, registry: deps.metrics, leaseHeld: () => runtime.ownership.held, coordinatorId: config.coordinatorId });
  registerRunRoutes(router, {
    ...{ db, createRun: (run) => runtime.createRun(run), deliver: runtime.deliver, repository: (name) => runtime.repositories.get(name) },
    ...{ timeouts: deps.timeouts, maxAttempts: config.maxDispatchAttempts, now, history: deps.retention.history },
  });
  registerSecretRoutes(router, { secrets: runtime.secrets.service });
  registerTestRunRoutes(router, {
    ...{ db, createRun: (run) => runtime.createRun(run), secrets: runtime.secrets.service, repository: (name) => runtime.repositories.get(name) },
    ...{ timeouts: deps.timeouts, maxAttempts: config.maxDispatchAttempts, now },
  });
  registerAgentTokenRoutes(router, { db, now, onRevoked: deps.kickToken });
  registerEnvironmentRoutes(router, { db, now });
  registerAgentRoutes(router, { db, coordinatorId: config.coordinatorId, agents: runtime.registry, now });
  registerLogRoutes(router, { db, history: deps.retention.history });
  registerMachineRoutes(router);
  registerReplayRoutes(router, { history: deps.retention.history });
  registerRetentionRoutes(router, { retention: deps.retention.schedule });
  registerBackupRoutes(router, { db, dataDir: backupDataDir(config), now });
  registerVisualizerRoutes(router);
  registerRunsPageRoutes(router);
  registerCapabilityRoutes(router);
  return router;
}
