import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { pino } from 'pino';
import { Redis } from 'ioredis';
import { deliveryRecorder, finishDeliveries, loadDelivery, recordDeliveries, recordDelivery, retryDelivery } from '../../../src/db/deliveries.ts';
import type { DeliveryKey } from '../../../src/db/deliveries.ts';
import type { Schema } from '../../../src/db/schema.ts';
import { BullMqDeliveryQueue } from '../../../src/queue/bullmq-queue.ts';
import { EmbeddedDeliveryQueue, MAX_DIRECT, MAX_DIRECT_BYTES } from '../../../src/queue/embedded-queue.ts';
import { isRecorded } from '../../../src/queue/delivery-queue.ts';
import type { DeliveryProcessor, DeliveryQueue } from '../../../src/queue/delivery-queue.ts';
import { skipReason, withTestDatabase } from '../../support/database.ts';
import { eventually } from '../../support/runtime.ts';

const log = pino({ level: 'silent' });
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

async function redisReason(): Promise<string | undefined> {
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  try {
    await redis.connect();
    await redis.ping();
    return undefined;
  } catch (error) {
    const reason = `Redis at ${REDIS_URL} is unreachable: ${String(error)}`;
    if (process.env.CI === 'true') throw new Error(`${reason} (CI=true: failing instead of skipping)`, { cause: error });
    return reason;
  } finally {
    redis.disconnect();
  }
}

type Kind = 'embedded' | 'bullmq';

function makeQueue(kind: Kind, db: Kysely<Schema>, process: DeliveryProcessor, worker: string): DeliveryQueue {
  if (kind === 'embedded') return new EmbeddedDeliveryQueue(db, process, worker, Date.now, log);
  return new BullMqDeliveryQueue({ redisUrl: REDIS_URL, queueName: `sy-test-${worker}-${Date.now()}`, db, process, worker, now: Date.now, log });
}

/** A processor that records what it saw, failing the first `failures` attempts of each delivery. */
function recordingProcessor(db: Kysely<Schema>, failures: number) {
  const seen: string[] = [];
  const process: DeliveryProcessor = async (key, worker, loaded) => {
    // As the real processor does: a hand-over whose recording came to nothing writes nothing.
    if (loaded && !(await isRecorded(loaded))) return 'done';
    const delivery = await loadDelivery(db, key);
    seen.push(key.deliveryId);
    if ((delivery?.attempts ?? 0) < failures) {
      await retryDelivery(db, { ...key, worker, error: 'transient: try later', nextAttemptAt: Date.now() });
      return { retryAt: Date.now() };
    }
    await finishDeliveries(db, [{ ...key, worker, status: 'processed', outcome: { ok: true }, now: Date.now() }]);
    return 'done';
  };
  return { seen, process };
}

async function record(db: Kysely<Schema>, deliveryId: string): Promise<DeliveryKey> {
  await recordDelivery(db, { source: 'github', deliveryId, eventName: 'push', headers: {}, body: Buffer.from('{}'), now: Date.now() });
  return { source: 'github', deliveryId };
}

async function statuses(db: Kysely<Schema>) {
  const rows = await db.selectFrom('deliveries').select(['delivery_id', 'status', 'attempts']).orderBy('delivery_id').execute();
  return rows.map((r) => `${r.delivery_id}:${r.status}:${r.attempts}`);
}

const redisSkip = await redisReason();

