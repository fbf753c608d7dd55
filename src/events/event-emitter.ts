import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { recordDeliveries, type DeliveryKey } from '../db/deliveries.ts';
import { listRepositories, type RepositoryRegistration } from '../db/repositories.ts';
import type { Schema } from '../db/schema.ts';
import type { RunSource } from '../pipeline/run-source.ts';
import { EVENT_SOURCE, MAX_CHAIN_DEPTH, chainDepthOf, type EmittedEventBody } from '../pipeline/emitted-event.ts';

/** The attempt that emits, and its run's frozen source. */
export interface EventSender {
  runId: string;
  jobKey: string;
  source: RunSource;
}

export interface EmitRequest {
  eventName: string;
  payload: Record<string, unknown>;
  target?: { repos?: string[] };
}

export type EmitAnswer = { deliveryId: string } | { error: string };

/** Whether `repo` takes events emitted by workflows of `sender`: its own, or named in its `acceptsEventsFrom`. */
export function acceptsEventsFrom(repo: RepositoryRegistration, sender: string): boolean {
  if (repo.name === sender) return true;
  return (repo.acceptsEventsFrom ?? []).some((allowed) => allowed === sender || (allowed.endsWith('/*') && sender.startsWith(allowed.slice(0, -1))));
}

/**
 * `ctx.emit` (docs/events.md): an event is stored as one delivery per repository it reaches (source
 * `event`), which the intake queue runs through the same pipeline as a webhook: the repository's
 * lock file at its default branch head, its `kici_event` triggers, one run per matched workflow.
 * Without `target` it reaches the sender's repository and every repository that accepts the
 * sender's events; with `target.repos`, exactly those, each of which must accept them. The sending
 * run's trust goes with it, and a chain of events is cut at {@link MAX_CHAIN_DEPTH}.
 */
export class EventEmitter {
  constructor(private readonly deps: { db: Kysely<Schema>; now: () => number; notify: (key: DeliveryKey) => void; log: Logger }) {}

  async emit(sender: EventSender, request: EmitRequest): Promise<EmitAnswer> {
    const chainDepth = chainDepthOf(sender.source.event) + 1;
    if (chainDepth > MAX_CHAIN_DEPTH) {
      return { error: `event ${request.eventName} not emitted: it would be the ${chainDepth}th event of a chain, and chains stop at ${MAX_CHAIN_DEPTH}` };
    }
    const targets = await this.targetsOf(sender.source.repository, request.target?.repos);
    if ('error' in targets) return targets;
    const eventId = randomUUID();
    const now = this.deps.now();
    const bodyOf = (repo: RepositoryRegistration): EmittedEventBody => ({
      ...{ eventId, eventName: request.eventName, payload: request.payload, repository: repo.name, defaultBranch: repo.defaultBranch ?? 'main' },
      ...{ sourceRepo: sender.source.repository, sourceRunId: sender.runId, sourceJobKey: sender.jobKey },
      ...{ trustTier: sender.source.trustTier ?? 'unknown', chainDepth },
    });
    const deliveries = targets.map((repo) => ({
      ...{ source: EVENT_SOURCE, deliveryId: `${eventId}:${repo.name}`, eventName: 'kici_event', headers: {} },
      ...{ body: Buffer.from(JSON.stringify(bodyOf(repo))), now },
    }));
    await this.deps.db.transaction().execute(async (tx) => {
      const row = { event_id: eventId, run_id: sender.runId, job_key: sender.jobKey, repository: sender.source.repository, event_name: request.eventName };
      await tx.insertInto('emitted_events').values({ ...row, targets: JSON.stringify(targets.map((repo) => repo.name)), created_at: now }).execute();
      await recordDeliveries(tx, deliveries);
    });
    this.deps.log.info({ eventId, eventName: request.eventName, runId: sender.runId, jobKey: sender.jobKey, targets: targets.map((repo) => repo.name), chainDepth }, 'event emitted');
    for (const delivery of deliveries) this.deps.notify({ source: delivery.source, deliveryId: delivery.deliveryId });
    return { deliveryId: eventId };
  }

  private async targetsOf(sender: string, named: readonly string[] | undefined): Promise<RepositoryRegistration[] | { error: string }> {
    const registered = await listRepositories(this.deps.db);
    if (named === undefined || named.length === 0) {
      const reached = registered.filter((repo) => acceptsEventsFrom(repo, sender));
      if (reached.length === 0) return { error: `no registered repository takes events from ${sender} (register it, or name ${sender} in another repository's acceptsEventsFrom)` };
      return reached;
    }
    const byName = new Map(registered.map((repo) => [repo.name, repo]));
    const targets: RepositoryRegistration[] = [];
    for (const name of new Set(named)) {
      const repo = byName.get(name);
      if (!repo) return { error: `target repository ${name} is not registered with this coordinator` };
      if (!acceptsEventsFrom(repo, sender)) return { error: `repository ${name} does not accept events from ${sender} (its acceptsEventsFrom does not name it)` };
      targets.push(repo);
    }
    return targets;
  }
}
