import type { Logger } from 'pino';
import type { Binding, ScalerEvent, ScalerIntent, SpawnIntent } from '../../machines/scaler.machine.ts';
import type { ScalerBackend } from './ports.ts';
import type { FailureTracker } from './failure-tracker.ts';
import type { ScalerMetrics } from './metrics.ts';
import { coerceError } from '../../lib/errors.ts';
import type { IncomingRunEvent } from '../runs/supervisor.ts';
import type { Clock } from '../clock.ts';
import { jobKeyOf } from '../../lib/job-key.ts';
import { backoffMs } from '../../lib/backoff.ts';

/** A token minted for exactly one agent id and label set (docs/protocol.md#tokens). */
export interface MintedToken {
  token: string;
  tokenId: string;
}

export interface ScalerJobs {
  /** The job is still looking for an agent (queued or waiting for one). */
  isWaitingForAgent(runId: string, jobKey: string): boolean;
  jobTimeoutMs(runId: string, jobKey: string): number | null;
}

export interface ScalerEffectsDeps {
  backends: ReadonlyMap<string, ScalerBackend>;
  mintToken(args: { agentId: string; labels: string[]; mandatoryLabels: string[]; expiresAt: number }): Promise<MintedToken>;
  revokeToken(tokenId: string): Promise<void>;
  orchestratorUrl: () => Promise<string>;
  tokenTtlMs: number;
  jobs: ScalerJobs;
  deliver: (runId: string, event: IncomingRunEvent) => Promise<unknown>;
  /** Offers free capacity to waiting jobs again (a freed reservation, a retry after a failed spawn). */
  offer: () => void;
  send: (event: ScalerEvent) => void;
  tracker: FailureTracker;
  metrics: ScalerMetrics;
  clock: Clock;
  log: Logger;
}

/** Never shorter than the bound job's timeout plus 10 min (docs/protocol.md#tokens). */
const TOKEN_MARGIN_MS = 10 * 60_000;
const DESTROY_ATTEMPTS = 3;
const RETRY_BASE_MS = 2_000;
const RETRY_CAP_MS = 30_000;

/**
 * Performs the scaler machine's intents: backend I/O, tokens, failure reports. Each outcome goes
 * back to the machine as one `scaler.agent.*` event; nothing here decides anything.
 */
export class ScalerEffects {
  private readonly tokens = new Map<string, string>();
  private readonly failuresByJob = new Map<string, number>();
  private readonly inFlight = new Set<Promise<void>>();

  constructor(private readonly deps: ScalerEffectsDeps) {}

  run(intent: ScalerIntent): void {
    const work = this.perform(intent).catch((thrown: unknown) => {
      this.deps.log.error({ err: coerceError(thrown), intent: intent.type }, 'scaler effect failed');
    });
    this.inFlight.add(work);
    void work.finally(() => this.inFlight.delete(work));
  }

