import { z } from 'zod';
import { JOB_STATUSES } from '../../../machines/status.ts';

/** Protocol version this side speaks, and the lowest one the coordinator accepts (docs/protocol.md#handshake). */
export const PROTOCOL_VERSION = 1;
export const MIN_PROTOCOL_VERSION = 1;

/** Frame cap in both directions, decompressed (docs/protocol.md#endpoints-and-transport). */
export const MAX_FRAME_BYTES = 25 * 1024 * 1024;

/** WebSocket close codes of docs/protocol.md#close-codes. Only `AUTH_FAILED` is permanent for the agent. */
export const CLOSE_CODES = {
  NORMAL: 1000,
  GOING_AWAY: 1001,
  AUTH_OR_REGISTER_TIMEOUT: 4002,
  INVALID_MESSAGE: 4003,
  HEARTBEAT_TIMEOUT: 4004,
  PROTOCOL_ERROR: 4005,
  INTERNAL_ERROR: 4006,
  AUTH_FAILED: 4010,
  RUN_NOT_FOUND: 4030,
  DISPATCH_ACK_TIMEOUT: 4031,
} as const;
export type CloseCode = (typeof CLOSE_CODES)[keyof typeof CLOSE_CODES];

/** Close reasons are truncated to 123 UTF-8 bytes (docs/protocol.md#close-codes). */
export function truncateCloseReason(reason: string): string {
  const bytes = Buffer.from(reason, 'utf8');
  if (bytes.length <= 123) return reason;
  let end = 123;
  // Back off to the start of a UTF-8 sequence so no character is cut in half.
  while (end > 0 && ((bytes[end] ?? 0) & 0xc0) === 0x80) end -= 1;
  return bytes.subarray(0, end).toString('utf8');
}

/** `job.status.state` may carry any job status (docs/protocol.md#status-handling). */
export const WIRE_JOB_STATES = JOB_STATUSES;
export type WireJobState = (typeof WIRE_JOB_STATES)[number];

/** The states the stock agent actually sends, and the terminal ones among them. */
export const AGENT_TERMINAL_JOB_STATES = ['success', 'failed', 'cancelled'] as const;
export type AgentTerminalJobState = (typeof AGENT_TERMINAL_JOB_STATES)[number];

/** `step.status.state` (docs/protocol.md#status-handling); `pending`/`cancelled` are for parallel-group children. */
export const WIRE_STEP_STATES = ['running', 'success', 'failed', 'skipped', 'pending', 'cancelled'] as const;
export type WireStepState = (typeof WIRE_STEP_STATES)[number];

export const TERMINAL_STEP_STATES = ['success', 'failed', 'skipped', 'cancelled'] as const;
export type TerminalStepState = (typeof TERMINAL_STEP_STATES)[number];

export function isTerminalStepState(state: string): state is TerminalStepState {
  return (TERMINAL_STEP_STATES as readonly string[]).includes(state);
}

/** Hook step types carried in `step_type` (docs/protocol.md#status-handling). */
export const HOOK_STEP_TYPES = [
  'hook:onCancel',
  'hook:cleanup',
  'hook:onSuccess',
  'hook:onFailure',
  'hook:beforeStep',
  'hook:afterStep',
] as const;

export const id = z.string().min(1);
export const timestamp = z.number().int().nonnegative();
export const stringMap = z.record(z.string(), z.string());
export const jobState = z.enum(WIRE_JOB_STATES);
export const stepState = z.enum(WIRE_STEP_STATES);
