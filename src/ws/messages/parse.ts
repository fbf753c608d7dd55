import type { z } from 'zod';
import * as fleet from './agent-fleet.ts';
import * as storage from './agent-storage.ts';
import * as job from './agent-job.ts';
import { dispatchSchema } from './dispatch.ts';
import * as handshake from './handshake.ts';
import * as orchestrator from './orchestrator.ts';

/** Every agent → orchestrator message of protocol v1, by wire `type`. */
export const AGENT_MESSAGE_SCHEMAS = {
  'auth.request': handshake.authRequestSchema,
  'agent.register': handshake.agentRegisterSchema,
  'config.ack': handshake.configAckSchema,
  heartbeat: handshake.heartbeatSchema,
  'job.ack': job.jobAckSchema,
  'job.reject': job.jobRejectSchema,
  'job.status': job.jobStatusSchema,
  'step.status': job.stepStatusSchema,
  'log.chunk': job.logChunkSchema,
  'job.heartbeat': job.jobHeartbeatSchema,
  'job.context': job.jobContextSchema,
  'run.event': job.runEventSchema,
  'job.concurrency.report': job.concurrencyReportSchema,
  'step.approval-request': job.approvalRequestSchema,
  'agent.status': fleet.agentStatusSchema,
  'agent.metrics': fleet.agentMetricsSchema,
  'agent.log': fleet.agentLogSchema,
  'cache.upload.request': storage.cacheUploadRequestSchema,
  'cache.upload.complete': storage.cacheUploadCompleteSchema,
  'cache.user.restore.request': storage.cacheUserRestoreRequestSchema,
  'cache.user.save.request': storage.cacheUserSaveRequestSchema,
  'cache.user.save.complete': storage.cacheUserSaveCompleteSchema,
  'provenance.upload.request': storage.provenanceUploadRequestSchema,
  'provenance.upload.complete': storage.provenanceUploadCompleteSchema,
  'event.emit': storage.eventEmitSchema,
  'agent.api.request': storage.agentApiRequestSchema,
} as const;

/** Every orchestrator → agent message of protocol v1, by wire `type`. */
export const ORCHESTRATOR_MESSAGE_SCHEMAS = {
  'auth.success': handshake.authSuccessSchema,
  'auth.failure': handshake.authFailureSchema,
  'register.ack': handshake.registerAckSchema,
  heartbeat: handshake.heartbeatSchema,
  'job.dispatch': dispatchSchema,
  'job.cancel': orchestrator.jobCancelSchema,
  'job.concurrency.ack': orchestrator.concurrencyAckSchema,
  'step.approval-resolved': orchestrator.approvalResolvedSchema,
  error: orchestrator.errorSchema,
  'rate.limit.warning': orchestrator.rateLimitWarningSchema,
  'cache.upload.response': orchestrator.cacheUploadResponseSchema,
  'provenance.upload.response': orchestrator.provenanceUploadResponseSchema,
  'cache.user.restore.response': orchestrator.cacheUserRestoreResponseSchema,
  'cache.user.save.response': orchestrator.cacheUserSaveResponseSchema,
  'event.emit.response': orchestrator.eventEmitResponseSchema,
  'agent.api.response': orchestrator.agentApiResponseSchema,
} as const;

type MessageOf<M> = { [K in keyof M]: M[K] extends z.ZodType ? z.infer<M[K]> : never }[keyof M];

export type AgentMessageType = keyof typeof AGENT_MESSAGE_SCHEMAS;
export type AgentMessage = MessageOf<typeof AGENT_MESSAGE_SCHEMAS>;
export type AgentMessageOf<T extends AgentMessageType> = z.infer<(typeof AGENT_MESSAGE_SCHEMAS)[T]>;
export type OrchestratorMessageType = keyof typeof ORCHESTRATOR_MESSAGE_SCHEMAS;
export type OrchestratorMessage = MessageOf<typeof ORCHESTRATOR_MESSAGE_SCHEMAS>;
export type OrchestratorMessageOf<T extends OrchestratorMessageType> = z.infer<
  (typeof ORCHESTRATOR_MESSAGE_SCHEMAS)[T]
>;

export type ParseFailure = {
  ok: false;
  /** Readable cause naming the field, e.g. `job.status: state: Invalid option: ...`. */
  reason: string;
  /** The frame's `type` when it had a string one. */
  type?: string;
  /** The type is not part of protocol v1: ignore and count it, never disconnect (docs/protocol.md#endpoints-and-transport). */
  unknownType?: boolean;
  /** Also set with `unknownType` for `*.complete` and `fleet.bundle.*`, which docs/protocol.md#requests-storage-and-events says to ignore. */
  ignored?: boolean;
  /** A known type that settles no job (informational, a storage or event request) failed its schema: warn, count and carry on, never close. */
  informational?: boolean;
};
export type ParseResult<M> = { ok: true; message: M } | ParseFailure;

