import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { AgentRegistry } from '../../actors/agents/registry.ts';
import { coerceError } from '../../lib/errors.ts';
import { deleteExpiredEphemeralTokens, readTokenExpiries } from '../db/agent-tokens.ts';
import type { Schema } from '../db/schema.ts';
import { CLOSE_CODES } from './messages.ts';

export interface TokenExpiryDeps {
  db: Kysely<Schema>;
  registry: AgentRegistry;
  now: () => number;
  log: Logger;
  /** @default 60000 (docs/protocol.md#tokens) */
  everyMs?: number;
}

/**
 * Expiry (docs/protocol.md#tokens): a session whose token expired is closed with 4010 once it holds no
 * job — never while it runs one, which would fail long scaler jobs as "disconnected
 * mid-execution". Expired ephemeral rows are then deleted; a session whose row is gone counts as expired.
 */
export async function sweepExpiredTokens(deps: TokenExpiryDeps): Promise<{ closed: string[]; deleted: number }> {
  const now = deps.now();
  const sessions = deps.registry.all().filter((session) => session.tokenId !== null);
  const ids = [...new Set(sessions.map((session) => session.tokenId as string))];
  const expiry = await readTokenExpiries(deps.db, ids);
  const closed: string[] = [];
  for (const session of sessions) {
    const expiresAt = expiry.get(session.tokenId as string);
    const expired = expiresAt === undefined || (expiresAt !== null && expiresAt <= now);
    if (!expired || session.slots.size > 0) continue;
    session.link.send({ type: 'auth.failure', reason: 'Token expired' });
    session.link.close(CLOSE_CODES.AUTH_FAILED, 'Token expired');
    closed.push(session.agentId);
  }
  const deleted = await deleteExpiredEphemeralTokens(deps.db, now);
  if (closed.length > 0 || deleted > 0) deps.log.info({ closed, deleted }, 'expired agent tokens swept');
  return { closed, deleted };
}

/** Runs the sweep every `everyMs`; returns the stop function. */
export function startTokenExpirySweep(deps: TokenExpiryDeps): () => void {
  const timer = setInterval(() => {
    sweepExpiredTokens(deps).catch((thrown: unknown) => deps.log.warn({ err: coerceError(thrown) }, 'token expiry sweep failed'));
  }, deps.everyMs ?? 60_000);
  timer.unref();
  return () => clearInterval(timer);
}
