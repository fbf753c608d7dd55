import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import { EventEmitter, acceptsEventsFrom } from '../../../src/events/event-emitter.ts';
import { MAX_CHAIN_DEPTH, chainDepthOf, normalizeEmittedEvent, triggeredByOf, type EmittedEventBody } from '../../../src/pipeline/emitted-event.ts';
import { isDropped } from '../../../src/pipeline/normalized-event.ts';
import type { RunSource } from '../../../src/pipeline/run-source.ts';
import { resolveTrust } from '../../../src/pipeline/trust.ts';

const body = (extra: Partial<EmittedEventBody> = {}): EmittedEventBody => ({
  ...{ eventId: 'e1', eventName: 'deployed', payload: { env: 'prod' }, repository: 'acme/docs', defaultBranch: 'trunk' },
  ...{ sourceRepo: 'acme/app', sourceRunId: 'run-1', sourceJobKey: 'deploy', trustTier: 'trusted', chainDepth: 1 },
  ...extra,
});

describe('emitted events', () => {
  it('become a kici_event envelope read at the target default branch head', () => {
    const event = normalizeEmittedEvent(body());
    assert.ok(!isDropped(event));
    assert.deepEqual([event.repository, event.sha, event.ref, event.envelope.type, event.envelope.targetBranch], ['acme/docs', null, 'refs/heads/trunk', 'kici_event', 'trunk']);
    assert.deepEqual(event.envelope.payload, { eventName: 'deployed', payload: { env: 'prod' }, sourceRepo: 'acme/app', sourceRunId: 'run-1', sourceJobKey: 'deploy', chainDepth: 1, trustTier: 'trusted' });
    assert.match((normalizeEmittedEvent({ ...body(), chainDepth: 0 }) as { dropped: string }).dropped, /malformed emitted event/);
  });

  it("a run started by one inherits the sender's trust: an untrusted sender's event starts an untrusted run", async () => {
    for (const [tier, expected] of [['trusted', 'trusted'], ['unknown', 'unknown'], ['known', 'known']] as const) {
      const event = normalizeEmittedEvent(body({ trustTier: tier }));
      assert.ok(!isDropped(event));
      const trust = await resolveTrust({ event, provider: 'generic', defaultBranch: 'trunk' });
      assert.equal(trust.tier, expected);
      assert.equal(trust.lockSha, null, 'read at the default branch head');
    }
  });

  it('a chain of events is cut: the sixth event of a chain is refused before anything is stored', async () => {
    const atDepth = (depth: number) => normalizeEmittedEvent(body({ chainDepth: depth }));
    const deepest = atDepth(MAX_CHAIN_DEPTH);
    assert.ok(!isDropped(deepest));
    assert.equal(chainDepthOf(deepest.envelope), MAX_CHAIN_DEPTH);
    assert.equal(chainDepthOf(null), 0);
    assert.equal(chainDepthOf({ type: 'push', payload: { chainDepth: 3 } }), 0, 'only an emitted event counts');
    const unusedDatabase = new Proxy({}, { get: () => assert.fail('the database is not reached') });
    const emitter = new EventEmitter({ db: unusedDatabase as never, now: () => 0, notify: () => assert.fail('nothing is delivered'), log: pino({ level: 'silent' }) });
    const source = { repository: 'acme/app', trustTier: 'trusted', event: deepest.envelope } as unknown as RunSource;
    const answer = await emitter.emit({ runId: 'run-6', jobKey: 'deploy', source }, { eventName: 'again', payload: {} });
    assert.deepEqual(answer, { error: `event again not emitted: it would be the ${MAX_CHAIN_DEPTH + 1}th event of a chain, and chains stop at ${MAX_CHAIN_DEPTH}` });
  });

  it('a repository takes events from itself, from names and owner/* patterns it lists, and from nobody else', () => {
    const repo = { name: 'acme/docs', provider: 'local' as const, path: '/x', cloneUrl: null, defaultBranch: null, token: null, acceptsEventsFrom: ['acme/*', 'partner/lib'] };
    assert.deepEqual(['acme/docs', 'acme/app', 'partner/lib', 'partner/other', 'acmecorp/app'].map((sender) => acceptsEventsFrom(repo, sender)), [true, true, true, false, false]);
    assert.equal(acceptsEventsFrom({ ...repo, acceptsEventsFrom: [] }, 'acme/app'), false);
  });

  it('the run an event started names the event and the run that sent it', () => {
    const event = normalizeEmittedEvent(body());
    assert.ok(!isDropped(event));
    assert.deepEqual(triggeredByOf({ event: event.envelope }), { eventName: 'deployed', runId: 'run-1', jobKey: 'deploy', repository: 'acme/app' });
    assert.equal(triggeredByOf({ event: { type: 'push', payload: {} } }), null);
    assert.equal(triggeredByOf(null), null);
  });
});
