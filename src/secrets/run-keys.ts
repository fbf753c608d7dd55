import type { Kysely } from 'kysely';
import { storeRunKeys, type SealedKeyRow } from '../db/secrets.ts';
import type { Schema } from '../db/schema.ts';
import { generateX25519InPool, seal, type MasterKeys } from './crypto.ts';

/** Run keys written by one statement at most. */
const MAX_BATCH = 500;

interface Waiting {
  row: SealedKeyRow & { runId: string };
  resolve: (publicKey: string) => void;
  reject: (error: unknown) => void;
}

/**
 * Makes every new run's key pair (docs/http-api.md#secrets) on libuv's thread pool and stores the
 * pairs a batch at a time: the keys made while one INSERT is in flight go in the next, so a burst
 * of new runs costs the coordinator's thread no key generation and the database a few statements,
 * not one per run. A run's public key is answered once its row is stored, as before.
 */
export class RunKeyMaker {
  private waiting: Waiting[] = [];
  private writing = false;

  constructor(private readonly deps: { db: Kysely<Schema>; keys: () => MasterKeys; now: () => number }) {}

  /** The run's public key: this pair's once stored, or the one the run already had. */
  async make(runId: string): Promise<string> {
    const keys = this.deps.keys();
    const pair = await generateX25519InPool();
    const sealed = seal(keys, pair.privateKeyDer, `run-key:${runId}`);
    return new Promise((resolve, reject) => {
      this.waiting.push({ row: { runId, publicKey: pair.publicKey, privateKey: sealed.ciphertext, keyVersion: sealed.keyVersion }, resolve, reject });
      if (!this.writing) void this.write();
    });
  }

  private async write(): Promise<void> {
    this.writing = true;
    while (this.waiting.length > 0) {
      const batch = this.waiting.splice(0, MAX_BATCH);
      try {
        const stored = await storeRunKeys(this.deps.db, batch.map((waiting) => waiting.row), this.deps.now());
        for (const { row, resolve, reject } of batch) {
          const publicKey = stored.get(row.runId);
          if (publicKey === undefined) reject(new Error(`run ${row.runId}'s key was neither stored nor found`));
          else resolve(publicKey);
        }
      } catch (error) {
        for (const { reject } of batch) reject(error);
      }
    }
    this.writing = false;
  }
}
