import { z } from 'zod';
import { id } from './common.ts';

/** Orchestrator → agent messages other than the handshake and `job.dispatch` (docs/protocol.md#messages-to-the-agent). */

export const jobCancelSchema = z.object({
  type: z.literal('job.cancel'),
  messageId: id,
  runId: id,
  jobId: id,
  reason: z.string(),
  force: z.boolean().optional(),
});

export const concurrencyAckSchema = z.object({
  type: z.literal('job.concurrency.ack'),
  requestId: id,
  action: z.enum(['proceed', 'wait', 'cancel']),
  reason: z.string().optional(),
  runId: id.optional(),
  jobId: id.optional(),
});

export const approvalResolvedSchema = z.object({
  type: z.literal('step.approval-resolved'),
  requestId: id,
  runId: id,
  jobId: id,
  stepIndex: z.number().int().nonnegative(),
  outcome: z.enum(['approved', 'rejected', 'expired']),
  reason: z.string().optional(),
});

/** Diagnostic only; Switchyard sends it for a schema failure before closing 4003. */
export const errorSchema = z.object({
  type: z.literal('error'),
  code: z.string(),
  message: z.string(),
});

export const rateLimitWarningSchema = z.object({
  type: z.literal('rate.limit.warning'),
  retryAfterMs: z.number().nonnegative(),
});

/** Refusals of docs/protocol.md#requests-storage-and-events: `requestId` is the request's `messageId` (or its `requestId`). */
export const cacheUploadResponseSchema = z.object({
  type: z.literal('cache.upload.response'),
  requestId: id,
  uploadUrl: z.string(),
});

export const provenanceUploadResponseSchema = z.object({
  type: z.literal('provenance.upload.response'),
  requestId: id,
  uploadUrl: z.string(),
});

export const cacheUserRestoreResponseSchema = z.object({
  type: z.literal('cache.user.restore.response'),
  requestId: id,
  hit: z.boolean(),
  matchedKey: z.string().optional(),
  downloadUrl: z.string().optional(),
  tarHash: z.string().optional(),
});

export const cacheUserSaveResponseSchema = z.object({
  type: z.literal('cache.user.save.response'),
  requestId: id,
  uploadUrl: z.string().optional(),
  skip: z.boolean(),
});

export const eventEmitResponseSchema = z.object({
  type: z.literal('event.emit.response'),
  requestId: id,
  deliveryId: z.string().optional(),
  error: z.string().optional(),
});

export const agentApiResponseSchema = z.object({
  type: z.literal('agent.api.response'),
  requestId: id,
  result: z.unknown().optional(),
  error: z.string().optional(),
});

export type JobCancel = z.infer<typeof jobCancelSchema>;
export type ConcurrencyAck = z.infer<typeof concurrencyAckSchema>;
export type ApprovalResolved = z.infer<typeof approvalResolvedSchema>;
export type ErrorMessage = z.infer<typeof errorSchema>;
export type RateLimitWarning = z.infer<typeof rateLimitWarningSchema>;
export type CacheUploadResponse = z.infer<typeof cacheUploadResponseSchema>;
export type ProvenanceUploadResponse = z.infer<typeof provenanceUploadResponseSchema>;
export type CacheUserRestoreResponse = z.infer<typeof cacheUserRestoreResponseSchema>;
export type CacheUserSaveResponse = z.infer<typeof cacheUserSaveResponseSchema>;
export type EventEmitResponse = z.infer<typeof eventEmitResponseSchema>;
export type AgentApiResponse = z.infer<typeof agentApiResponseSchema>;
export type RefusalMessage =
  | CacheUploadResponse
  | ProvenanceUploadResponse
  | CacheUserRestoreResponse
  | CacheUserSaveResponse
  | EventEmitResponse
  | AgentApiResponse;