  /** Resolves when every effect started so far has finished. */
  async idle(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  private perform(intent: ScalerIntent): Promise<void> {
    switch (intent.type) {
      case 'spawnAgent':
        return this.spawn(intent.params);
      case 'destroyAgent':
        return this.destroy(intent.params.agentId, intent.params.backend, intent.params.reason);
      case 'reportSpawnFailure':
        return this.reportFailure(intent.params);
      case 'offerCapacity':
        this.deps.offer();
        return Promise.resolve();
    }
  }

  private async spawn(intent: SpawnIntent): Promise<void> {
    const { agentId } = intent;
    const backend = this.deps.backends.get(intent.backend);
    const labelSet = backend?.labelSets[intent.labelSet];
    if (!backend || !labelSet) {
      this.deps.send({ type: 'scaler.agent.spawn_failed', agentId, message: `backend ${intent.backend} has no label set ${intent.labelSet}`, at: this.deps.clock.now() });
      return;
    }
    let minted: MintedToken | null = null;
    try {
      minted = await this.deps.mintToken({ agentId, labels: labelSet.labels, mandatoryLabels: labelSet.mandatoryLabels, expiresAt: this.tokenExpiry(intent.bound) });
      this.tokens.set(agentId, minted.tokenId);
      const context = intent.bound ? { boundJobId: intent.bound.jobKey, runId: intent.bound.runId } : null;
      const spawned = await backend.spawn(labelSet, agentId, await this.deps.orchestratorUrl(), intent.resources, context, { token: minted.token });
      this.deps.metrics.spawns.inc({ backend: backend.name, bound: String(intent.bound !== null) });
      this.deps.send({ type: 'scaler.agent.spawned', agentId, backendRef: spawned.backendRef, at: this.deps.clock.now() });
    } catch (thrown) {
      const message = coerceError(thrown).message;
      this.deps.log.warn({ agentId, backend: backend.name, err: coerceError(thrown) }, 'spawn failed');
      if (minted) await this.forgetToken(agentId);
      this.deps.send({ type: 'scaler.agent.spawn_failed', agentId, message, at: this.deps.clock.now() });
    }
  }

  private tokenExpiry(bound: Binding | null): number {
    const timeout = bound ? (this.deps.jobs.jobTimeoutMs(bound.runId, bound.jobKey) ?? 0) : 0;
    return this.deps.clock.now() + Math.max(this.deps.tokenTtlMs, timeout + TOKEN_MARGIN_MS);
  }

  private async destroy(agentId: string, backendName: string, reason: string): Promise<void> {
    const backend = this.deps.backends.get(backendName);
    for (let attempt = 1; backend && attempt <= DESTROY_ATTEMPTS; attempt++) {
      try {
        await backend.destroy(agentId);
        break;
      } catch (thrown) {
        this.deps.log.warn({ agentId, attempt, err: coerceError(thrown) }, 'destroy failed');
        if (attempt === DESTROY_ATTEMPTS) return; // stays `destroying`; the next start reconciles it
        await this.sleep(RETRY_BASE_MS * attempt);
      }
    }
    await this.forgetToken(agentId);
    this.deps.log.info({ agentId, backend: backendName, reason }, 'scaler agent destroyed');
    this.deps.send({ type: 'scaler.agent.destroyed', agentId, at: this.deps.clock.now() });
  }

  private async forgetToken(agentId: string): Promise<void> {
    const tokenId = this.tokens.get(agentId);
    this.tokens.delete(agentId);
    if (tokenId) await this.deps.revokeToken(tokenId).catch((thrown: unknown) => this.deps.log.warn({ err: coerceError(thrown), agentId }, 'token revoke failed'));
  }

  /** SCL-7, SCL-9: counted, kept in the ring, and for a bound spawn one failed attempt of its job. */
  private async reportFailure(failure: { agentId: string; backend: string; bound: Binding | null; message: string }): Promise<void> {
    const backend = this.deps.backends.get(failure.backend);
    const bound = failure.bound !== null;
    this.deps.metrics.spawnFailures.inc({ backend: failure.backend, bound: String(bound) });
    const detail = `${failure.agentId}: ${failure.message}`;
    this.deps.tracker.record({ backendName: failure.backend, backendType: backend?.type ?? 'unknown', bound, detail, timestampMs: this.deps.clock.now() });
    if (!failure.bound || !this.deps.jobs.isWaitingForAgent(failure.bound.runId, failure.bound.jobKey)) return;
    const { runId, jobKey } = failure.bound;
    const message = `scaler ${failure.backend} could not provide an agent: ${failure.message}`;
    await this.deps.deliver(runId, { type: 'provision.failed', jobKey, message });
    const key = jobKeyOf(runId, jobKey);
    const failures = (this.failuresByJob.get(key) ?? 0) + 1;
    this.failuresByJob.set(key, failures);
    if (this.failuresByJob.size > 10_000) this.failuresByJob.delete(this.failuresByJob.keys().next().value as string);
    const delay = backoffMs(failures, { baseMs: RETRY_BASE_MS, maxMs: RETRY_CAP_MS });
    this.deps.clock.setTimeout(() => this.deps.offer(), delay);
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.deps.clock.setTimeout(resolve, ms));
  }
}
