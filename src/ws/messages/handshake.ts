import { z } from 'zod';
import { id, timestamp } from './common.ts';

/** Handshake and liveness messages (docs/protocol.md#authentication). */

export const authRequestSchema = z.object({
  type: z.literal('auth.request'),
  token: z.string().min(1),
  protocolVersion: z.number().int(),
});

export const inFlightJobSchema = z.object({ jobId: id, runId: id });

export const agentRegisterSchema = z.object({
  type: z.literal('agent.register'),
  messageId: id,
  agentId: id,
  labels: z.array(z.string()),
  maxConcurrency: z.number().int().positive().optional(),
  platform: z.string().optional(),
  arch: z.string().optional(),
  version: z.string().optional(),
  inFlightJobs: z.array(inFlightJobSchema).optional(),
  hostname: z.string().optional(),
  osRelease: z.string().optional(),
  osVersion: z.string().optional(),
  totalMemoryMb: z.number().nonnegative().optional(),
  cpuCount: z.number().int().nonnegative().optional(),
  nodeVersion: z.string().optional(),
  runningAsUser: z.string().optional(),
  runningAsUid: z.number().int().optional(),
  properties: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])).optional(),
});

export const configAckSchema = z.object({
  type: z.literal('config.ack'),
  messageId: id,
  agentId: id,
});

/** Sent by the agent every 30 s while registered; never answered. O→A is tolerated but not sent. */
export const heartbeatSchema = z.object({
  type: z.literal('heartbeat'),
  timestamp,
});

export const authSuccessSchema = z.object({
  type: z.literal('auth.success'),
  connectionId: id,
});

export const authFailureSchema = z.object({
  type: z.literal('auth.failure'),
  reason: z.string(),
});

export const registerAckSchema = z.object({
  type: z.literal('register.ack'),
  agentId: id,
  labels: z.array(z.string()),
  scalerManaged: z.boolean().default(false),
  pendingDispatch: z.boolean().optional(),
});

export type AuthRequest = z.infer<typeof authRequestSchema>;
export type InFlightJob = z.infer<typeof inFlightJobSchema>;
export type AgentRegister = z.infer<typeof agentRegisterSchema>;
export type ConfigAck = z.infer<typeof configAckSchema>;
export type Heartbeat = z.infer<typeof heartbeatSchema>;
export type AuthSuccess = z.infer<typeof authSuccessSchema>;
export type AuthFailure = z.infer<typeof authFailureSchema>;
export type RegisterAck = z.infer<typeof registerAckSchema>;
