import { z } from 'zod';
import type { Logger } from 'pino';
import type { DispatchRecord } from '../../actors/agents/registry.ts';
import { LATE_MESSAGE_GRACE_MS } from '../../actors/agents/registry.ts';
import type { Attestations } from '../caches/attestations.ts';
import type { BuildCaches } from '../caches/build-caches.ts';
import type { IdTokens } from '../caches/id-tokens.ts';
import type { CacheCaller, UserCaches } from '../caches/user-cache.ts';
import type { EventEmitter } from '../events/event-emitter.ts';
import { isUntrustedRun, type RunSource } from '../pipeline/run-source.ts';
import { refusalFor } from './messages.ts';
import type { StorageRequest } from './messages.ts';

/** What answering an agent's storage and event requests needs; a part that is null is not offered here. */
export interface AgentRequestDeps {
  lookupDispatch: (dispatchId: string) => Promise<DispatchRecord | null>;
  sourceOf: (runId: string) => Promise<RunSource | null>;
  /** Null without a signing key (no master key): no URL can be handed out. */
  caches: UserCaches | null;
  attestations: Attestations | null;
  builds: BuildCaches | null;
  idTokens: IdTokens | null;
  events: Pick<EventEmitter, 'emit'>;
  now: () => number;
  log: Logger;
}

const NO_SIGNING_KEY = 'this coordinator has no master key (SWITCHYARD_SECRET_KEY) to sign URLs and tokens with';
/** The agent API method of the stock agent's `ctx.kici.oidc.token()`. */
export const OIDC_TOKEN_METHOD = 'oidc.token.request';
const oidcTokenParams = z.object({ jobId: z.string().min(1).max(200), audience: z.string().min(1).max(255) });

/**
 * Answers the requests of docs/protocol.md#requests-storage-and-events for the agent that sent them.
 * A request about a job is served only for an attempt the asking agent holds (or held a moment ago);
 * anything else gets the miss the stock agent reads (no URL, no hit, skip, an error), and is logged.
 */
export class AgentRequests {
  constructor(private readonly deps: AgentRequestDeps) {}

  async answer(agentId: string, request: StorageRequest): Promise<object | null> {
    if (request.type === 'agent.api.request') return this.agentApi(agentId, request);
    if (request.type === 'event.emit') return this.emit(agentId, request);
    if (request.type === 'cache.upload.request' || request.type === 'cache.upload.complete') return this.buildUpload(agentId, request);
    const held = await this.callerOf(agentId, request.jobId);
    if (typeof held === 'string') return this.refuse(agentId, request, held, 'warn');
    return this.serve(held.caller, request);
  }

  private async emit(agentId: string, request: Extract<StorageRequest, { type: 'event.emit' }>): Promise<object | null> {
    const held = await this.callerOf(agentId, request.jobId);
    if (typeof held === 'string') return this.refuse(agentId, request, held, 'warn');
    const { runId, jobKey } = held.caller;
    const answer = await this.deps.events.emit({ runId, jobKey, source: held.source }, request);
    if ('error' in answer) return this.refuse(agentId, request, answer.error);
    return { type: 'event.emit.response', requestId: request.requestId, deliveryId: answer.deliveryId };
  }

  /**
   * The reference's agent API methods manage its own infrastructure (hosts, inventories, SSH
   * bring-up); Switchyard answers only `oidc.token.request`, the ID token `ctx.attestProvenance` signs with.
   */
  private async agentApi(agentId: string, request: Extract<StorageRequest, { type: 'agent.api.request' }>): Promise<object | null> {
    if (request.method !== OIDC_TOKEN_METHOD) return refusalFor(request, `unsupported method ${request.method}`);
    const params = oidcTokenParams.safeParse(request.params);
    if (!params.success) return this.refuse(agentId, request, `${OIDC_TOKEN_METHOD}: params need jobId and audience`);
    const held = await this.callerOf(agentId, params.data.jobId);
    if (typeof held === 'string') return this.refuse(agentId, request, held, 'warn');
    if (!this.deps.idTokens) return this.refuse(agentId, request, NO_SIGNING_KEY);
    const { caller, source } = held;
    const subject = { ...caller, sha: source.sha, workflowName: source.workflow.name, workflowFile: source.workflow.source?.file ?? null };
    return { type: 'agent.api.response', requestId: request.requestId, result: this.deps.idTokens.mint(subject, params.data.audience) };
  }

