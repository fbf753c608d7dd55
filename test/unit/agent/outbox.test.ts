import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Outbox, type Link } from '../../../src/reference-agent/outbox.ts';
import type { AgentMessage, JobStatusMessage } from '../../../src/ws/messages.ts';

class FakeLink implements Link {
  registered = false;
  failWrites = false;
  readonly written: AgentMessage[] = [];

  write(message: AgentMessage): Promise<boolean> {
    if (this.failWrites) return Promise.resolve(false);
    this.written.push(message);
    return Promise.resolve(true);
  }
}

const heartbeat = (jobId: string, timestamp: number): AgentMessage => ({ type: 'job.heartbeat', runId: 'r', jobId, timestamp });
const terminal = (jobId: string): JobStatusMessage => ({
  type: 'job.status',
  messageId: `m-${jobId}`,
  runId: 'r',
  jobId,
  state: 'success',
  timestamp: 1,
});
const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('outbox send paths', () => {
  it('drops direct messages while not registered and writes them while registered', () => {
    const link = new FakeLink();
    const outbox = new Outbox(link, 10, () => undefined);
    outbox.direct(heartbeat('a', 1));
    link.registered = true;
    outbox.direct(heartbeat('b', 2));
    assert.deepEqual(link.written.map((m) => ('jobId' in m ? m.jobId : '')), ['b']);
  });

  it('keeps a ring of buffered messages, oldest dropped, replayed in order after the gap marker', () => {
    const link = new FakeLink();
    const outbox = new Outbox(link, 3, () => undefined);
    for (let i = 1; i <= 5; i += 1) outbox.buffered(heartbeat('j', i));
    link.registered = true;
    const summary = outbox.replay((s) => ({ type: 'agent.log', agentId: 'a', lines: [`${s.replayed}/${s.dropped}`] }));
    assert.deepEqual(summary, { replayed: 3, dropped: 2, storedStatuses: 0 });
    assert.deepEqual(
      link.written.map((m) => (m.type === 'job.heartbeat' ? m.timestamp : m.type === 'agent.log' ? m.lines[0] : '')),
      ['3/2', 3, 4, 5],
    );
  });

  it('stores a terminal status it cannot send, lists it as in flight and sends it after the ring', async () => {
    const link = new FakeLink();
    const outbox = new Outbox(link, 10, () => undefined);
    outbox.terminal(terminal('offline'));
    link.registered = true;
    link.failWrites = true;
    outbox.terminal(terminal('failed-write'));
    await flush();
    assert.deepEqual(outbox.pendingTerminalJobs(), [
      { jobId: 'offline', runId: 'r' },
      { jobId: 'failed-write', runId: 'r' },
    ]);
    assert.ok(outbox.hasPendingTerminal('offline'));
    link.failWrites = false;
    link.registered = false;
    outbox.buffered(heartbeat('offline', 9));
    link.registered = true;
    outbox.replay(() => undefined);
    await flush();
    assert.deepEqual(link.written.map((m) => m.type), ['job.heartbeat', 'job.status', 'job.status']);
    assert.deepEqual(outbox.pendingTerminalJobs(), []);
  });

  it('paces a large replay within the rate limit: a new job\'s ack goes out at once, a replayed job\'s later frames wait their turn', () => {
    const link = new FakeLink();
    const outbox = new Outbox(link, 5000, () => undefined);
    for (let i = 0; i < 1000; i += 1) outbox.buffered(heartbeat(`old-${i % 8}`, i));
    link.registered = true;
    outbox.replay(() => undefined);
    const first = link.written.length;
    assert.ok(first > 0 && first < 200, `only a burst is written at once (${first})`);
    outbox.direct({ type: 'job.ack', messageId: 'm', runId: 'r', jobId: 'new', timestamp: 1 });
    outbox.direct({ type: 'job.ack', messageId: 'm', runId: 'r', jobId: 'old-0', timestamp: 1 });
    assert.equal(link.written.at(-1)?.type, 'job.ack', 'the live ack is not queued behind the replay');
    assert.equal(link.written.length, first + 1, 'the replayed job\'s frame keeps its place behind its replay');
    assert.equal(outbox.pendingCount, 1000 - first + 1);
    link.registered = false;
    outbox.disconnected();
    assert.equal(outbox.pendingCount, 1000 - first + 1, 'what was not sent waits for the next connection');
  });
});