for (const kind of ['embedded', 'bullmq'] as const) {
  describe(`intake queue: ${kind}`, { skip: (await skipReason('external')) ?? (kind === 'bullmq' ? redisSkip : undefined) }, () => {
    it('processes every accepted delivery exactly once, including ones recorded while it was down', async () => {
      await withTestDatabase('external', async ({ db }) => {
        const before = await record(db, 'd-before-start');
        const { seen, process } = recordingProcessor(db, 0);
        const queue = makeQueue(kind, db, process, 'w1');
        await queue.start();
        for (let i = 0; i < 20; i++) queue.notify(await record(db, `d-${String(i).padStart(2, '0')}`));
        await eventually(async () => (await statuses(db)).every((s) => s.includes(':processed:')), 15_000, 'all processed');
        await queue.stop();
        assert.equal(seen.length, 21);
        assert.equal(new Set(seen).size, 21, 'nothing processed twice');
        assert.ok(seen.includes(before.deliveryId), 'a delivery recorded before start is resumed (B3)');
      });
    });

    it('retries a transient failure with the same delivery until it succeeds', async () => {
      await withTestDatabase('external', async ({ db }) => {
        const { seen, process } = recordingProcessor(db, 2);
        const queue = makeQueue(kind, db, process, 'w2');
        await queue.start();
        queue.notify(await record(db, 'd-flaky'));
        await eventually(async () => (await statuses(db))[0] === 'd-flaky:processed:2', 20_000, 'processed after two retries');
        await queue.stop();
        assert.deepEqual(seen, ['d-flaky', 'd-flaky', 'd-flaky']);
      });
    });

    it('a delivery claimed by a worker that died is picked up after its lease', async () => {
      await withTestDatabase('external', async ({ db }) => {
        const key = await record(db, 'd-orphan');
        await db.updateTable('deliveries').set({ status: 'processing', claimed_by: 'dead-worker', claim_until: Date.now() - 1 }).execute();
        const { seen, process } = recordingProcessor(db, 0);
        const queue = makeQueue(kind, db, process, 'w3');
        await queue.start();
        await eventually(async () => (await statuses(db))[0] === 'd-orphan:processed:0', 15_000, 'orphan processed');
        await queue.stop();
        assert.deepEqual(seen, [key.deliveryId]);
      });
    });
  });
}

describe('intake queue: embedded, claimed as it is recorded', { skip: await skipReason('external') }, () => {
  const delivery = (deliveryId: string) => ({ source: 'github', deliveryId, eventName: 'push', headers: {}, body: Buffer.from('{}') });

  it('a delivery recorded with the queue’s claim is processed at once, with no sweep and no read back', async () => {
    await withTestDatabase('external', async ({ db }) => {
      const seen: { id: string; loaded: boolean; status: string | undefined }[] = [];
      const process: DeliveryProcessor = async (key, worker, loaded) => {
        // Handed over while its row is written: the processor waits for it before it writes.
        if (loaded && !(await isRecorded(loaded))) return 'done';
        const row = await db.selectFrom('deliveries').select(['status', 'claimed_by']).where('delivery_id', '=', key.deliveryId).executeTakeFirst();
        seen.push({ id: key.deliveryId, loaded: loaded !== undefined, status: `${row?.status}:${row?.claimed_by}` });
        await finishDeliveries(db, [{ ...key, worker, status: 'processed', outcome: { ok: true }, now: Date.now() }]);
        return 'done';
      };
      const queue = new EmbeddedDeliveryQueue(db, process, 'w-direct', Date.now, log);
      // Not started: no sweep runs, so only the hand-over can process it.
      const claim = queue.claimAtIntake(2);
      assert.ok(claim === null, 'a stopped queue claims nothing');
      await queue.start();
      const given = queue.claimAtIntake(2);
      assert.ok(given);
      const recording = recordDelivery(db, { ...delivery('d-direct'), now: Date.now(), claim: given });
      queue.processClaimed({ ...delivery('d-direct'), receivedAt: Date.now(), status: 'processing', attempts: 0, recording });
      await queue.idle();
      // Claimed before the queue stopped, handed over after: left to its lease, not processed by a stopped queue.
      const late = queue.claimAtIntake(2);
      assert.ok(late);
      const lateRecording = recordDelivery(db, { ...delivery('d-late'), now: Date.now(), claim: late });
      await queue.stop();
      queue.processClaimed({ ...delivery('d-late'), receivedAt: Date.now(), status: 'processing', attempts: 0, recording: lateRecording });
      assert.equal(await lateRecording, true);
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual(seen, [{ id: 'd-direct', loaded: true, status: 'processing:w-direct' }]);
      assert.deepEqual(await statuses(db), ['d-direct:processed:0', 'd-late:processing:0']);
    });
  });

  it('a duplicate’s hand-over writes nothing; a claimed delivery whose worker died is swept after the lease', async () => {
    await withTestDatabase('external', async ({ db }) => {
      const { seen, process } = recordingProcessor(db, 0);
      const queue = new EmbeddedDeliveryQueue(db, process, 'w-dup', Date.now, log);
      await queue.start();
      await recordDelivery(db, { ...delivery('d-dup'), now: Date.now() });
      const claim = queue.claimAtIntake(2);
      const recording = recordDelivery(db, { ...delivery('d-dup'), now: Date.now(), claim });
      queue.processClaimed({ ...delivery('d-dup'), receivedAt: Date.now(), status: 'processing', attempts: 0, recording });
      assert.equal(await recording, false);
      // A coordinator that claimed at intake and died before processing: the claim runs out, the sweep takes it.
      await recordDelivery(db, { ...delivery('d-died'), now: Date.now(), claim: { worker: 'dead', claimUntil: Date.now() - 1 } });
      await eventually(async () => (await statuses(db)).every((s) => s.includes(':processed:')), 15_000, 'both processed');
      await queue.stop();
      assert.deepEqual([...seen].sort(), ['d-died', 'd-dup'], 'each processed once, by the sweep');
    });
  });
});

