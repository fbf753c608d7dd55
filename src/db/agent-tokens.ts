import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Kysely, Selectable } from 'kysely';
import { toJson } from './json.ts';
import type { AgentTokensTable, Schema } from './schema.ts';

/** `kat_` and 64 lowercase hex characters: 32 random bytes (docs/protocol.md#tokens). */
export const TOKEN_PATTERN = /^kat_[0-9a-f]{64}$/;

/** Length of the display prefix kept next to the hash (`kat_` and 8 hex characters). */
export const TOKEN_PREFIX_LENGTH = 12;

/** `created_by` of a single-use bootstrap token is this prefix followed by the agentId it was minted for. */
export const BOOTSTRAP_CREATED_BY_PREFIX = 'bootstrap:';

export type AgentType = 'static' | 'ephemeral';

/** A token row without its hash: safe to list, log and return from the API. */
export interface AgentTokenRecord {
  id: string;
  prefix: string;
  agentType: AgentType;
  /** Label scope (gate G1); null means unscoped. */
  labels: string[] | null;
  /** Taints every session on this token carries. */
  mandatoryLabels: string[];
  createdBy: string | null;
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
  consumedAt: number | null;
  lastSeenAt: number | null;
}

export interface CreateAgentTokenInput {
  agentType: AgentType;
  labels?: readonly string[] | null;
  mandatoryLabels?: readonly string[];
  createdBy?: string | null;
  /** Required for `ephemeral` tokens (they always have a TTL). */
  expiresAt?: number | null;
  now: number;
}

const RECORD_COLUMNS = [
  'id',
  'prefix',
  'agent_type',
  'labels',
  'mandatory_labels',
  'created_by',
  'created_at',
  'expires_at',
  'revoked_at',
  'consumed_at',
  'last_seen_at',
] as const;

type RecordRow = Pick<Selectable<AgentTokensTable>, (typeof RECORD_COLUMNS)[number]>;

function hashToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

function stringArray(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((item): item is string => typeof item === 'string') : [];
}

function toRecord(row: RecordRow): AgentTokenRecord {
  return {
    id: row.id,
    prefix: row.prefix,
    agentType: row.agent_type,
    labels: row.labels === null ? null : stringArray(row.labels),
    mandatoryLabels: stringArray(row.mandatory_labels),
    createdBy: row.created_by,
    createdAt: row.created_at,
    expiresAt: row.expires_at,
    revokedAt: row.revoked_at,
    consumedAt: row.consumed_at,
    lastSeenAt: row.last_seen_at,
  };
}

/** The agentId a bootstrap token was minted for, or null when `record` is not a bootstrap token. */
export function bootstrapAgentIdOf(record: Pick<AgentTokenRecord, 'agentType' | 'createdBy'>): string | null {
  if (record.agentType !== 'ephemeral' || !record.createdBy?.startsWith(BOOTSTRAP_CREATED_BY_PREFIX)) return null;
  return record.createdBy.slice(BOOTSTRAP_CREATED_BY_PREFIX.length);
}

/** Mints a token. Only its SHA-256 and display prefix are stored; the plaintext is returned once, here. */
export async function createAgentToken(
  db: Kysely<Schema>,
  input: CreateAgentTokenInput,
): Promise<{ token: string; record: AgentTokenRecord }> {
  if (input.agentType === 'ephemeral' && input.expiresAt == null) {
    throw new RangeError('An ephemeral agent token needs expiresAt: ephemeral tokens always have a TTL');
  }
  const token = `kat_${randomBytes(32).toString('hex')}`;
  const row = await db
    .insertInto('agent_tokens')
    .values({
      id: randomUUID(),
      token_hash: hashToken(token),
      prefix: token.slice(0, TOKEN_PREFIX_LENGTH),
      agent_type: input.agentType,
      labels: input.labels == null ? null : toJson([...input.labels]),
      mandatory_labels: toJson([...(input.mandatoryLabels ?? [])]),
      created_by: input.createdBy ?? null,
      created_at: input.now,
      expires_at: input.expiresAt ?? null,
    })
    .returning(RECORD_COLUMNS)
    .executeTakeFirstOrThrow();
  return { token, record: toRecord(row) };
}

/**
 * The token's record when it is valid at `now` (known, not revoked, not consumed, not expired), else
 * null. Checking and stamping `last_seen_at` is one UPDATE, so a concurrent revoke is never missed.
 */
export async function validateAgentToken(db: Kysely<Schema>, token: string, now: number): Promise<AgentTokenRecord | null> {
  if (!TOKEN_PATTERN.test(token)) return null;
  const row = await db
    .updateTable('agent_tokens')
    .set({ last_seen_at: now })
    .where('token_hash', '=', hashToken(token))
    .where('revoked_at', 'is', null)
    .where('consumed_at', 'is', null)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', now)]))
    .returning(RECORD_COLUMNS)
    .executeTakeFirst();
  return row ? toRecord(row) : null;
}

/**
 * Marks a bootstrap token used on its first successful register. False when it was already
 * consumed (another socket won), revoked, unknown, or is not a bootstrap token at all: consuming a
 * reusable token would lock every agent on it out.
 */
export async function consumeBootstrapToken(db: Kysely<Schema>, id: string, now: number): Promise<boolean> {
  const result = await db
    .updateTable('agent_tokens')
    .set({ consumed_at: now })
    .where('id', '=', id)
    .where('agent_type', '=', 'ephemeral')
    .where('created_by', 'like', `${BOOTSTRAP_CREATED_BY_PREFIX}%`)
    .where('consumed_at', 'is', null)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Revokes a token (idempotent: a second revoke keeps the first time). Null for an unknown id. */
export async function revokeAgentToken(db: Kysely<Schema>, id: string, now: number): Promise<AgentTokenRecord | null> {
  const row = await db
    .updateTable('agent_tokens')
    .set((eb) => ({ revoked_at: eb.fn.coalesce('revoked_at', eb.val(now)) }))
    .where('id', '=', id)
    .returning(RECORD_COLUMNS)
    .executeTakeFirst();
  return row ? toRecord(row) : null;
}

/** Tokens newest first, without hashes; continues after the sort key `[created_at, id]` (docs/http-api.md#pagination). */
export async function listAgentTokens(db: Kysely<Schema>, page: { limit: number; after: [number, string] | null } = { limit: 100_000, after: null }): Promise<AgentTokenRecord[]> {
  let query = db.selectFrom('agent_tokens').select(RECORD_COLUMNS).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(page.limit);
  const after = page.after;
  if (after) query = query.where((eb) => eb(eb.refTuple('created_at', 'id'), '<', eb.tuple(after[0], after[1])));
  const rows = await query.execute();
  return rows.map(toRecord);
}

/** Deletes ephemeral tokens whose TTL has passed (the periodic cleanup); returns how many. */
export async function deleteExpiredEphemeralTokens(db: Kysely<Schema>, now: number): Promise<number> {
  const result = await db
    .deleteFrom('agent_tokens')
    .where('agent_type', '=', 'ephemeral')
    .where('expires_at', 'is not', null)
    .where('expires_at', '<=', now)
    .executeTakeFirst();
  return Number(result.numDeletedRows);
}

/** When each of these tokens expires (null: never); a token missing from the answer was deleted. */
export async function readTokenExpiries(db: Kysely<Schema>, ids: readonly string[]): Promise<Map<string, number | null>> {
  if (ids.length === 0) return new Map();
  const rows = await db.selectFrom('agent_tokens').select(['id', 'expires_at']).where('id', 'in', [...ids]).execute();
  return new Map(rows.map((row) => [row.id, row.expires_at]));
}
