/**
 * Agent WebSocket protocol v1 (see the protocol spec): zod schemas and inferred
 * types for every message in both directions, the close codes and the state unions.
 * Schemas are non-strict: unknown fields are stripped (except inside `jobConfig`, which is kept whole).
 */
export * from './messages/common.ts';
export * from './messages/handshake.ts';
export * from './messages/dispatch.ts';
export * from './messages/orchestrator.ts';
export * from './messages/agent-job.ts';
export * from './messages/agent-fleet.ts';
export * from './messages/agent-storage.ts';
export * from './messages/parse.ts';