describe('intake queue: embedded, how much it takes at once', { skip: await skipReason('external') }, () => {
  it(`claims at intake stop at ${MAX_DIRECT} deliveries or ${MAX_DIRECT_BYTES / 1024 / 1024} MiB of bodies held, one is always taken when none is held, and each frees its room once processed`, async () => {
    await withTestDatabase('external', async ({ db }) => {
      const release: (() => void)[] = [];
      const process: DeliveryProcessor = () => new Promise((resolve) => release.push(() => resolve('done')));
      const queue = new EmbeddedDeliveryQueue(db, process, 'w-room', Date.now, log);
      await queue.start();
      const hand = (deliveryId: string, bytes: number) =>
        queue.processClaimed({ source: 'github', deliveryId, eventName: 'push', headers: {}, body: Buffer.alloc(bytes), receivedAt: Date.now(), status: 'processing', attempts: 0, recording: Promise.resolve(true) });
      try {
        const big = MAX_DIRECT_BYTES + 1;
        assert.ok(queue.claimAtIntake(big), 'a body past the budget is taken when nothing is held');
        hand('d-big', big);
        assert.equal(queue.claimAtIntake(10), null, 'nothing more while it is held');
        release.shift()?.();
        await eventually(() => queue.claimAtIntake(10) !== null, 5_000, 'its room freed');
        hand('d-small-0', 10);
        for (let n = 1; n < MAX_DIRECT; n++) {
          assert.ok(queue.claimAtIntake(10), `claim ${n}`);
          hand(`d-small-${n}`, 10);
        }
        assert.equal(queue.claimAtIntake(10), null, `no claim past ${MAX_DIRECT} held`);
        for (const resolve of release.splice(0)) resolve();
        await eventually(() => queue.claimAtIntake(MAX_DIRECT_BYTES - 10) !== null, 5_000, 'all room freed');
        hand('d-last', MAX_DIRECT_BYTES - 10);
        assert.equal(queue.claimAtIntake(11), null, 'the bytes held are counted');
        assert.ok(queue.claimAtIntake(10), 'up to the budget exactly');
        hand('d-fits', 10);
      } finally {
        for (const resolve of release.splice(0)) resolve();
        await queue.stop();
      }
    });
  });
});

