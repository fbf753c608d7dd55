import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { IncomingRunEvent } from '../../../actors/runs/supervisor.ts';
import type { LockWorkflow } from '../../../machines/lock.types.ts';
import { readJournal } from '../../../src/db/journal.ts';
import type { Schema } from '../../../src/db/schema.ts';
import type { RunSource } from '../../../src/pipeline/run-source.ts';
import type { TestRuntime } from '../../support/runtime.ts';
import { eventually, planFor } from '../../support/runtime.ts';

export interface Attempt {
  jobKey: string;
  agentId: string;
  dispatchId: string;
}

export function attempt(jobKey: string, agentId: string): Attempt {
  return { jobKey, agentId, dispatchId: randomUUID() };
}

/** Drives one run of a runtime the way agents, the dispatcher and the timer service would. */
export class RunDriver {
  constructor(
    readonly db: Kysely<Schema>,
    public runtime: TestRuntime,
    readonly runId = randomUUID(),
  ) {}

  /** The frames the runtime sent to the driver's agents. */
  readonly frames: { agentId: string; type: string }[] = [];

  async create(workflow: LockWorkflow): Promise<void> {
    const source: RunSource = { repository: 'acme/app', repoUrl: null, ref: 'main', sha: 'HEAD', provider: 'api', event: null, workflow };
    await this.runtime.createRun({ input: planFor(this.runId, workflow), repository: 'acme/app', inputSummary: source });
  }

  /** An agent connected to the runtime, whose socket only records what it is sent. */
  private connect(agentId: string): void {
    const { registry } = this.runtime;
    if (registry.get(agentId)) return;
    const connectionId = randomUUID();
    const link = {
      send: (frame: object) => void this.frames.push({ agentId, type: (frame as { type: string }).type }),
      close: () => void registry.remove(agentId, connectionId),
    };
    const offer = { agentId, labels: ['label-nobody-has'], taints: [], properties: {}, connectionId, tokenId: null };
    registry.add({ ...offer, maxConcurrency: 4, scalerManaged: false, unusable: null, lastFrameAt: 0, slots: new Map(), sent: new Set(), link });
  }

  send(event: IncomingRunEvent): Promise<void> {
    return this.runtime.supervisor.send(this.runId, event);
  }

  jobValue(jobKey: string): unknown {
    return this.runtime.supervisor.snapshotOf(this.runId)?.children?.[jobKey]?.snapshot.value;
  }

  async until(jobKey: string, value: unknown, what = `${jobKey} in ${JSON.stringify(value)}`): Promise<void> {
    const wanted = JSON.stringify(value);
    await eventually(() => JSON.stringify(this.jobValue(jobKey)) === wanted, 5000, what);
  }

  /** What the dispatcher does when it finds the agent a slot. */
  async grant(a: Attempt): Promise<void> {
    this.connect(a.agentId);
    this.runtime.registry.reserve(a.agentId, a.dispatchId, { runId: this.runId, jobKey: a.jobKey });
    await this.send({ type: 'placement.granted', agentKind: 'static', ...a });
    await this.until(a.jobKey, { assigned: { dispatched: 'awaitingAck' } });
  }

  async start(a: Attempt): Promise<void> {
    await this.send({ type: 'agent.job.ack', ...a });
    await this.send({ type: 'agent.job.status', state: 'running', ...a });
    await this.until(a.jobKey, { assigned: { running: 'started' } });
  }

  /** What the timer service delivers when the armed deadline of `kind` is due. */
  async fire(jobKey: string, kind: 'ack' | 'lease' | 'recovery'): Promise<void> {
    const armed = this.runtime.supervisor.jobContext(this.runId, jobKey)?.deadlines[kind];
    if (!armed) throw new Error(`no ${kind} deadline armed on ${jobKey}`);
    await this.send({ type: `timer.${kind}.expired`, deadlineId: armed.id, dueAt: armed.at, jobKey });
  }

  async finalStatus(): Promise<string> {
    const row = await eventually(
      () => this.db.selectFrom('runs').select('status').where('run_id', '=', this.runId).where('status', 'in', ['success', 'failed', 'cancelled']).executeTakeFirst(),
      5000,
      'the run to finish',
    );
    return row.status;
  }

  async eventTypes(): Promise<string[]> {
    return (await readJournal(this.db, this.runId)).map((record) => (record.event as { type: string }).type);
  }
}
