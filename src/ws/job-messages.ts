import type { Logger } from 'pino';
import type { AgentRegistry, DispatchRecord } from '../../actors/agents/registry.ts';
import { LATE_MESSAGE_GRACE_MS } from '../../actors/agents/registry.ts';
import { coerceError } from '../../lib/errors.ts';
import type { IncomingRunEvent } from '../../actors/runs/supervisor.ts';
import { isTerminalJobStatus } from '../../machines/status.ts';
import { MASK, SENSITIVE_NAME, compileRedactor, redactDeep } from '../security/redact.ts';
import { jobStatusReportOf, runnerStepOf, stepRecordOf } from './job-reports.ts';
import { LogWriter } from './log-writer.ts';
import type { AppendLogs } from './log-writer.ts';
import type { AgentMessageOf } from './messages.ts';
import type { SecretOutputRow } from '../db/secrets.ts';

export type JobScopedMessage = AgentMessageOf<
  'job.ack' | 'job.reject' | 'job.status' | 'step.status' | 'job.heartbeat' | 'log.chunk' | 'job.context' | 'run.event' | 'job.concurrency.report'
>;

export const JOB_SCOPED_TYPES = new Set<string>([
  'job.concurrency.report',
  'job.ack',
  'job.reject',
  'job.status',
  'step.status',
  'job.heartbeat',
  'log.chunk',
  'job.context',
  'run.event',
]);

/**
 * Why a job message was refused (docs/protocol.md#ownership-rule): the attempt is another agent's (`other_agent`, the only
 * cause that counts towards a disconnect), this agent's but over or superseded (`ended`), or not
 * known at all (`unknown`). The last two are what an honest agent replays after a reconnect.
 */
export type OwnershipCause = 'other_agent' | 'ended' | 'unknown';
export const OWNERSHIP_CAUSES: readonly OwnershipCause[] = ['other_agent', 'ended', 'unknown'];

export type JobMessageOutcome = { ok: true } | { ok: false; cause: OwnershipCause };

export interface JobMessageDeps {
  registry: AgentRegistry;
  /** Puts the event in the run's mailbox when called; the promise resolves once it is durable. */
  deliver: (runId: string, event: IncomingRunEvent) => Promise<unknown>;
  /** The attempt's record: the registry's, or the job projection's after a restart. */
  lookupDispatch: (dispatchId: string) => Promise<DispatchRecord | null>;
  appendLogs: AppendLogs;
  now: () => number;
  log: Logger;
  /** The secret values sent with each attempt, to mask its texts with (SEC-4); without it only agent tokens are masked. */
  /** The secret values sent to each attempt, to mask what it reports (docs/http-api.md#secrets). */
  dispatchedSecrets?: {
    redactorFor(dispatchId: string): Promise<(text: string) => string>;
    ended(dispatchId: string): void;
  };
  /** Stores a successful job's `secretOutputs` as received (SEC-5); the terminal status waits for it. */
  storeSecretOutputs?: (outputs: SecretOutputRow[]) => Promise<void>;
}

/** Refused attempts remembered per connection, so a replay of thousands of frames costs one lookup each attempt. */
const REFUSED_MEMORY = 10_000;

/**
 * The job-scoped frames of one connection. Each becomes exactly one event for the job's run actor
 * (or one log write), from the agent that owns the attempt only (docs/protocol.md#ownership-rule). Events are put
 * in the mailbox in frame order without waiting for them to be durable; a terminal `job.status`
 * waits (with the later events of its run) until the attempt's log lines are stored.
 */
export class JobFrames {
  private readonly logs: LogWriter;
  /** Per run, the last event held back behind log writes: later events of that run queue behind it. */
  private readonly gates = new Map<string, Promise<void>>();
  private readonly refused = new Map<string, OwnershipCause>();

  constructor(private readonly deps: JobMessageDeps) {
    this.logs = new LogWriter(deps.appendLogs, deps.log);
  }

  /** Log bytes queued for the database on this connection. */
  get logBacklogBytes(): number {
    return this.logs.backlogBytes;
  }

  logsBelow(bytes: number): Promise<void> {
    return this.logs.below(bytes);
  }

  async handle(agentId: string, message: JobScopedMessage): Promise<JobMessageOutcome> {
    const dispatchId = message.jobId;
    if (dispatchId === null) return { ok: true };
    const owner = await this.owner(agentId, dispatchId);
    if ('cause' in owner) return { ok: false, cause: owner.cause };
    const redact = (await this.deps.dispatchedSecrets?.redactorFor(dispatchId)) ?? TOKENS_ONLY;
    this.apply(owner.record, agentId, dispatchId, message, redact);
    return { ok: true };
  }

  private async owner(agentId: string, dispatchId: string): Promise<{ record: DispatchRecord } | { cause: OwnershipCause }> {
    const remembered = this.refused.get(dispatchId);
    if (remembered !== undefined) return { cause: remembered };
    const record = await this.deps.lookupDispatch(dispatchId);
    const cause = refusalCause(record, agentId, this.deps.now());
    if (cause === null && record) return { record };
    if (this.refused.size >= REFUSED_MEMORY) this.refused.clear();
    this.refused.set(dispatchId, cause ?? 'unknown');
    return { cause: cause ?? 'unknown' };
  }

