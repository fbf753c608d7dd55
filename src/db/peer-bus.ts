import { createHash } from 'node:crypto';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import pg from 'pg';
import type { Logger } from 'pino';
import { ownConnectionRetryMs } from './reconnect.ts';
import type { Schema } from './schema.ts';

/**
 * The channel every coordinator listens on. Its payloads: 'placement' (a peer published a placement
 * request), PEER_JOINED (a coordinator started), SECRETS_CHANGED (a secret was stored or deleted),
 * REPOSITORIES_CHANGED (a repository was registered, changed or removed).
 */
export const PLACEMENT_CHANNEL = 'sy_placement';

export const PEER_JOINED = 'joined';
export const SECRETS_CHANGED = 'secrets';
export const REPOSITORIES_CHANGED = 'repositories';

/**
 * Tells every coordinator (this one too) `payload` on PLACEMENT_CHANNEL; inside a transaction, when
 * it commits.
 */
export async function notifyEveryCoordinator(db: Kysely<Schema>, payload: typeof PEER_JOINED | typeof SECRETS_CHANGED | typeof REPOSITORIES_CHANGED): Promise<void> {
  await sql`SELECT pg_notify(${PLACEMENT_CHANNEL}, ${payload})`.execute(db);
}

/**
 * The channel one coordinator listens on. Channel names are identifiers of at most 63 bytes and a
 * coordinator id is free text, so it is hashed; `coordinatorChannelSql` computes the same in SQL.
 */
export function coordinatorChannel(coordinatorId: string): string {
  return `sy_${createHash('md5').update(coordinatorId).digest('hex').slice(0, 24)}`;
}

export function coordinatorChannelSql(coordinatorId: RawBuilder<unknown>): RawBuilder<string> {
  return sql<string>`'sy_' || substr(md5(${coordinatorId}), 1, 24)`;
}

export interface PeerListener {
  close(): Promise<void>;
}

/**
 * LISTENs on `channels` over a connection of its own (a pooled one would be handed back). Each
 * notification's payload goes to `onSignal`; after a reconnect `onSignal('reconnected')` runs, since
 * signals sent while it was down are gone (the tables they point at are not).
 */
export function listenForPeers(
  connection: pg.ClientConfig,
  channels: readonly string[],
  onSignal: (payload: string) => void,
  log: Logger,
): PeerListener {
  let client: pg.Client | null = null;
  let closed = false;
  let failures = 0;
  let timer: NodeJS.Timeout | undefined;
  const connect = async (): Promise<void> => {
    const next = new pg.Client(connection);
    next.on('notification', (message) => onSignal(message.payload ?? ''));
    next.on('error', (error) => {
      log.warn({ error: error.message }, 'peer listener connection failed; reconnecting');
      void next.end().catch(() => undefined);
      if (client === next) scheduleReconnect();
    });
    try {
      await next.connect();
      for (const channel of channels) await next.query(`LISTEN ${next.escapeIdentifier(channel)}`);
    } catch (error) {
      log.warn({ error: error instanceof Error ? error.message : String(error) }, 'peer listener could not connect; retrying');
      await next.end().catch(() => undefined);
      return scheduleReconnect();
    }
    if (closed) return void (await next.end().catch(() => undefined));
    client = next;
    if (failures > 0) onSignal('reconnected');
    failures = 0;
  };
  const scheduleReconnect = (): void => {
    client = null;
    if (closed) return;
    const delay = ownConnectionRetryMs(failures);
    failures += 1;
    timer = setTimeout(() => void connect(), delay);
  };
  void connect();
  return {
    async close() {
      closed = true;
      clearTimeout(timer);
      await client?.end().catch(() => undefined);
      client = null;
    },
  };
}