describe('delivery outcomes', { skip: await skipReason('external') }, () => {
  it('many are written in one statement, each only by the worker that holds its claim', async () => {
    await withTestDatabase('external', async ({ db }) => {
      const claim = { worker: 'w-batch', claimUntil: Date.now() + 60_000 };
      for (const id of ['d-1', 'd-2', 'd-3']) {
        await recordDelivery(db, { source: 'github', deliveryId: id, eventName: 'push', headers: {}, body: Buffer.from('{}'), now: Date.now(), claim });
      }
      await finishDeliveries(db, [
        { source: 'github', deliveryId: 'd-1', worker: 'w-batch', status: 'processed', outcome: { runIds: ['r-1'] }, now: 7 },
        { source: 'github', deliveryId: 'd-2', worker: 'w-batch', status: 'ignored', outcome: { reason: 'no workflow matched' }, now: 8 },
        { source: 'github', deliveryId: 'd-3', worker: 'someone-else', status: 'processed', outcome: {}, now: 9 },
      ]);
      const rows = await db.selectFrom('deliveries').select(['delivery_id', 'status', 'outcome', 'processed_at', 'claimed_by']).orderBy('delivery_id').execute();
      assert.deepEqual(rows, [
        { delivery_id: 'd-1', status: 'processed', outcome: { runIds: ['r-1'] }, processed_at: 7, claimed_by: null },
        { delivery_id: 'd-2', status: 'ignored', outcome: { reason: 'no workflow matched' }, processed_at: 8, claimed_by: null },
        { delivery_id: 'd-3', status: 'processing', outcome: null, processed_at: null, claimed_by: 'w-batch' },
      ]);
    });
  });
});

describe('recording deliveries', { skip: await skipReason('external') }, () => {
  const delivery = (deliveryId: string, eventName = 'push') => ({ source: 'github', deliveryId, eventName, headers: { 'x-github-event': eventName }, body: Buffer.from(`{"id":"${deliveryId}"}`), now: 5 });

  it('many in one statement: each is new once, whether its twin is stored or earlier in the list', async () => {
    await withTestDatabase('external', async ({ db }) => {
      await recordDelivery(db, delivery('stored'));
      const fresh = await recordDeliveries(db, [delivery('a'), delivery('stored'), delivery('b'), delivery('a')]);
      assert.deepEqual(fresh, [true, false, true, false]);
      const rows = await db.selectFrom('deliveries').select(['delivery_id', 'body', 'headers', 'status']).orderBy('delivery_id').execute();
      assert.deepEqual(rows.map((row) => [row.delivery_id, row.body.toString(), row.headers, row.status]), [
        ['a', '{"id":"a"}', { 'x-github-event': 'push' }, 'received'],
        ['b', '{"id":"b"}', { 'x-github-event': 'push' }, 'received'],
        ['stored', '{"id":"stored"}', { 'x-github-event': 'push' }, 'received'],
      ]);
    });
  });

  it('a delivery whose INSERT fails for a moment (a reset connection) is tried again and recorded, not answered 5xx', async () => {
    await withTestDatabase('external', async ({ db }) => {
      // The fault, injected as the statement is built, before anything reaches the database.
      let resets = 2;
      const flaky = db.withPlugin({
        transformQuery: (args) => {
          if (resets > 0 && args.node.kind === 'InsertQueryNode') {
            resets -= 1;
            throw Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
          }
          return args.node;
        },
        transformResult: (args) => Promise.resolve(args.result),
      });
      assert.equal(await deliveryRecorder(flaky)(delivery('after-resets')), true);
      assert.equal(resets, 0, 'both resets were met');
      const ids = await db.selectFrom('deliveries').select('delivery_id').execute();
      assert.deepEqual(ids.map((row) => row.delivery_id), ['after-resets']);
    });
  });

  it('a batch the database refuses is recorded one delivery at a time: the bad one fails alone', async () => {
    await withTestDatabase('external', async ({ db }) => {
      const record = deliveryRecorder(db);
      const first = record(delivery('first'));
      // Recorded together while the first INSERT is in flight; Postgres text cannot hold a NUL byte.
      const batch = await Promise.allSettled([record(delivery('ok-1')), record(delivery('bad', 'pu\u0000sh')), record(delivery('ok-2')), record(delivery('first'))]);
      assert.equal(await first, true);
      assert.deepEqual(batch.map((o) => (o.status === 'fulfilled' ? o.value : 'rejected')), [true, 'rejected', true, false]);
      const ids = await db.selectFrom('deliveries').select('delivery_id').orderBy('delivery_id').execute();
      assert.deepEqual(ids.map((row) => row.delivery_id), ['first', 'ok-1', 'ok-2']);
    });
  });
});
