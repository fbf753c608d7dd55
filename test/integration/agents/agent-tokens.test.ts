import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { it } from 'node:test';
import {
  bootstrapAgentIdOf,
  consumeBootstrapToken,
  createAgentToken,
  deleteExpiredEphemeralTokens,
  listAgentTokens,
  revokeAgentToken,
  TOKEN_PATTERN,
  validateAgentToken,
} from '../../../src/db/agent-tokens.ts';
import { describeEachKind, withTestDatabase } from '../../support/database.ts';

const T0 = 1_700_000_000_000;

await describeEachKind('agent tokens', (kind) => {
  it('creates a kat_ token and stores only its SHA-256 and 12-character prefix', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { token, record } = await createAgentToken(db, { agentType: 'static', labels: ['gpu'], mandatoryLabels: ['team:a'], now: T0 });
      assert.match(token, TOKEN_PATTERN);
      assert.equal(record.prefix, token.slice(0, 12));
      assert.deepEqual(
        { ...record, id: undefined },
        {
          id: undefined,
          prefix: token.slice(0, 12),
          agentType: 'static',
          labels: ['gpu'],
          mandatoryLabels: ['team:a'],
          createdBy: null,
          createdAt: T0,
          expiresAt: null,
          revokedAt: null,
          consumedAt: null,
          lastSeenAt: null,
        },
      );
      const row = await db.selectFrom('agent_tokens').selectAll().executeTakeFirstOrThrow();
      assert.equal(row.token_hash, createHash('sha256').update(token).digest('hex'));
      assert.ok(!Object.values(row).some((value) => typeof value === 'string' && value.includes(token.slice(12))), 'no plaintext stored');
    }));

  it('tokens are unique and unscoped by default', () =>
    withTestDatabase(kind, async ({ db }) => {
      const a = await createAgentToken(db, { agentType: 'static', now: T0 });
      const b = await createAgentToken(db, { agentType: 'static', now: T0 });
      assert.notEqual(a.token, b.token);
      assert.notEqual(a.record.id, b.record.id);
      assert.equal(a.record.labels, null);
      assert.deepEqual(a.record.mandatoryLabels, []);
    }));

  it('validates a known token and stamps last_seen_at', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { token, record } = await createAgentToken(db, { agentType: 'static', now: T0 });
      const valid = await validateAgentToken(db, token, T0 + 5000);
      assert.deepEqual(valid, { ...record, lastSeenAt: T0 + 5000 });
      assert.equal((await listAgentTokens(db))[0]?.lastSeenAt, T0 + 5000);
    }));

  it('refuses malformed and unknown tokens without touching any row', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { token } = await createAgentToken(db, { agentType: 'static', now: T0 });
      for (const bad of ['', 'kat_', token.toUpperCase(), `${token}0`, token.slice(0, -1), ` ${token}`, token.replace('kat_', 'kit_')]) {
        assert.equal(await validateAgentToken(db, bad, T0), null, `malformed: ${JSON.stringify(bad)}`);
      }
      assert.equal(await validateAgentToken(db, `kat_${'0'.repeat(64)}`, T0), null, 'unknown');
      assert.equal((await listAgentTokens(db))[0]?.lastSeenAt, null);
    }));

  it('an expiring token is valid until expires_at, not at it', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { token } = await createAgentToken(db, { agentType: 'static', expiresAt: T0 + 1000, now: T0 });
      assert.notEqual(await validateAgentToken(db, token, T0 + 999), null);
      assert.equal(await validateAgentToken(db, token, T0 + 1000), null);
      assert.equal((await listAgentTokens(db))[0]?.lastSeenAt, T0 + 999, 'a refused validation leaves last_seen_at');
    }));

  it('a revoked token is refused; revoking again keeps the first time; unknown ids give null', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { token, record } = await createAgentToken(db, { agentType: 'static', now: T0 });
      const revoked = await revokeAgentToken(db, record.id, T0 + 10);
      assert.equal(revoked?.revokedAt, T0 + 10);
      assert.equal(await validateAgentToken(db, token, T0 + 11), null);
      assert.equal((await revokeAgentToken(db, record.id, T0 + 20))?.revokedAt, T0 + 10);
      assert.equal(await revokeAgentToken(db, '00000000-0000-0000-0000-000000000000', T0), null);
    }));

  it('a bootstrap token is consumed once; a consumed token is refused', () =>
    withTestDatabase(kind, async ({ db }) => {
      const { token, record } = await createAgentToken(db, {
        agentType: 'ephemeral',
        createdBy: 'bootstrap:agent-7',
        expiresAt: T0 + 600_000,
        now: T0,
      });
      assert.equal(bootstrapAgentIdOf(record), 'agent-7');
      assert.notEqual(await validateAgentToken(db, token, T0 + 1), null);
      const races = await Promise.all([consumeBootstrapToken(db, record.id, T0 + 2), consumeBootstrapToken(db, record.id, T0 + 2)]);
      assert.deepEqual(races.sort(), [false, true], 'exactly one register wins');
      assert.equal(await validateAgentToken(db, token, T0 + 3), null);
      assert.equal((await listAgentTokens(db))[0]?.consumedAt, T0 + 2);
    }));

  it('consumeBootstrapToken refuses static, scaler-issued, revoked and unknown tokens', () =>
    withTestDatabase(kind, async ({ db }) => {
      const staticToken = await createAgentToken(db, { agentType: 'static', now: T0 });
      const scaler = await createAgentToken(db, { agentType: 'ephemeral', createdBy: 'agent-9', expiresAt: T0 + 1, now: T0 });
      const revoked = await createAgentToken(db, { agentType: 'ephemeral', createdBy: 'bootstrap:a', expiresAt: T0 + 1, now: T0 });
      await revokeAgentToken(db, revoked.record.id, T0);
      for (const id of [staticToken.record.id, scaler.record.id, revoked.record.id, 'no-such-id']) {
        assert.equal(await consumeBootstrapToken(db, id, T0), false, id);
      }
      assert.equal(bootstrapAgentIdOf(scaler.record), null);
      assert.equal(bootstrapAgentIdOf(staticToken.record), null);
      assert.notEqual(await validateAgentToken(db, staticToken.token, T0), null, 'a static token stays usable');
    }));

  it('an ephemeral token must have an expiry', () =>
    withTestDatabase(kind, async ({ db }) => {
      await assert.rejects(createAgentToken(db, { agentType: 'ephemeral', createdBy: 'agent-1', now: T0 }), RangeError);
    }));

  it('lists every token newest first without hashes', () =>
    withTestDatabase(kind, async ({ db }) => {
      const older = await createAgentToken(db, { agentType: 'static', now: T0 });
      const newer = await createAgentToken(db, { agentType: 'ephemeral', createdBy: 'agent-1', expiresAt: T0 + 5, now: T0 + 1 });
      const listed = await listAgentTokens(db);
      assert.deepEqual(listed.map((t) => t.id), [newer.record.id, older.record.id]);
      const text = JSON.stringify(listed);
      assert.ok(!text.includes('hash') && !text.includes(older.token) && !text.includes(newer.token));
    }));

  it('deletes only expired ephemeral tokens', () =>
    withTestDatabase(kind, async ({ db }) => {
      const expired = await createAgentToken(db, { agentType: 'ephemeral', createdBy: 'a', expiresAt: T0 + 10, now: T0 });
      const live = await createAgentToken(db, { agentType: 'ephemeral', createdBy: 'b', expiresAt: T0 + 100, now: T0 });
      const staticExpired = await createAgentToken(db, { agentType: 'static', expiresAt: T0 + 10, now: T0 });
      assert.equal(await deleteExpiredEphemeralTokens(db, T0 + 10), 1);
      assert.deepEqual((await listAgentTokens(db)).map((t) => t.id).sort(), [live.record.id, staticExpired.record.id].sort());
      assert.equal(await deleteExpiredEphemeralTokens(db, T0 + 10), 0);
      assert.ok(expired.record.id);
    }));
});
