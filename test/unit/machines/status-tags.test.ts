import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { initialTransition } from 'xstate';
import type { AnyStateNode, StateValue } from 'xstate';
import { jobMachine } from '../../../machines/job.machine.ts';
import { runMachine } from '../../../machines/run.machine.ts';
import { jobStatusOf, runStatusOf } from '../../../machines/projection.ts';
import { JOB_STATUSES, RUN_STATUSES } from '../../../machines/status.ts';
import type { RunStatus } from '../../../machines/status.ts';
import type { JobStatus } from '../../../machines/status.ts';
import { jobInput, jobPlan, runInput } from '../../support/machines.ts';

/** The status every resting state shows; a state added to the chart must be added here. */
const EXPECTED: Record<string, JobStatus> = {
  'waiting.gated': 'pending',
  'waiting.approval': 'pending',
  'waiting.concurrency': 'pending',
  'waiting.agent': 'pending',
  queued: 'queued',
  'assigned.dispatched.awaitingAck': 'queued',
  'assigned.dispatched.ackOverdue.unheld.asking': 'queued',
  'assigned.dispatched.ackOverdue.unheld.waiting': 'queued',
  'assigned.dispatched.ackOverdue.held.asking': 'queued',
  'assigned.dispatched.ackOverdue.held.waiting': 'queued',
  'assigned.dispatched.ackOverdue.settling.asking': 'queued',
  'assigned.dispatched.ackOverdue.settling.waiting': 'queued',
  'withdrawing.cancelling': 'queued',
  'withdrawing.fenced.waiting': 'queued',
  'withdrawing.fenced.asking': 'queued',
  'assigned.running.accepted': 'running',
  'assigned.running.started': 'running',
  'assigned.cancelling': 'cancelling',
  'recovering.beforeStart': 'recovering',
  'recovering.afterStart': 'recovering',
  'recovering.unlistedBeforeStart': 'recovering',
  'recovering.unlistedAfterStart': 'recovering',
  success: 'success',
  failed: 'failed',
  cancelled: 'cancelled',
  skipped: 'skipped',
  timed_out_stale: 'timed_out_stale',
  drift_dropped: 'drift_dropped',
};

/** Eventless states the chart passes through within one step: they never rest, so show nothing. */
const TRANSIENT = ['created', 'admitted', 'queueExpired', 'requeued', 'requeueing'];

function leaves(node: AnyStateNode): AnyStateNode[] {
  const children = Object.values(node.states);
  return children.length === 0 ? [node] : children.flatMap(leaves);
}

/** Tags of a leaf and its ancestors: the tags a snapshot resting there has. */
function tagsOn(node: AnyStateNode): string[] {
  const own = [...node.tags];
  return node.parent ? [...tagsOn(node.parent), ...own] : own;
}

function isTransient(node: AnyStateNode): boolean {
  return (node.always ?? []).some((transition) => transition.guard === undefined);
}

function valueOf(path: readonly string[]): StateValue {
  const [head, ...rest] = path;
  if (head === undefined) throw new Error('the root has no value');
  return rest.length === 0 ? head : { [head]: valueOf(rest) };
}

const LEAVES = leaves(jobMachine.root);
const key = (node: AnyStateNode) => node.path.join('.');

describe('job machine: status comes from tags', () => {
  it('every transient state has an unconditional eventless exit and no status tag', () => {
    assert.deepEqual(LEAVES.filter(isTransient).map(key).sort(), [...TRANSIENT].sort());
    for (const node of LEAVES.filter(isTransient)) {
      assert.deepEqual(tagsOn(node).filter((tag) => tag.startsWith('status:')), [], key(node));
    }
  });

  it('every resting state carries exactly one status tag, the status it shows', () => {
    const resting = LEAVES.filter((node) => !isTransient(node));
    assert.deepEqual(resting.map(key).sort(), Object.keys(EXPECTED).sort());
    for (const node of resting) {
      const statuses = tagsOn(node).filter((tag) => tag.startsWith('status:'));
      assert.deepEqual(statuses, [`status:${EXPECTED[key(node)]}`], key(node));
    }
  });

  it('every status a job can show is shown by some state', () => {
    assert.deepEqual([...new Set(Object.values(EXPECTED))].sort(), [...JOB_STATUSES].sort());
  });

  it('the projection reads the status from a stored snapshot through the chart', () => {
    const [initial] = initialTransition(jobMachine, jobInput());
    for (const node of LEAVES.filter((leaf) => !isTransient(leaf))) {
      const stored = { value: valueOf(node.path), context: initial.context };
      assert.equal(jobStatusOf(stored), EXPECTED[key(node)], key(node));
    }
  });

  it('waits-for-agent marks exactly the states a placement answers; holds-slot every assigned state', () => {
    const tagged = (tag: string) => LEAVES.filter((node) => tagsOn(node).includes(tag)).map(key).sort();
    assert.deepEqual(tagged('waits-for-agent'), ['queued', 'waiting.agent']);
    const dispatched = ['assigned.dispatched.ackOverdue.held.asking', 'assigned.dispatched.ackOverdue.held.waiting', 'assigned.dispatched.ackOverdue.settling.asking', 'assigned.dispatched.ackOverdue.settling.waiting'];
    const unheld = ['assigned.dispatched.ackOverdue.unheld.asking', 'assigned.dispatched.ackOverdue.unheld.waiting', 'assigned.dispatched.awaitingAck'];
    assert.deepEqual(tagged('holds-slot'), ['assigned.cancelling', ...dispatched, ...unheld, 'assigned.running.accepted', 'assigned.running.started']);
    assert.deepEqual(tagged('awaits-reclaim'), ['recovering.afterStart', 'recovering.beforeStart', 'recovering.unlistedAfterStart', 'recovering.unlistedBeforeStart']);
  });
});

const RUN_EXPECTED: Record<string, RunStatus> = {
  'active.held': 'held',
  'active.pending': 'pending',
  'active.running': 'running',
  cancelling: 'cancelling',
  success: 'success',
  failed: 'failed',
  cancelled: 'cancelled',
};

describe('run machine: status comes from tags', () => {
  const runLeaves = leaves(runMachine.root);

  it('starting and finishing are transient and show nothing; every resting state carries exactly one status tag', () => {
    assert.deepEqual(runLeaves.filter(isTransient).map(key).sort(), ['finishing', 'starting']);
    for (const node of runLeaves) {
      const statuses = tagsOn(node).filter((tag) => tag.startsWith('status:'));
      const expected = RUN_EXPECTED[key(node)];
      assert.deepEqual(statuses, expected === undefined ? [] : [`status:${expected}`], key(node));
    }
    assert.deepEqual(Object.keys(RUN_EXPECTED).sort(), runLeaves.filter((node) => !isTransient(node)).map(key).sort());
    assert.deepEqual([...new Set(Object.values(RUN_EXPECTED))].sort(), [...RUN_STATUSES].sort());
  });

  it('the projection reads the status from a stored snapshot through the chart', () => {
    const [initial] = initialTransition(runMachine, runInput([jobPlan('build')]));
    for (const [state, status] of Object.entries(RUN_EXPECTED)) {
      assert.equal(runStatusOf({ value: valueOf(state.split('.')), context: initial.context }), status, state);
    }
  });
});
