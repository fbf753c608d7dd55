import { z } from 'zod';
import { id } from './common.ts';

/** Agent → orchestrator messages about the agent itself. */

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

export type AgentStatus = z.infer<typeof agentStatusSchema>;
export type AgentMetric = z.infer<typeof agentMetricSchema>;
export type AgentMetrics = z.infer<typeof agentMetricsSchema>;
export type AgentLog = z.infer<typeof agentLogSchema>;