  /** A build job's source or dependency tarball (docs/blobs.md#source-and-dependency-caches). */
  private async buildUpload(agentId: string, request: Extract<StorageRequest, { type: 'cache.upload.request' | 'cache.upload.complete' }>): Promise<object | null> {
    const held = await this.callerOf(agentId, request.jobId);
    if (typeof held === 'string') return this.refuse(agentId, request, held, 'warn');
    const { builds } = this.deps;
    if (!builds) return this.refuse(agentId, request, NO_SIGNING_KEY);
    const caller = { ...held.caller, contentHash: held.source.workflow.contentHash || null, lockfileHash: held.source.lockfileHash ?? null };
    if (request.type === 'cache.upload.complete') {
      const outcome = await builds.completeUpload(caller, request);
      this.deps.log.info({ runId: caller.runId, jobKey: caller.jobKey, cacheType: request.cacheType, outcome }, 'build cache upload completed');
      return null;
    }
    const offered = await builds.beginUpload(caller, request);
    if ('refused' in offered) return this.refuse(agentId, request, offered.refused, 'warn');
    return { type: 'cache.upload.response', requestId: request.messageId, uploadUrl: offered.uploadUrl };
  }

  private async serve(caller: CacheCaller, request: Exclude<StorageRequest, { type: 'agent.api.request' | 'event.emit' | 'cache.upload.request' | 'cache.upload.complete' }>): Promise<object | null> {
    const { caches, attestations } = this.deps;
    if (!caches || !attestations) return this.refuse(caller.agentId, request, NO_SIGNING_KEY);
    switch (request.type) {
      case 'cache.user.restore.request':
        return { type: 'cache.user.restore.response', requestId: request.messageId, ...(await caches.restore(caller, request.key, request.restoreKeys ?? [])) };
      case 'cache.user.save.request':
        return { type: 'cache.user.save.response', requestId: request.messageId, ...(await caches.beginSave(caller, request.key)) };
      case 'cache.user.save.complete': {
        const outcome = await caches.completeSave(caller, request.key, request.tarHash, request.sizeBytes);
        this.deps.log.info({ runId: caller.runId, jobKey: caller.jobKey, key: request.key, sizeBytes: request.sizeBytes, outcome }, 'user cache save completed');
        return null;
      }
      case 'provenance.upload.request':
        return { type: 'provenance.upload.response', requestId: request.messageId, uploadUrl: await attestations.beginUpload(caller, request.subjectDigest) };
      case 'provenance.upload.complete': {
        const subject = { name: request.subjectName, digest: request.subjectDigest, mediaType: request.mediaType };
        const outcome = await attestations.complete(caller, subject);
        this.deps.log.info({ runId: caller.runId, jobKey: caller.jobKey, subject: subject.name, digest: subject.digest, outcome }, 'provenance upload completed');
        return null;
      }
    }
  }

  /** The attempt `dispatchId` as the asking agent's, with its run's source; or why it is not. */
  private async callerOf(agentId: string, dispatchId: string): Promise<{ caller: CacheCaller; source: RunSource } | string> {
    const record = await this.deps.lookupDispatch(dispatchId);
    const late = record?.endedAt != null && this.deps.now() - record.endedAt > LATE_MESSAGE_GRACE_MS;
    if (!record || record.agentId !== agentId || late) return `job ${dispatchId} is not an attempt this agent holds`;
    const source = await this.deps.sourceOf(record.runId);
    if (!source) return `run ${record.runId} has no source to scope its caches by`;
    const caller = {
      ...{ runId: record.runId, jobKey: record.jobKey, dispatchId, agentId, repository: source.repository, ref: source.ref },
      ...{ defaultBranch: source.defaultBranch ?? 'main', untrusted: isUntrustedRun(source) },
    };
    return { caller, source };
  }

  private refuse(agentId: string, request: StorageRequest, reason: string, level: 'info' | 'warn' = 'info'): object | null {
    this.deps.log[level]({ agentId, type: request.type, reason }, 'agent request not served');
    return refusalFor(request, reason);
  }
}
