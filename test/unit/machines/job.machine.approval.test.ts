import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { gateIdOf, renewWaitingMessage } from '../../../machines/environment.ts';
import type { EnvironmentHold, EnvironmentVerdict } from '../../../machines/environment.ts';
import type { JobEvent } from '../../../machines/job.events.ts';
import type { InitFlags } from '../../../machines/types.ts';
import { RunHarness, jobInput, jobPlan, startJob, stateName, stepJob, stepsJob } from '../../support/machines.ts';
import type { Intent } from '../../support/machines.ts';

const HOUR = 3_600_000;
const HOLD: EnvironmentHold = { environment: 'prod', kind: 'approval', expiresInMs: 24 * HOUR, why: 'approval required' };
const GATE = gateIdOf('build');
const CREATED = 1_000;

function decide(decision: 'approve' | 'reject', at: number, gateId = GATE, comment?: string): JobEvent {
  return { type: 'job.approval', gateId, decision, by: 'alice', at, ...(comment === undefined ? {} : { comment }) };
}

function gateRecords(intents: readonly Intent[]) {
  return intents.flatMap((i) => (i.type === 'recordApprovalGate' ? [i.params.gate] : []));
}

describe('job machine: environment holds (ENV-2)', () => {
  it('a held job waits in waiting.approval with its reason and a durable deadline, then an approval sends it to placement', () => {
    const [held, opened] = startJob(jobInput({ hold: HOLD }));
    assert.equal(stateName(held.value), 'waiting.approval');
    assert.deepEqual(held.context.waiting, {
      kind: 'approval',
      message: 'waiting for approval of environment prod (expires in 24 h)',
      gateId: GATE,
      environment: 'prod',
      expiresAt: CREATED + 24 * HOUR,
    });
    assert.deepEqual(held.context.deadlines.approval, { id: 'build#approval', at: CREATED + 24 * HOUR });
    assert.ok(opened.some((i) => i.type === 'armDeadline' && i.params.kind === 'approval' && i.params.at === CREATED + 24 * HOUR));
    assert.deepEqual(gateRecords(opened).map((g) => g.status), ['pending']);
    assert.ok(!opened.some((i) => i.type === 'requestPlacement'), 'a held job asks no agent');

    const [approved, intents] = stepJob(held, decide('approve', CREATED + HOUR));
    assert.equal(stateName(approved.value), 'queued');
    assert.equal(approved.context.waiting, null);
    assert.equal(approved.context.deadlines.approval, undefined);
    assert.deepEqual(gateRecords(intents).map((g) => [g.status, g.decidedBy, g.decidedAt]), [['approved', 'alice', CREATED + HOUR]]);
    assert.ok(intents.some((i) => i.type === 'disarmDeadline' && i.params.id === 'build#approval'));
    assert.ok(intents.some((i) => i.type === 'requestPlacement'));
  });

  it('a decision for another gate changes nothing; a rejection cancels the job with who and why', () => {
    const [held] = startJob(jobInput({ hold: HOLD }));
    const [still, none] = stepJob(held, decide('approve', 2_000, 'env-other'));
    assert.equal(stateName(still.value), 'waiting.approval');
    assert.deepEqual(none, []);
    const [rejected, intents] = stepJob(still, decide('reject', 3_000, GATE, 'not today'));
    assert.equal(rejected.value, 'cancelled');
    assert.equal(rejected.context.outcome, 'approval of environment prod rejected by alice: not today');
    assert.deepEqual(gateRecords(intents).map((g) => [g.status, g.comment]), [['rejected', 'not today']]);
  });

  it('the deadline cancels it (and only the armed firing does); a security hold expires after 72 h', () => {
    const security: EnvironmentHold = { environment: 'prod', kind: 'security', expiresInMs: 72 * HOUR, why: 'trust tier unknown is below the minimum trusted' };
    const [held] = startJob(jobInput({ hold: security }));
    assert.equal(held.context.waiting?.message, 'waiting for approval of environment prod (security hold: trust tier unknown is below the minimum trusted) (expires in 72 h)');
    const armed = held.context.deadlines.approval;
    assert.ok(armed);
    const [early] = stepJob(held, { type: 'timer.approval.expired', deadlineId: armed.id, dueAt: armed.at - 1, at: armed.at - 1 });
    assert.equal(stateName(early.value), 'waiting.approval', 'a firing that is not the armed one is ignored');
    const [expired, intents] = stepJob(held, { type: 'timer.approval.expired', deadlineId: armed.id, dueAt: armed.at, at: armed.at });
    assert.equal(expired.value, 'cancelled');
    assert.equal(expired.context.outcome, 'approval of environment prod expired: no decision within 72 h');
    assert.deepEqual(gateRecords(intents).map((g) => [g.status, g.decidedBy]), [['expired', 'approval deadline']]);
  });

  it('a job cancelled while held closes its gate, so no record stays pending', () => {
    const [held] = startJob(jobInput({ hold: HOLD }));
    const [cancelled, intents] = stepJob(held, { type: 'job.cancel.requested', force: false, reason: 'cancelled by an administrator', at: 5_000 });
    assert.equal(cancelled.value, 'cancelled');
    assert.deepEqual(gateRecords(intents).map((g) => [g.status, g.comment]), [['rejected', 'the job ended before a decision: cancelled by an administrator']]);
  });

  it('a gated job is held only once released, and a second approval after placement changes nothing', () => {
    const [gated] = startJob(jobInput({ hold: HOLD, gate: { kind: 'needs', message: 'waiting for upstream jobs: build' } }));
    assert.equal(stateName(gated.value), 'waiting.gated');
    const [approved] = stepsJob(gated, [{ type: 'job.release', at: 2_000 }, decide('approve', 3_000)]);
    assert.equal(approved.value, 'queued');
    const [again, none] = stepJob(approved, decide('approve', 4_000));
    assert.equal(again.value, 'queued');
    assert.deepEqual(none, []);
  });

  it('the reason read later counts the expiry down', () => {
    const [held] = startJob(jobInput({ hold: HOLD }));
    assert.equal(renewWaitingMessage(held.context.waiting, CREATED + HOUR)?.message, 'waiting for approval of environment prod (expires in 23 h)');
    assert.equal(renewWaitingMessage(held.context.waiting, CREATED + 24 * HOUR - 90_000)?.message, 'waiting for approval of environment prod (expires in 2 min)');
  });
});

