import { initialTransition, transition } from 'xstate';
import { concurrencyMachine } from '../../machines/concurrency.machine.ts';
import type { ConcurrencyEvent, ConcurrencyIntent } from '../../machines/concurrency.machine.ts';
import type { Effect } from '../runs/ports.ts';
import type { Clock } from '../clock.ts';
import type { IncomingRunEvent } from '../runs/supervisor.ts';

/** Applies one change to a group's snapshot under its row lock (src/db implements it). */
export type GroupStore = <T>(key: string, change: (snapshot: unknown) => { snapshot: unknown; result: T }) => Promise<T>;

type Deliver = (runId: string, event: IncomingRunEvent) => Promise<unknown>;
type GroupSnapshot = ReturnType<typeof initialTransition<typeof concurrencyMachine>>[0];

const INTENTS = new Set(['grant', 'queued', 'supersede']);

function intentOf(action: { type: string; params?: unknown }): ConcurrencyIntent[] {
  return INTENTS.has(action.type) ? [{ type: action.type, params: action.params } as ConcurrencyIntent] : [];
}

export function holderIdOf(runId: string, jobKey: string | null): string {
  return jobKey === null ? runId : `${runId}/${jobKey}`;
}

/**
 * The concurrency arbiters (CONC-3..6): one pure machine per group key, stepped inside a
 * transaction that holds the group's row, so every coordinator sees one FIFO per group. Its
 * decisions go to the parties' run actors as ordinary events.
 */
export class ConcurrencyGroups {
  constructor(
    private readonly store: GroupStore,
    private readonly deliver: Deliver,
    private readonly clock: Clock,
  ) {}

  async request(effect: Effect<'requestConcurrency'>): Promise<void> {
    const { jobKey, key, policy } = effect.payload;
    const holderId = holderIdOf(effect.runId, jobKey);
    await this.step(key, { type: 'concurrency.request', holderId, runId: effect.runId, jobKey, policy, at: this.clock.now() });
  }

  async release(effect: Effect<'releaseConcurrency'>): Promise<void> {
    const { jobKey, key } = effect.payload;
    await this.step(key, { type: 'concurrency.release', holderId: holderIdOf(effect.runId, jobKey), at: this.clock.now() });
  }

  private async step(key: string, event: ConcurrencyEvent): Promise<void> {
    const intents = await this.store(key, (stored) => {
      const current = (stored as GroupSnapshot | null) ?? initialTransition(concurrencyMachine, { key })[0];
      const restored = concurrencyMachine.resolveState({ value: current.value, context: current.context });
      const [next, actions] = transition(concurrencyMachine, restored, event);
      return { snapshot: concurrencyMachine.getPersistedSnapshot(next), result: actions.flatMap(intentOf) };
    });
    for (const intent of intents) await this.announce(key, intent);
  }

  private async announce(key: string, intent: ConcurrencyIntent): Promise<void> {
    const { runId, jobKey } = intent.params;
    if (jobKey === null) return this.announceToRun(key, intent);
    if (intent.type === 'grant') await this.deliver(runId, { type: 'concurrency.granted', jobKey });
    else if (intent.type === 'queued') await this.deliver(runId, { type: 'concurrency.queued', jobKey, position: intent.params.position });
    else await this.deliver(runId, { type: 'job.cancel.requested', jobKey, force: false, reason: intent.params.reason });
  }

  /** The run itself holds a workflow's group: it is granted, queued or superseded as a whole (CONC-7). */
  private async announceToRun(key: string, intent: ConcurrencyIntent): Promise<void> {
    const { runId } = intent.params;
    if (intent.type === 'grant') await this.deliver(runId, { type: 'run.concurrency.granted', key });
    else if (intent.type === 'queued') await this.deliver(runId, { type: 'run.concurrency.queued', key, position: intent.params.position });
    else await this.deliver(runId, { type: 'run.cancel', reason: intent.params.reason, force: false, by: 'concurrency' });
  }
}
