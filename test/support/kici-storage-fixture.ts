import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { WireRecord } from './kici-wire-fixture.ts';

/** The stock agent 0.1.24 against Switchyard with storage and event requests (test/unit/ws/kici-storage-fixture.test.ts). */
export const STORAGE_SESSION_FIXTURE = join(dirname(fileURLToPath(import.meta.url)), '../fixtures/kici-0.1.24-storage-session.jsonl');

export function storageSessionRecords(): WireRecord[] {
  return readFileSync(STORAGE_SESSION_FIXTURE, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as WireRecord);
}
