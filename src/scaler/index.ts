import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { AgentRegistry } from '../../actors/agents/registry.ts';
import type { Dispatcher } from '../../actors/agents/dispatcher.ts';
import type { Clock } from '../../actors/clock.ts';
import { ScalerManager } from '../../actors/scaler/manager.ts';
import type { ScalerStore } from '../../actors/scaler/reaper.ts';
import type { ScalerJobs } from '../../actors/scaler/effects.ts';
import type { IncomingRunEvent, Supervisor } from '../../actors/runs/supervisor.ts';
import { SCALER_MACHINE_VERSION } from '../../machines/scaler.machine.ts';
import type { CompiledConfig } from '../config/index.ts';
import { createAgentToken, revokeAgentToken } from '../db/agent-tokens.ts';
import { deleteAbandonedScalerState, findAbandonedScalerStates, installationId, listScalerStates, loadScalerState, saveScalerState } from '../db/scaler-state.ts';
import type { Schema } from '../db/schema.ts';
import type { ScalerBackend } from '../../actors/scaler/ports.ts';
import { BareMetalBackend } from './bare-metal.ts';
import type { ScalerDefinition } from '../config/scaler-definitions.ts';
import { ContainerBackend } from './container.ts';
import { FailureTracker } from '../../actors/scaler/failure-tracker.ts';
import { createScalerMetrics } from '../../actors/scaler/metrics.ts';

const REPO_ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface ScalerWiring {
  config: CompiledConfig;
  db: Kysely<Schema>;
  clock: Clock;
  log: Logger;
  metricsRegistry: Registry;
  agents: AgentRegistry;
  dispatcher: Dispatcher;
  supervisor: Supervisor;
  deliver: (runId: string, event: IncomingRunEvent) => Promise<unknown>;
  /** The coordinator's current lease epoch: every state write is fenced by it. */
  epoch: () => number;
}

export function createBackend(definition: ScalerDefinition, common: { installationId: string; dataDir: string; agentEnv: Record<string, string>; now: () => number; log: Logger }): ScalerBackend {
  const log = common.log.child({ scaler: definition.name });
  if (definition.type === 'bare-metal') {
    return new BareMetalBackend({
      ...{ name: definition.name, installationId: common.installationId, labelSets: definition.labelSets, maxAgents: definition.maxAgents, agent: definition.agent },
      ...{ repoRoot: REPO_ROOT, stateDir: join(common.dataDir, 'scaler', definition.name), baseEnv: common.agentEnv, killGraceMs: 5_000, now: common.now, log },
    });
  }
  const { type: _type, host, ...rest } = definition;
  return new ContainerBackend({ ...rest, installationId: common.installationId, remoteHost: host, now: common.now, log });
}

/** The scaler's fenced state in the database. */
export function scalerStore(wiring: Pick<ScalerWiring, 'db' | 'config' | 'clock' | 'epoch'>): ScalerStore {
  const { db, config, clock } = wiring;
  const me = config.coordinatorId;
  return {
    load: () => loadScalerState(db, me),
    save: (snapshot) => saveScalerState(db, { coordinatorId: me, epoch: wiring.epoch(), machineVersion: SCALER_MACHINE_VERSION, snapshot, now: clock.now() }),
    all: () => listScalerStates(db),
    abandoned: () => findAbandonedScalerStates(db, { me, now: clock.now() }),
    dropAbandoned: (state) => deleteAbandonedScalerState(db, { coordinatorId: state.coordinatorId, updatedAt: state.updatedAt, now: clock.now() }),
  };
}

/** What the scaler reads of jobs: their live state in the run actors owned here. */
export function scalerJobs(supervisor: Supervisor): ScalerJobs {
  return {
    isWaitingForAgent: (runId, jobKey) => supervisor.jobHasTag(runId, jobKey, 'waits-for-agent'),
    jobTimeoutMs: (runId, jobKey) => supervisor.jobsOf(runId).find((job) => job.jobKey === jobKey)?.context.spec.timeouts.jobTimeoutMs ?? null,
  };
}

/** The scaler of one coordinator, its backends built from configuration (SCL-1). Not started yet. */
export async function createScalerManager(wiring: ScalerWiring): Promise<{ manager: ScalerManager; tracker: FailureTracker }> {
  const { config, db, clock, log, supervisor } = wiring;
  const settings = config.scaler;
  const owner = settings.installationId ?? (await installationId(db, clock.now()));
  const common = { installationId: owner, dataDir: config.dataDir, agentEnv: { ...settings.agentEnv }, now: () => clock.now(), log: log.child({ component: 'scaler' }) };
  const backends = settings.backends.map((definition) => createBackend(definition, common));
  const tracker = new FailureTracker();
  const manager = new ScalerManager({
    backends,
    caps: { maxAgents: settings.maxAgents, maxCpu: settings.maxCpu, maxMemoryBytes: settings.maxMemoryBytes },
    ...{ spawnTimeoutMs: settings.spawnTimeoutMs, tokenTtlMs: settings.tokenTtlMs, tickMs: settings.tickMs, busyDisconnectGraceMs: config.recoveryWindowMs },
    store: scalerStore(wiring),
    registry: wiring.agents,
    jobs: scalerJobs(supervisor),
    deliver: wiring.deliver,
    offer: () => void wiring.dispatcher.offer(),
    mintToken: async ({ agentId, labels, mandatoryLabels, expiresAt }) => {
      const { token, record } = await createAgentToken(db, { agentType: 'ephemeral', createdBy: agentId, labels, mandatoryLabels, expiresAt, now: clock.now() });
      return { token, tokenId: record.id };
    },
    revokeToken: async (tokenId) => void (await revokeAgentToken(db, tokenId, clock.now())),
    tracker,
    metrics: createScalerMetrics(wiring.metricsRegistry),
    clock,
    log: common.log,
  });
  if (backends.length > 0) wiring.dispatcher.attachScaler(manager);
  log.info({ backends: backends.map((b) => `${b.type}:${b.name}`), installationId: owner }, backends.length > 0 ? 'scalers configured' : 'no scalers configured');
  return { manager, tracker };
}