describe('run machine: holds live in the run and survive a restore', () => {
  it('the approval deadline is in the stored snapshot: after a restore its firing cancels the job and the run ends cancelled', () => {
    const h = RunHarness.start([jobPlan('deploy', { hold: HOLD })]);
    assert.equal(h.jobState('deploy'), 'waiting.approval');
    const restored = h.restore();
    const armed = restored.child('deploy').context.deadlines.approval;
    assert.deepEqual(armed, { id: 'deploy#approval', at: 24 * HOUR });
    restored.send({ type: 'timer.approval.expired', deadlineId: armed.id, dueAt: armed.at, at: armed.at, jobKey: 'deploy' });
    assert.equal(restored.jobState('deploy'), 'cancelled');
    assert.equal(restored.snapshot.value, 'cancelled');
  });

  it('after a restore an approval still reaches the job, which asks for an agent', () => {
    const h = RunHarness.start([jobPlan('deploy', { hold: HOLD })]).restore();
    h.take();
    h.send({ type: 'job.approval', jobKey: 'deploy', gateId: gateIdOf('deploy'), decision: 'approve', by: 'alice', at: 10 });
    assert.equal(h.jobState('deploy'), 'queued');
    assert.deepEqual(h.take().filter((i) => i.type === 'requestPlacement').map((i) => i.by), ['deploy']);
  });

  it('an environment an init job names is checked against the frozen verdicts: a hold, a failure, an unknown name', () => {
    const flags: InitFlags = { dynamicEnvironment: true, dynamicEnv: false, dynamicConcurrencyGroup: false, dynamicMatrix: false };
    const verdicts: Record<string, EnvironmentVerdict> = {
      prod: { kind: 'hold', hold: HOLD },
      qa: { kind: 'fail', message: 'branch feature/x does not match the branches of environment qa (main)' },
    };
    const outcome = (name: string) => {
      const init = jobPlan('__init__ci__deploy', { initFor: { targetJobName: 'deploy', flags } });
      const h = RunHarness.start([init, jobPlan('deploy', { initJob: '__init__ci__deploy' })], { environments: verdicts });
      h.runToEnd('__init__ci__deploy', 'success', 10, { initResult: { environmentNames: [name] } });
      return h.child('deploy');
    };
    assert.equal(stateName(outcome('prod').value), 'waiting.approval');
    const failed = outcome('qa');
    assert.equal(failed.value, 'failed');
    assert.deepEqual(failed.context.initFailure, { scope: 'job', category: 'environment_rules', message: verdicts['qa']?.kind === 'fail' ? verdicts['qa'].message : '', jobName: 'deploy' });
    assert.equal(outcome('nowhere').context.initFailure?.message, 'environment nowhere does not exist');
  });
});
