import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pino } from 'pino';
import type { LogChunkInput } from '../../../src/db/job-logs.ts';
import { LogWriter } from '../../../src/ws/log-writer.ts';

const chunk = (line: string): LogChunkInput => ({ runId: 'r', jobKey: 'build', dispatchId: 'd', stepIndex: 0, lines: [line], sentAt: 0 }) as unknown as LogChunkInput;
const failure = (code: string) => Object.assign(new Error(code === 'ECONNREFUSED' ? 'connect ECONNREFUSED 127.0.0.1:5432' : 'invalid input syntax'), { code });

describe('LogWriter when the database fails', () => {
  it('a database that is unreachable for a while loses no line: the batch waits, then every line is stored in order', async () => {
    const stored: string[] = [];
    // Longer than every try the writer had before (4 per batch, then 4 per chunk): it dropped all three.
    let outage = 20;
    const writer = new LogWriter(
      (chunks) => {
        if (outage-- > 0) return Promise.reject(failure('ECONNREFUSED'));
        stored.push(...chunks.flatMap((c) => c.lines));
        return Promise.resolve();
      },
      pino({ level: 'silent' }),
      1,
    );
    for (const line of ['one', 'two', 'three']) writer.add(chunk(line));
    assert.ok(writer.backlogBytes > 0, 'held while the database is away');
    await writer.flushed('d');
    assert.deepEqual(stored, ['one', 'two', 'three']);
    assert.equal(writer.backlogBytes, 0);
  });

  it('a chunk the database refuses is given up after its attempts, alone: the others are stored', async () => {
    const stored: string[] = [];
    const writer = new LogWriter(
      (chunks) => {
        if (chunks.some((c) => c.lines.includes('bad'))) return Promise.reject(failure('22P02'));
        stored.push(...chunks.flatMap((c) => c.lines));
        return Promise.resolve();
      },
      pino({ level: 'silent' }),
      1,
    );
    for (const line of ['one', 'bad', 'three']) writer.add(chunk(line));
    await writer.flushed('d');
    assert.deepEqual(stored, ['one', 'three']);
  });
});