  private apply(record: DispatchRecord, agentId: string, dispatchId: string, message: JobScopedMessage, redact: (text: string) => string): void {
    const { runId, jobKey } = record;
    const base = { jobKey, agentId, dispatchId };
    switch (message.type) {
      case 'job.ack':
        return this.deliver(runId, { type: 'agent.job.ack', ...base });
      case 'job.reject':
        if (message.reason === 'draining') this.deps.registry.markUnusable(agentId, 'draining');
        return this.deliver(runId, { type: 'agent.job.reject', reason: message.reason, ...base });
      case 'job.status':
        return this.jobStatus(record, agentId, message, redact);
      case 'step.status':
        return this.deliver(runId, { type: 'agent.step.status', step: stepRecordOf(message, redact), ...base });
      case 'job.heartbeat':
        return this.deliver(runId, { type: 'agent.job.heartbeat', ...base });
      case 'job.concurrency.report':
        return this.deliver(runId, { type: 'agent.concurrency.report', ...base, requestId: message.messageId, group: message.group });
      case 'log.chunk': {
        const lines = message.lines.map(redact);
        return this.logs.add({ runId, jobKey, dispatchId, stepIndex: message.stepIndex, lines, now: this.deps.now(), ...sentAt(message.timestamp) });
      }
      case 'job.context':
        return this.deps.log.debug({ runId, jobKey, context: redactContext(message.context, redact) }, 'job context (redacted)');
      case 'run.event': {
        const runner = runnerStepOf(message);
        if (runner) return this.deliver(runId, { type: 'agent.step.status', step: runner, ...base });
        return this.deps.log.debug({ runId, jobKey, eventType: message.eventType }, 'agent run event');
      }
    }
  }

  /**
   * A terminal status waits until the attempt's log lines and secret outputs are stored, so whatever
   * its commit releases (a downstream dispatch, the run's end) finds them.
   */
  private jobStatus(record: DispatchRecord, agentId: string, message: AgentMessageOf<'job.status'>, redact: (text: string) => string): void {
    const { runId, jobKey } = record;
    const dispatchId = message.jobId;
    const terminal = isTerminalJobStatus(message.state);
    const waits: Promise<void>[] = [];
    if (terminal && this.logs.pending(dispatchId)) waits.push(this.logs.flushed(dispatchId));
    const outputs = message.state === 'success' ? Object.entries(message.secretOutputs ?? {}) : [];
    if (outputs.length > 0 && this.deps.storeSecretOutputs) {
      const rows = outputs.map(([name, o]) => ({ runId, jobKey, name, dispatchId, agentPublicKey: o.agentPublicKey, encrypted: o.encrypted, createdAt: this.deps.now() }));
      waits.push(this.deps.storeSecretOutputs(rows).catch((thrown: unknown) => this.deps.log.error({ err: coerceError(thrown), runId, jobKey }, 'secret outputs could not be stored')));
    }
    if (terminal) this.deps.dispatchedSecrets?.ended(dispatchId);
    const event: IncomingRunEvent = { type: 'agent.job.status', ...jobStatusReportOf(message, redact), jobKey, agentId, dispatchId };
    this.deliver(runId, event, waits.length > 0 ? Promise.all(waits).then(() => undefined) : undefined);
  }

  /** Calls `deliver` now, or once `after` and the run's earlier held events are through. */
  private deliver(runId: string, event: IncomingRunEvent, after?: Promise<void>): void {
    const gate = this.gates.get(runId);
    if (gate === undefined && after === undefined) return this.send(runId, event);
    const held = Promise.all([gate, after]).then(() => this.send(runId, event));
    this.gates.set(runId, held);
    void held.finally(() => {
      if (this.gates.get(runId) === held) this.gates.delete(runId);
    });
  }

  private send(runId: string, event: IncomingRunEvent): void {
    let delivery: Promise<unknown>;
    try {
      delivery = this.deps.deliver(runId, event);
    } catch (thrown) {
      delivery = Promise.reject(coerceError(thrown));
    }
    delivery.catch((thrown: unknown) => {
      this.deps.log.error({ err: coerceError(thrown), runId, event: event.type }, 'agent event delivery failed');
    });
  }
}

/** Null when `agentId` may speak for the attempt: it owns it, and it is open or ended within the grace. */
function refusalCause(record: DispatchRecord | null, agentId: string, now: number): OwnershipCause | null {
  if (!record) return 'unknown';
  if (record.agentId !== agentId) return 'other_agent';
  const late = record.endedAt != null && now - record.endedAt > LATE_MESSAGE_GRACE_MS;
  return late ? 'ended' : null;
}

const TOKENS_ONLY = compileRedactor([]);

/**
 * `job.context` fit to log (docs/protocol.md#facts-about-the-stock-agent-that-switchyard-lives-with): a variable with a
 * sensitive name is masked whole, every other text is masked against the attempt's secret values.
 */
function redactContext(context: AgentMessageOf<'job.context'>['context'], redact: (text: string) => string): unknown {
  const envVars = (context.envVars ?? []).map((v) => ({ ...v, value: SENSITIVE_NAME.test(v.name) ? MASK : redact(v.value) }));
  return redactDeep({ ...context, envVars }, redact);
}


/** An agent's clock reading fit to store (a bigint column); anything else is dropped, never the chunk. */
function sentAt(timestamp: number): { sentAt?: number } {
  return Number.isSafeInteger(timestamp) ? { sentAt: timestamp } : {};
}
