import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { machineGraphs } from '../../../visualize/graph.ts';
import type { MachineGraph } from '../../../visualize/graph.ts';

function graph(id: string): MachineGraph {
  const found = machineGraphs().find((g) => g.id === id);
  assert.ok(found, `graph ${id}`);
  return found;
}

describe('machine graphs', () => {
  it('lists the run, job, concurrency, scaler and scaler-agent charts, each node with a parent that exists', () => {
    assert.deepEqual(machineGraphs().map((g) => g.id), ['run', 'job', 'concurrency', 'scaler', 'scalerAgent']);
    for (const g of machineGraphs()) {
      const ids = new Set(g.nodes.map((n) => n.id));
      assert.equal(ids.size, g.nodes.length, `${g.id}: unique node ids`);
      assert.deepEqual(g.nodes.filter((n) => n.parent === null).map((n) => n.id), [g.id]);
      for (const node of g.nodes) if (node.parent) assert.ok(ids.has(node.parent), `${node.id}: parent ${node.parent}`);
      for (const edge of g.edges) assert.ok(ids.has(edge.source) && ids.has(edge.target), `${edge.id}: ends exist`);
      assert.equal(new Set(g.edges.map((e) => e.id)).size, g.edges.length, `${g.id}: unique edge ids`);
    }
  });

  it('types nodes (compound, atomic, final) and marks each initial child', () => {
    const job = graph('job');
    const byId = new Map(job.nodes.map((n) => [n.id, n]));
    assert.equal(byId.get('job.assigned')?.type, 'compound');
    assert.equal(byId.get('job.assigned.running.started')?.type, 'atomic');
    assert.equal(byId.get('job.timed_out_stale')?.type, 'final');
    assert.deepEqual(job.nodes.filter((n) => n.initial).map((n) => n.id).sort(), [
      'job.assigned.dispatched',
      'job.assigned.dispatched.ackOverdue.held.asking',
      'job.assigned.dispatched.ackOverdue.settling.asking',
      'job.assigned.dispatched.ackOverdue.unheld',
      'job.assigned.dispatched.ackOverdue.unheld.asking',
      'job.assigned.dispatched.awaitingAck',
      'job.assigned.running.accepted',
      'job.created',
      'job.recovering.beforeStart',
      'job.waiting.gated',
      'job.withdrawing.cancelling',
      'job.withdrawing.fenced.waiting',
    ]);
    assert.match(byId.get('job.recovering')?.description ?? '', /reclaim/);
  });

  it('labels edges with their event and guard name, eventless ones as always', () => {
    const job = graph('job');
    const ackTimeout = job.edges.find((e) => e.event === 'timer.ack.expired');
    assert.deepEqual(
      ackTimeout && { source: ackTimeout.source, target: ackTimeout.target, guard: ackTimeout.guard, kind: ackTimeout.kind },
      { source: 'job.assigned.dispatched.awaitingAck', target: 'job.assigned.dispatched.ackOverdue', guard: 'isCurrentDeadline', kind: 'external' },
    );
    const reclaim = job.edges.filter((e) => e.source.startsWith('job.recovering') && e.event === 'agent.job.reclaim');
    assert.deepEqual(reclaim.map((e) => [e.source, e.target, e.guard]), [
      ['job.recovering.beforeStart', 'job.assigned.running.accepted', 'fromAssignedAgent'],
      ['job.recovering.afterStart', 'job.assigned.running.started', 'fromAssignedAgent'],
    ]);
    const requeued = job.edges.filter((e) => e.source === 'job.requeued');
    assert.deepEqual(requeued.map((e) => [e.event, e.target, e.guard, e.kind]), [
      ['always', 'job.requeueing', 'attemptsLeft', 'always'],
      ['always', 'job.failed', null, 'always'],
    ]);
    const heartbeat = job.edges.find((e) => e.event === 'agent.job.heartbeat');
    assert.equal(heartbeat?.kind, 'internal');
    assert.equal(heartbeat.target, heartbeat.source);
  });

  it('draws the scaler agent deadlines as transitions of their states, and its two ends as final states', () => {
    const agent = graph('scalerAgent');
    const expiries = agent.edges.filter((e) => e.event.startsWith('xstate.after.')).map((e) => [e.source, e.target, e.actions.join(',')]);
    assert.deepEqual(expiries, [
      ['scalerAgent.spawning', 'scalerAgent.destroying', 'retire'],
      ['scalerAgent.idle', 'scalerAgent.destroying', 'retire'],
    ]);
    assert.deepEqual(agent.nodes.filter((n) => n.type === 'final').map((n) => n.id), ['scalerAgent.destroyed', 'scalerAgent.spawnFailed']);
    const scaler = graph('scaler');
    assert.ok(!scaler.edges.some((e) => e.event === 'scaler.tick'), 'no periodic tick');
    assert.ok(scaler.edges.some((e) => e.event === 'scaler.agent.ended' && e.source === 'scaler.active'));
  });

  it('covers the run chart: cancel and the workflow deadline once on the open states\' parent, and the forwarding of job events as internal edges', () => {
    const run = graph('run');
    const cancels = run.edges.filter((e) => e.event === 'run.cancel').map((e) => [e.source, e.target, e.kind]);
    assert.deepEqual(cancels, [
      ['run.active', 'run.cancelling', 'external'],
      ['run.cancelling', 'run.cancelling', 'internal'],
    ]);
    const expiries = run.edges.filter((e) => e.event === 'timer.workflow.expired').map((e) => e.source);
    assert.deepEqual(expiries, ['run.active']);
    const open = run.nodes.filter((n) => n.parent === 'run.active').map((n) => n.id).sort();
    assert.deepEqual(open, ['run.active.held', 'run.active.pending', 'run.active.running']);
    const forwarded = run.edges.filter((e) => e.source === 'run' && e.kind === 'internal');
    assert.ok(forwarded.some((e) => e.event === 'agent.job.ack' && e.guard === 'targetsOpenJob'));
  });
});
