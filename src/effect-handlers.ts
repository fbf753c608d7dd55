import type { BuildCaches } from './caches/build-caches.ts';
import { withBuildCaches } from './ws/dispatch-caches.ts';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { AgentEffects } from '../actors/agents/effects.ts';
import type { AgentEffectsDeps } from '../actors/agents/effects.ts';
import type { Dispatcher } from '../actors/agents/dispatcher.ts';
import type { WithdrawalAnswers } from '../actors/agents/withdrawal-answers.ts';
import type { Clock } from '../actors/clock.ts';
import { ConcurrencyGroups } from '../actors/concurrency/groups.ts';
import type { EffectHandlers } from '../actors/runs/ports.ts';
import type { CompiledConfig } from './config/index.ts';
import { reachableAddress } from './config/coordinator-target.ts';
import { updateConcurrencyGroup } from './db/concurrency-groups.ts';
import { recordApprovalGate } from './db/environments.ts';
import { getRepository, type RepositoryCache } from './db/repositories.ts';
import { createGitHubStatusReporter, runPageLink } from './forge/github-status.ts';
import type { Schema } from './db/schema.ts';
import type { RunSources } from './pipeline/run-source.ts';
import { withSecrets } from './secrets/index.ts';
import type { Secrets } from './secrets/index.ts';
import { buildDispatch, type BuiltDispatch } from './ws/dispatch-builder.ts';

export interface EffectHandlerDeps {
  config: CompiledConfig;
  db: Kysely<Schema>;
  clock: Clock;
  log: Logger;
}

export type EffectHandlerParts = Pick<AgentEffectsDeps, 'registry' | 'shared' | 'deliver' | 'traces'> & { withdrawal: WithdrawalAnswers; sources: RunSources; dispatcher: Dispatcher; secrets?: Secrets; repositories?: RepositoryCache; builds?: BuildCaches | null };

/**
 * Every effect kind and who carries it out: a kind without a handler here does not compile. The agent
 * effects come too, for the frames built while their entries commit (`AgentEffects.prepareDispatches`).
 */
export function effectHandlers(deps: EffectHandlerDeps, parts: EffectHandlerParts): { handlers: EffectHandlers; agents: AgentEffects } {
  const { db, clock } = deps;
  const { dispatcher, deliver } = parts;
  const agents = createAgentEffects(deps, parts);
  const groups = new ConcurrencyGroups((key, change) => updateConcurrencyGroup(db, key, clock.now(), change), deliver, clock);
  const handlers: EffectHandlers = {
    requestPlacement: (effect) => dispatcher.requestPlacement(effect),
    sendDispatch: (effect) => agents.sendDispatch(effect),
    sendCancel: (effect) => agents.sendCancel(effect),
    askAckHolder: (effect) => parts.withdrawal.askAckHolder(effect),
    checkCancelFence: (effect) => parts.withdrawal.checkCancelFence(effect),
    closeAgentConnection: (effect) => agents.closeAgentConnection(effect),
    releaseSlot: (effect) => agents.releaseSlot(effect),
    requestConcurrency: (effect) => groups.request(effect),
    releaseConcurrency: (effect) => groups.release(effect),
    answerConcurrency: (effect) => agents.answerConcurrency(effect),
    recordApprovalGate: (effect) => recordApprovalGate(db, effect.runId, effect.payload.jobKey, effect.payload.gate),
    reportForgeStatus: createForgeStatusReporter(deps, parts),
  };
  return { handlers, agents };
}

/** Commit statuses on GitHub (docs/http-api.md#commit-status-on-github), linking to this coordinator's runs page. */
function createForgeStatusReporter(deps: EffectHandlerDeps, parts: EffectHandlerParts) {
  const { config } = deps;
  const base = config.publicUrl ?? `http://${reachableAddress(config.host, config.port)}`;
  return createGitHubStatusReporter({
    ...{ sourceOf: (runId) => parts.sources.of(runId), repository: (name) => parts.repositories?.get(name) ?? getRepository(deps.db, name) },
    ...{ apiUrl: config.githubApiUrl, runLink: (runId) => runPageLink(base, runId), log: deps.log.child({ component: 'forge-status' }) },
  });
}

const noSource = (runId: string) => ({ ok: false as const, reason: `run ${runId} has no stored source to build a dispatch from` });

/** Dispatch, cancel, close and slot release, with dispatches built from the run's frozen source. */
function createAgentEffects(deps: EffectHandlerDeps, parts: EffectHandlerParts): AgentEffects {
  const { clock } = deps;
  return new AgentEffects({
    ...{ registry: parts.registry, shared: parts.shared, deliver: parts.deliver, aliveWindowMs: deps.config.dispatchAckTimeoutMs, now: () => clock.now() },
    ...(parts.traces && { traces: parts.traces }),
    log: deps.log.child({ component: 'agent-effects' }),
    buildDispatch: {
      build: async (target) => {
        const source = await parts.sources.of(target.runId);
        return source ? buildDispatch(source, target, clock.now()) : noSource(target.runId);
      },
      // Cache URLs and secrets are fetched now, as the dispatch is sent; secrets into its top-level fields only (docs/http-api.md#secrets).
      complete: async (built: BuiltDispatch, target) => {
        const { secrets } = parts;
        if (!built.ok || (!secrets && !parts.builds)) return built;
        const source = await parts.sources.of(target.runId);
        if (!source) return noSource(target.runId);
        const cached = await withBuildCaches(parts.builds ?? null, built, target, source);
        return secrets ? withSecrets(secrets, cached, { ...target, source }) : cached;
      },
    },
    ...(parts.secrets && { sealForPeer: parts.secrets.sealForPeer }),
    reportCancel: (effect, holder) => parts.withdrawal.reportCancel(effect, holder),
  });
}
