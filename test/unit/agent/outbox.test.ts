import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Outbox, type Link } from '../../../src/agent/outbox.ts';
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
    const outbox = new Outbox(link, 10);
    outbox.direct(heartbeat('a', 1));
    link.registered = true;
    outbox.direct(heartbeat('b', 2));
    assert.deepEqual(link.written.map((m) => ('jobId' in m ? m.jobId : '')), ['b']);
  });

  it('keeps a ring of buffered messages, oldest dropped, replayed in order after the gap marker', () => {
    const link = new FakeLink();
    const outbox = new Outbox(link, 3);
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
    const outbox = new Outbox(link, 10);
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
});