/**
 * Agent frames that settle nothing: a broken one is logged and counted, and the socket stays open.
 * Frames that settle or report on a job, and handshake frames, keep the strict rule (error + 4003).
 */
export const INFORMATIONAL_AGENT_TYPES: ReadonlySet<string> = new Set([
  'job.context',
  'agent.log',
  'agent.metrics',
  'agent.status',
  'run.event',
  'config.ack',
]);

interface FrameRules {
  isIgnored: (type: string) => boolean;
  isInformational: (type: string) => boolean;
}

/** A broken storage or event request settles no job either: it is answered `error` and the socket stays. */
const settlesNoJob = (type: string) => INFORMATIONAL_AGENT_TYPES.has(type) || storage.isStorageRequestType(type);
const AGENT_RULES: FrameRules = { isIgnored: isIgnoredAgentType, isInformational: settlesNoJob };
const ORCHESTRATOR_RULES: FrameRules = { isIgnored: () => false, isInformational: () => false };

/** Parses one agent → orchestrator text frame. */
export function parseAgentMessage(raw: string): ParseResult<AgentMessage> {
  return parseFrame(raw, AGENT_MESSAGE_SCHEMAS, AGENT_RULES) as ParseResult<AgentMessage>;
}

/** Parses one orchestrator → agent text frame. */
export function parseOrchestratorMessage(raw: string): ParseResult<OrchestratorMessage> {
  return parseFrame(raw, ORCHESTRATOR_MESSAGE_SCHEMAS, ORCHESTRATOR_RULES) as ParseResult<OrchestratorMessage>;
}

/** `*.complete` and `fleet.bundle.*` are known to exist and dropped without a word (docs/protocol.md#requests-storage-and-events). */
function isIgnoredAgentType(type: string): boolean {
  return type.endsWith('.complete') || type.startsWith('fleet.bundle.');
}

function parseFrame(raw: string, schemas: Readonly<Record<string, z.ZodType>>, rules: FrameRules): ParseResult<unknown> {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch (thrown: unknown) {
    return { ok: false, reason: `invalid JSON: ${thrown instanceof Error ? thrown.message : String(thrown)}` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, reason: 'frame is not a JSON object' };
  }
  const type: unknown = (value as Record<string, unknown>).type;
  if (typeof type !== 'string') return { ok: false, reason: 'type: expected a string' };
  const schema = Object.hasOwn(schemas, type) ? schemas[type] : undefined;
  if (schema === undefined) {
    const ignored = rules.isIgnored(type);
    return { ok: false, reason: `unknown message type "${type}"`, type, unknownType: true, ...(ignored && { ignored }) };
  }
  const result = schema.safeParse(value);
  if (!result.success) {
    const informational = rules.isInformational(type);
    return { ok: false, reason: `${type}: ${describeIssues(result.error)}`, type, ...(informational && { informational }) };
  }
  return { ok: true, message: result.data };
}

/** `path: message` for the first three issues, e.g. `jobConfig.steps.0.name: Invalid input: ...`. */
export function describeIssues(error: z.ZodError): string {
  const shown = error.issues.slice(0, 3).map((issue) => {
    const path = issue.path.map(String).join('.');
    return path === '' ? issue.message : `${path}: ${issue.message}`;
  });
  const more = error.issues.length > 3 ? `; and ${error.issues.length - 3} more` : '';
  return shown.join('; ') + more;
}

/**
 * The answer to a storage or event request that cannot be served (its job is not the agent's, the
 * coordinator has no signing key, the feature is not offered), as the stock agent reads a miss: no
 * URL, no hit, skip, an error. A `*.complete` message has no answer.
 */
export function refusalFor(request: storage.StorageRequest, reason: string): orchestrator.RefusalMessage | null {
  switch (request.type) {
    case 'cache.upload.request':
      return { type: 'cache.upload.response', requestId: request.messageId, uploadUrl: '' };
    case 'provenance.upload.request':
      return { type: 'provenance.upload.response', requestId: request.messageId, uploadUrl: '' };
    case 'cache.user.restore.request':
      return { type: 'cache.user.restore.response', requestId: request.messageId, hit: false };
    case 'cache.user.save.request':
      return { type: 'cache.user.save.response', requestId: request.messageId, skip: true };
    case 'event.emit':
      return { type: 'event.emit.response', requestId: request.requestId, error: reason };
    case 'agent.api.request':
      return { type: 'agent.api.response', requestId: request.requestId, error: reason };
    case 'cache.upload.complete':
    case 'cache.user.save.complete':
    case 'provenance.upload.complete':
      return null;
  }
}

export function isStorageRequest(message: AgentMessage): message is storage.StorageRequest {
  return storage.isStorageRequestType(message.type);
}
