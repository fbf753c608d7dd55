import { z } from 'zod';
import { id } from './common.ts';

/** Agent → orchestrator messages about the agent itself, and the requests Switchyard refuses. */

export const agentStatusSchema = z.object({
  type: z.literal('agent.status'),
  messageId: id,
  agentId: id,
  activeJobs: z.number().int().nonnegative(),
  memoryUsedMb: z.number().nonnegative().optional(),
  memoryAvailableMb: z.number().nonnegative().optional(),
  uptimeSeconds: z.number().nonnegative().optional(),
});

export const agentMetricSchema = z.object({
  name: z.string().min(1),
  type: z.string(),
  value: z.number().optional(),
  /** OpenTelemetry attributes may be numbers or booleans; they become label strings. */
  labels: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()]).transform(String)).optional(),
  buckets: z
    .union([
      z.record(z.string(), z.number()),
      z.array(z.object({ le: z.union([z.number(), z.string()]), count: z.number() })),
    ])
    .optional(),
  count: z.number().optional(),
  sum: z.number().optional(),
});

export const agentMetricsSchema = z.object({
  type: z.literal('agent.metrics'),
  agentId: id,
  metrics: z.array(agentMetricSchema),
});

export const agentLogSchema = z.object({
  type: z.literal('agent.log'),
  agentId: id,
  lines: z.array(z.string()),
});

/** The request types of docs/protocol.md#refused-requests. Their payloads are stripped: Switchyard only answers them. */
export const REFUSED_REQUEST_TYPES = [
  'cache.upload.request',
  'provenance.upload.request',
  'cache.user.restore.request',
  'cache.user.save.request',
  'event.emit',
  'agent.api.request',
] as const;
export type RefusedRequestType = (typeof REFUSED_REQUEST_TYPES)[number];

function requestSchema<T extends RefusedRequestType>(type: T) {
  return z
    .object({ type: z.literal(type), messageId: id.optional(), requestId: id.optional() })
    .refine((request) => request.messageId !== undefined || request.requestId !== undefined, {
      message: 'messageId or requestId is required',
      path: ['messageId'],
    });
}

export const cacheUploadRequestSchema = requestSchema('cache.upload.request');
export const provenanceUploadRequestSchema = requestSchema('provenance.upload.request');
export const cacheUserRestoreRequestSchema = requestSchema('cache.user.restore.request');
export const cacheUserSaveRequestSchema = requestSchema('cache.user.save.request');
export const eventEmitSchema = requestSchema('event.emit');
export const agentApiRequestSchema = requestSchema('agent.api.request');

export type AgentStatus = z.infer<typeof agentStatusSchema>;
export type AgentMetric = z.infer<typeof agentMetricSchema>;
export type AgentMetrics = z.infer<typeof agentMetricsSchema>;
export type AgentLog = z.infer<typeof agentLogSchema>;
export type RefusedRequest =
  | z.infer<typeof cacheUploadRequestSchema>
  | z.infer<typeof provenanceUploadRequestSchema>
  | z.infer<typeof cacheUserRestoreRequestSchema>
  | z.infer<typeof cacheUserSaveRequestSchema>
  | z.infer<typeof eventEmitSchema>
  | z.infer<typeof agentApiRequestSchema>;
