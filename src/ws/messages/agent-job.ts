import { z } from 'zod';
import { id, jobState, stepState, timestamp } from './common.ts';

/** Agent → orchestrator messages about one job (docs/protocol.md#messages-from-the-agent). All carry `jobId`. */

export const jobAckSchema = z.object({
  type: z.literal('job.ack'),
  messageId: id,
  runId: id,
  jobId: id,
  timestamp,
});

export const jobRejectSchema = z.object({
  type: z.literal('job.reject'),
  messageId: id,
  runId: id,
  jobId: id,
  reason: z.enum(['busy', 'draining']),
  timestamp,
});

export const stepResultSchema = z.object({
  name: z.string(),
  status: z.string(),
  durationMs: z.number().nonnegative(),
  error: z.string().optional(),
});

export const secretOutputSchema = z.object({ agentPublicKey: z.string(), encrypted: z.string() });

export const jobStatusDataSchema = z.object({
  durationMs: z.number().nonnegative().optional(),
  error: z.string().optional(),
  outputs: z.record(z.string(), z.unknown()).optional(),
  droppedJobs: z.array(z.unknown()).optional(),
  stepResults: z.array(stepResultSchema).optional(),
  initComplete: z.boolean().optional(),
  initResult: z.unknown().optional(),
  initFailed: z.unknown().optional(),
});

export const jobStatusSchema = z.object({
  type: z.literal('job.status'),
  messageId: id,
  runId: id,
  jobId: id,
  state: jobState,
  timestamp,
  data: jobStatusDataSchema.optional(),
  droppedJobs: z.array(z.unknown()).optional(),
  secretOutputs: z.record(z.string(), secretOutputSchema).optional(),
});

export const stepErrorSchema = z.object({
  message: z.string(),
  exitCode: z.number().int().nullable().optional(),
  signal: z.string().nullable().optional(),
});

/** The stock agent's build and init steps report their error as a plain message. */
const stepErrorOrMessage = z.union([stepErrorSchema, z.string().transform((message): z.output<typeof stepErrorSchema> => ({ message }))]);

export const stepStatusDataSchema = z.object({
  durationMs: z.number().nonnegative().optional(),
  error: stepErrorOrMessage.optional(),
  checkOutcome: z.unknown().optional(),
  driftSummary: z.unknown().optional(),
  drift: z.unknown().optional(),
  step_type: z.string().optional(),
});

/**
 * The stock agent sends `step_type` at the top level on `running` but inside `data` on terminal
 * states; the parsed message always has it at the top level when either place had it.
 */
export const stepStatusSchema = z
  .object({
    type: z.literal('step.status'),
    messageId: id,
    runId: id,
    jobId: id,
    stepIndex: z.number().int().nonnegative(),
    stepName: z.string(),
    state: stepState,
    timestamp,
    data: stepStatusDataSchema.optional(),
    step_type: z.string().optional(),
    secretsAccessed: z.array(z.string()).optional(),
    concurrencyKind: z.string().optional(),
    groupId: z.string().optional(),
    logBytesStreamed: z.number().nonnegative().optional(),
  })
  .transform((message) =>
    message.step_type === undefined && message.data?.step_type !== undefined
      ? { ...message, step_type: message.data.step_type }
      : message,
  );

/** `stepIndex` -1 carries job-level runner lines. */
export const logChunkSchema = z.object({
  type: z.literal('log.chunk'),
  messageId: id,
  runId: id,
  jobId: id,
  stepIndex: z.number().int().min(-1),
  lines: z.array(z.string()),
  timestamp,
});

export const jobHeartbeatSchema = z.object({
  type: z.literal('job.heartbeat'),
  runId: id,
  jobId: id,
  timestamp,
});

/**
 * A runtime summary, informational only: every field of `context` is optional (the stock agent
 * 0.1.24 sends no `labels`). `envVars` carries the agent's environment in clear (docs/protocol.md#facts-about-the-stock-agent-that-switchyard-lives-with);
 * absent, it parses as `[]` so that redaction always has a list to walk.
 */
export const jobContextSchema = z.object({
  type: z.literal('job.context'),
  runId: id,
  jobId: id,
  context: z.object({
    envVars: z.array(z.object({ name: z.string(), value: z.string(), category: z.string().optional() })).default([]),
    runtime: z
      .object({ nodeVersion: z.string().optional(), os: z.string().optional(), arch: z.string().optional() })
      .optional(),
    sandboxType: z.string().optional(),
    labels: z.array(z.string()).optional(),
    workingDirectory: z.string().optional(),
    gitRef: z.string().optional(),
  }),
});

/**
 * The `run.event` types the stock agent 0.1.24 sends (docs/protocol.md#messages-from-the-agent). The schema takes any
 * non-empty `eventType`, so a newer agent's events still reach the run timeline.
 */
export const RUN_EVENT_TYPES = [
  'agent.clone.start',
  'agent.clone.end',
  'agent.execution.start',
  'agent.execution.end',
  'agent.teardown',
  'step.secret_mount',
] as const;

/** `jobId` and `durationMs` are always sent, null when they do not apply. */
export const runEventSchema = z.object({
  type: z.literal('run.event'),
  runId: id,
  eventType: z.string().min(1),
  timestampMs: timestamp,
  sourceService: z.literal('agent'),
  jobId: id.nullable(),
  metadata: z.record(z.string(), z.unknown()).optional(),
  durationMs: z.number().nonnegative().nullable(),
});

export const concurrencyReportSchema = z.object({
  type: z.literal('job.concurrency.report'),
  messageId: id,
  runId: id,
  jobId: id,
  group: z.string(),
});

export const approvalRequestSchema = z.object({
  type: z.literal('step.approval-request'),
  messageId: id,
  runId: id,
  jobId: id,
  stepIndex: z.number().int().nonnegative(),
  stepName: z.string(),
  clauses: z.array(z.unknown()),
  reason: z.string(),
  timeoutSeconds: z.number().positive().optional(),
  payload: z.object({ summaryMarkdown: z.string(), drift: z.unknown() }).optional(),
});

export type JobAck = z.infer<typeof jobAckSchema>;
export type JobReject = z.infer<typeof jobRejectSchema>;
export type StepResult = z.infer<typeof stepResultSchema>;
export type JobStatusData = z.infer<typeof jobStatusDataSchema>;
export type JobStatusMessage = z.infer<typeof jobStatusSchema>;
export type StepError = z.infer<typeof stepErrorSchema>;
export type StepStatusData = z.infer<typeof stepStatusDataSchema>;
export type StepStatusMessage = z.infer<typeof stepStatusSchema>;
export type LogChunk = z.infer<typeof logChunkSchema>;
export type JobHeartbeat = z.infer<typeof jobHeartbeatSchema>;
export type JobContext = z.infer<typeof jobContextSchema>;
/** A known event type; `RunEvent.eventType` is any string. */
export type RunEventType = (typeof RUN_EVENT_TYPES)[number];
export type RunEvent = z.infer<typeof runEventSchema>;
export type ConcurrencyReport = z.infer<typeof concurrencyReportSchema>;
export type ApprovalRequest = z.infer<typeof approvalRequestSchema>;
