import type { Kysely } from 'kysely';
import { Batcher, type BatchResults } from '../../lib/batcher.ts';
import { storeRunKeys, type SealedKeyRow } from '../db/secrets.ts';
import type { Schema } from '../db/schema.ts';
import { generateX25519InPool, seal, type MasterKeys } from './crypto.ts';

/** Run keys written by one statement at most. */
const MAX_BATCH = 500;

type RunKeyRow = SealedKeyRow & { runId: string };

/**
 * Makes every new run's key pair (docs/http-api.md#secrets) on libuv's thread pool and stores the
 * pairs a batch at a time: the keys made while one INSERT is in flight go in the next, so a burst
 * of new runs costs the coordinator's thread no key generation and the database a few statements,
 * not one per run. A run's public key is answered once its row is stored, as before.
 */
export class RunKeyMaker {
  private readonly writer: Batcher<RunKeyRow, string>;

  constructor(private readonly deps: { db: Kysely<Schema>; keys: () => MasterKeys; now: () => number }) {
    this.writer = new Batcher((rows) => this.store(rows), MAX_BATCH);
  }

  /** The run's public key: this pair's once stored, or the one the run already had. */
  async make(runId: string): Promise<string> {
    const keys = this.deps.keys();
    const pair = await generateX25519InPool();
    const sealed = seal(keys, pair.privateKeyDer, `run-key:${runId}`);
    return this.writer.add({ runId, publicKey: pair.publicKey, privateKey: sealed.ciphertext, keyVersion: sealed.keyVersion });
  }

  private async store(rows: RunKeyRow[]): Promise<BatchResults<string>> {
    const stored = await storeRunKeys(this.deps.db, rows, this.deps.now());
    return rows.map((row) => stored.get(row.runId) ?? new Error(`run ${row.runId}'s key was neither stored nor found`));
  }
}
