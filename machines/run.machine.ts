import { assign, assertEvent, enqueueActions, setup } from 'xstate';
import type { EventFrom, ParameterizedObject, SnapshotFrom } from 'xstate';
import { jobMachineOfRun } from './job.machine.ts';
import type { jobMachine } from './job.machine.ts';
import { JOB_EVENT_TYPES } from './job.events.ts';
import type { ArmedDeadline, JobEvent, JobInput, JobReport, TimerFields } from './job.events.ts';
import { NEEDS_GATE, buildGraph } from './run.graph.ts';
import { settle } from './run.settle.ts';
import { checkReleasedEnvironment, haltSiblings, haltedGroup, jobInputOf, jobInputs, releaseOf } from './run.jobs.ts';
import type { EnvironmentVerdict } from './environment.ts';
import type { ConcurrencyScope, FanoutGroup, GateDecision, JobPlan, RunInput, RunJobNode } from './run.types.ts';
import { computeRunStatus, countsAsFailure } from './status.ts';
import type { RunStatusTag, TerminalRunStatus } from './status.ts';
import { RUN_INTENTS, intentSlots } from './intents.ts';
import type { Intent, RunIntentKind } from './intents.ts';
import { forgeReportOf } from './run.forge.ts';
import type { InitFailure } from './types.ts';
import { cancelled, refused, released, stepWorkflowGroups } from './run.concurrency.ts';
import type { ReportEvent, WorkflowGroups } from './run.concurrency.ts';

export const RUN_MACHINE_ID = 'run';
/** Bump when a change makes stored run snapshots unreadable (docs/architecture.md#ownership-leases-epochs-fencing-and-adoption). */
export const RUN_MACHINE_VERSION = 5;

const DEFAULT_APPROVAL_TIMEOUT_MS = 24 * 60 * 60_000;

/** What a run is, fixed when it is created. */
export interface RunSpec {
  runId: string;
  workflowName: string;
  createdAt: number;
  maxAttempts: number;
  concurrencyScope: ConcurrencyScope | null;
  workflowTimeoutMs: number | null;
  approvalTimeoutMs: number | null;
  /** The forge status context the run reports under (docs/http-api.md#commit-status-on-github); null: it reports none. */
  forgeStatus: { context: string } | null;
}

/** What the run actor keeps. What is fixed at creation is grouped in `spec`, for the reason given at `JobContext`. */
export interface RunContext {
  spec: RunSpec;
  jobs: Record<string, RunJobNode>;
  groups: Record<string, FanoutGroup>;
  /** Job inputs waiting to be spawned by the first transition; empty afterwards. */
  toSpawn: JobInput[];
  /** Decisions sent once the first jobs are spawned; empty afterwards. */
  initialDecisions: GateDecision[];
  /** Dynamic-matrix jobs waiting for their init job's result, by key (docs/lockfile.md#init-jobs). */
  templates: Record<string, JobPlan>;
  /** Templates already fanned out: their keys name no job any more. */
  fannedOut: string[];
  /** Frozen verdicts on environments init jobs may name (ENV-4); null: not checked. */
  environments: Record<string, EnvironmentVerdict> | null;
  deadlines: { workflow?: ArmedDeadline; approval?: ArmedDeadline };
  cancel: { reason: string; force: boolean; by: string } | null;
  workflowTimedOut: boolean;
  initFailure: InitFailure | null;
  failureReason: string | null;
  startedAt: number | null;
  finishedAt: number | null;
  /** The workflow's own concurrency groups, by key (CONC-7); absent in runs created before they were enforced. */
  workflowGroups?: WorkflowGroups;
}

export type RunCommand =
  | { type: 'run.cancel'; reason: string; force: boolean; by: string; at: number }
  | { type: 'run.approval'; decision: 'approved' | 'rejected'; by: string; at: number }
  /** Sent once after the run is restored in a new process; `liveAgents` as in `job.restored`. */
  | { type: 'run.restored'; liveAgents: string[]; at: number }
  | ({ type: 'timer.workflow.expired' } & TimerFields)
  | ({ type: 'timer.approval.expired' } & TimerFields)
  /** A job's agent reported the workflow's own concurrency group (`job.concurrency.report`, CONC-7). */
  | ({ type: 'agent.concurrency.report'; at: number } & ReportEvent)
  /** The group's arbiter granted the run the key, or queued it at `position`. */
  | { type: 'run.concurrency.granted'; key: string; at: number }
  | { type: 'run.concurrency.queued'; key: string; position: number; at: number };

export type RunEvent = RunCommand | JobReport | JobEvent;

type Params = ParameterizedObject['params'] | undefined;
type RunActors = { src: 'job'; logic: typeof jobMachine; id: string | undefined };

/** Intents a run records itself (machines/intents.ts); job intents come from its children. */
export type RunIntent = Intent<RunIntentKind>;

function compose<P extends Params = undefined>(
  collect: Parameters<typeof enqueueActions<RunContext, RunEvent, P, RunEvent, RunActors, RunIntent, never>>[0],
) {
  return enqueueActions<RunContext, RunEvent, P, RunEvent, RunActors, RunIntent, never>(collect);
}

function timeOf(context: RunContext, event: { at?: number }): number {
  return typeof event.at === 'number' ? event.at : context.spec.createdAt;
}

function openJobs(context: RunContext): string[] {
  return Object.entries(context.jobs)
    .filter(([, node]) => node.status === null)
    .map(([key]) => key);
}

function failureReasonOf(context: RunContext): string | null {
  if (context.workflowTimedOut) return 'workflow_timeout';
  if (context.initFailure) return context.initFailure.message;
  const failed = Object.entries(context.jobs).filter(([, node]) => node.status !== null && countsAsFailure(node.status));
  if (failed.length > 0) return `Failed jobs: ${failed.map(([key]) => key).join(', ')}`;
  return context.cancel ? `Cancelled: ${context.cancel.reason}` : null;
}

export function finalRunStatus(context: RunContext): TerminalRunStatus {
  const statuses = Object.values(context.jobs).flatMap((node) => (node.status ? [node.status] : []));
  return computeRunStatus(statuses, { workflowTimedOut: context.workflowTimedOut, initFailed: context.initFailure !== null });
}

const forwardJobEvents = {
  ...Object.fromEntries(JOB_EVENT_TYPES.map((type) => [type, { guard: 'targetsOpenJob' as const, actions: 'forwardToJob' as const }])),
  // A grant for a job that has ended reaches no job: the run gives its slot back.
  'placement.granted': [{ guard: 'targetsOpenJob' as const, actions: 'forwardToJob' as const }, { actions: 'releaseGrant' as const }],
};

const runSetup = setup({
  types: {
    context: {} as RunContext,
    events: {} as RunEvent,
    input: {} as RunInput,
    tags: {} as RunStatusTag,
  },
  actors: { job: jobMachineOfRun },
  actions: {
    ...intentSlots(RUN_INTENTS),
  },
  guards: {
    targetsOpenJob: ({ context, event }) =>
      'jobKey' in event && typeof event.jobKey === 'string' && context.jobs[event.jobKey]?.status === null,
    allJobsTerminal: ({ context }) => openJobs(context).length === 0,
    runInitFailed: ({ context }) => context.initFailure !== null,
    needsApproval: ({ context }) => context.spec.approvalTimeoutMs !== null,
    isApproved: ({ event }) => event.type === 'run.approval' && event.decision === 'approved',
    isForced: ({ event }) => event.type === 'run.cancel' && event.force,
    isCurrentDeadline: ({ context, event }, params: { kind: 'workflow' | 'approval' }) => {
      const armed = context.deadlines[params.kind];
      return 'deadlineId' in event && armed !== undefined && armed.id === event.deadlineId && armed.at === event.dueAt;
    },
    endsSuccess: ({ context }) => finalRunStatus(context) === 'success',
    endsCancelled: ({ context }) => finalRunStatus(context) === 'cancelled',
  },
});

function update<P extends Params>(assignment: Parameters<typeof assign<RunContext, RunEvent, P, RunEvent, RunActors>>[0]) {
  return assign<RunContext, RunEvent, P, RunEvent, RunActors>(assignment);
}

function sendDecisions(
  enqueue: Parameters<Parameters<typeof compose>[0]>[0]['enqueue'],
  context: RunContext,
  decisions: GateDecision[],
  at: number,
) {
  for (const decision of decisions) {
    const { jobKey } = decision;
    switch (decision.kind) {
      case 'release': {
        const release = checkReleasedEnvironment(jobKey, releaseOf(decision.upstream, decision.init, context.spec.concurrencyScope), context.environments);
        if ('category' in release) enqueue.sendTo(jobKey, { type: 'job.init.failed', failure: release, at });
        else enqueue.sendTo(jobKey, { type: 'job.release', ...release, at });
        break;
      }
      case 'skip':
        enqueue.sendTo(jobKey, { type: 'job.skip', reason: decision.reason, at });
        break;
      case 'gate':
        enqueue.sendTo(jobKey, { type: 'job.gate', reason: decision.reason, at });
        break;
      case 'fail':
        enqueue.sendTo(jobKey, { type: 'job.init.failed', failure: decision.failure, at });
        break;
      case 'expand':
        break;
    }
  }
}

/**
 * A record with each of its values copied, for `settle` to update in place: it sets fields of nodes
 * and groups and never changes what they point to, so the snapshot's own stay as they were. (A deep
 * `structuredClone` of both was 2.4% of a coordinator's busy time with 4-job runs.)
 */
function copiesOf<T extends object>(record: Readonly<Record<string, T>>): Record<string, T> {
  const copy: Record<string, T> = {};
  for (const key in record) copy[key] = { ...(record[key] as T) };
  return copy;
}

export const runMachine = runSetup.extend({
  actions: {
    spawnJobs: compose(({ context, enqueue }) => {
      for (const input of context.toSpawn) enqueue.spawnChild('job', { id: input.jobKey, input });
      enqueue.assign({ toSpawn: [] });
    }),
    sendInitialDecisions: compose(({ context, event, enqueue }) => {
      sendDecisions(enqueue, context, context.initialDecisions, timeOf(context, event));
      enqueue.assign({ initialDecisions: [] });
    }),
    armWorkflowDeadline: compose(({ context, enqueue }) => {
      if (context.spec.workflowTimeoutMs === null || context.initFailure) return;
      const at = context.spec.createdAt + context.spec.workflowTimeoutMs;
      const id = 'run#workflow';
      enqueue.assign({ deadlines: { ...context.deadlines, workflow: { id, at } } });
      enqueue({ type: 'armDeadline', params: { id, kind: 'workflow', at } });
    }),
    armRunDeadline: compose<{ kind: 'approval' }>(({ context, event, enqueue }, params) => {
      const at = timeOf(context, event) + (context.spec.approvalTimeoutMs ?? DEFAULT_APPROVAL_TIMEOUT_MS);
      const id = `run#${params.kind}`;
      enqueue.assign({ deadlines: { ...context.deadlines, [params.kind]: { id, at } } });
      enqueue({ type: 'armDeadline', params: { id, kind: params.kind, at } });
    }),
    disarmRunDeadline: compose<{ kind: 'approval' | 'workflow' }>(({ context, enqueue }, params) => {
      const armed = context.deadlines[params.kind];
      if (!armed) return;
      const { [params.kind]: _dropped, ...rest } = context.deadlines;
      enqueue.assign({ deadlines: rest });
      enqueue({ type: 'disarmDeadline', params: { id: armed.id, jobKey: null } });
    }),
    evaluate: compose(({ context, event, enqueue }) => {
      const jobs = copiesOf(context.jobs);
      const groups = copiesOf(context.groups);
      const at = timeOf(context, event);
      const settled = settle(jobs, groups, context.templates, haltSiblings(haltedGroup(event.type === 'job.finished' ? event : null, groups), jobs, groups));
      for (const plan of settled.spawned) enqueue.spawnChild('job', { id: plan.key, input: jobInputOf(plan, { ...context.spec, initFailure: null }, at, NEEDS_GATE) });
      const templates = Object.fromEntries(Object.entries(context.templates).filter(([key]) => !settled.expanded.includes(key)));
      const fannedOut = settled.expanded.length > 0 ? [...context.fannedOut, ...settled.expanded] : context.fannedOut;
      enqueue.assign({ jobs, groups, templates, fannedOut });
      sendDecisions(enqueue, context, settled.decisions, at);
    }),
    recordJobEnd: update(({ context, event }) => {
      assertEvent(event, 'job.finished');
      const node = context.jobs[event.jobKey];
      if (!node || node.status !== null) return {};
      const ended: RunJobNode = { ...node, status: event.status, gate: null };
      if (event.reason !== null) ended.reason = event.reason;
      if (event.outputs) ended.outputs = event.outputs;
      if (event.initResult) ended.initResult = event.initResult;
      return { jobs: { ...context.jobs, [event.jobKey]: ended } };
    }),
    /** The workflow's own concurrency groups (machines/run.concurrency.ts): a job's report, the arbiter's grant or queue place. */
    stepGroups: compose(({ context, event, enqueue }) => {
      assertEvent(event, ['agent.concurrency.report', 'run.concurrency.granted', 'run.concurrency.queued']);
      const step = stepWorkflowGroups(context.workflowGroups ?? {}, event, context.spec.concurrencyScope);
      enqueue.assign({ workflowGroups: step.groups });
      for (const intent of step.intents) enqueue(intent);
    }),
    refuseGroupReport: compose(({ context, event, enqueue }) => {
      assertEvent(event, 'agent.concurrency.report');
      enqueue(refused(event, context.cancel?.reason ?? 'the run is ending'));
    }),
    markStarted: update(({ context, event }) => ({ startedAt: context.startedAt ?? timeOf(context, event) })),
    recordCancel: update(({ event }) => {
      assertEvent(event, ['run.cancel', 'run.approval']);
      if (event.type === 'run.cancel') return { cancel: { reason: event.reason, force: event.force, by: event.by } };
      return { cancel: { reason: 'approval rejected', force: false, by: event.by } };
    }),
    failOpenJobs: update(({ context }) => ({
      jobs: Object.fromEntries(
        Object.entries(context.jobs).map(([key, node]) => [key, { ...node, status: node.status ?? 'failed', gate: null }]),
      ),
    })),
    recordApprovalExpiry: assign({ cancel: { reason: 'approval expired', force: false, by: 'approval deadline' } }),
    recordWorkflowTimeout: assign({
      workflowTimedOut: true,
      cancel: { reason: 'workflow_timeout', force: false, by: 'workflow deadline' },
    }),
    cancelOpenJobs: compose(({ context, event, enqueue }) => {
      const cancel = context.cancel ?? { reason: 'cancelled', force: false };
      const groups = cancelled(context.workflowGroups ?? {}, cancel.reason);
      enqueue.assign({ workflowGroups: groups.groups });
      for (const intent of groups.intents) enqueue(intent);
      const jobs = { ...context.jobs };
      for (const key of openJobs(context)) {
        const node = jobs[key];
        // A template has no actor: the run ends it itself.
        if (node?.template) jobs[key] = { ...node, status: 'cancelled', gate: null, reason: cancel.reason };
        else enqueue.sendTo(key, { type: 'job.cancel.requested', force: cancel.force, reason: cancel.reason, at: timeOf(context, event) });
      }
      enqueue.assign({ jobs });
    }),
    releaseGrant: compose(({ event, enqueue }) => {
      assertEvent(event, 'placement.granted');
      enqueue({ type: 'releaseSlot', params: { agentId: event.agentId, dispatchId: event.dispatchId } });
    }),
    /** Every open job with an actor learns it was restored, and decides itself what to re-establish. */
    tellJobsRestored: compose(({ context, event, enqueue }) => {
      assertEvent(event, 'run.restored');
      for (const key of openJobs(context)) {
        if (!context.jobs[key]?.template) enqueue.sendTo(key, { type: 'job.restored', liveAgents: event.liveAgents, at: event.at });
      }
    }),
    forwardToJob: compose(({ event, enqueue }) => {
      if (!('jobKey' in event) || typeof event.jobKey !== 'string') return;
      enqueue.sendTo(event.jobKey, event);
    }),
    reportRunStarted: compose(({ context, enqueue }) => {
      if (!context.spec.forgeStatus || context.initFailure) return;
      const description = context.spec.approvalTimeoutMs !== null ? 'Waiting for approval' : 'Running';
      enqueue({ type: 'reportForgeStatus', params: { context: context.spec.forgeStatus.context, state: 'pending', description } });
    }),
    /** After `finish`, whose failure reason it reports. */
    reportRunEnded: compose<{ status: TerminalRunStatus }>(({ context, enqueue }, { status }) => {
      if (!context.spec.forgeStatus) return;
      const report = forgeReportOf(context, status);
      enqueue({ type: 'reportForgeStatus', params: { context: context.spec.forgeStatus.context, ...report } });
    }),
    finish: compose(({ context, event, enqueue }) => {
      for (const armed of Object.values(context.deadlines)) {
        enqueue({ type: 'disarmDeadline', params: { id: armed.id, jobKey: null } });
      }
      for (const intent of released(context.workflowGroups ?? {})) enqueue(intent);
      enqueue.assign({ deadlines: {}, finishedAt: timeOf(context, event), failureReason: failureReasonOf(context) });
    }),
  },
}).createMachine({
  id: RUN_MACHINE_ID,
  context: ({ input }) => {
    const graph = buildGraph(input.jobs, input.approval !== null && input.initFailure === null, input.carried);
    return {
      spec: {
        runId: input.runId,
        workflowName: input.workflowName,
        createdAt: input.createdAt,
        maxAttempts: input.maxAttempts,
        concurrencyScope: input.concurrencyScope ?? null,
        workflowTimeoutMs: input.workflowTimeoutMs,
        approvalTimeoutMs: input.approval ? input.approval.timeoutMs || DEFAULT_APPROVAL_TIMEOUT_MS : null,
        forgeStatus: input.forgeStatus ?? null,
      },
      jobs: graph.jobs,
      groups: graph.groups,
      toSpawn: input.initFailure ? [] : jobInputs(input, graph.initialGates),
      initialDecisions: graph.initial,
      templates: Object.fromEntries(input.jobs.filter((plan) => plan.template).map((plan) => [plan.key, plan])),
      fannedOut: [],
      environments: input.environments ?? null,
      deadlines: {},
      cancel: null,
      workflowTimedOut: false,
      initFailure: input.initFailure,
      failureReason: null,
      startedAt: null,
      finishedAt: null,
      workflowGroups: {},
    };
  },
  initial: 'starting',
  on: {
    ...forwardJobEvents,
    'run.restored': { actions: 'tellJobsRestored' },
    'run.concurrency.granted': { actions: 'stepGroups' },
    'run.concurrency.queued': { actions: 'stepGroups' },
  },
  states: {
    starting: {
      entry: ['spawnJobs', 'armWorkflowDeadline', 'reportRunStarted'],
      always: [
        { guard: 'runInitFailed', target: 'failed', actions: 'failOpenJobs' },
        { guard: 'needsApproval', target: 'active.held' },
        { target: 'active.pending', actions: 'sendInitialDecisions' },
      ],
    },
    active: {
      description: 'Open: a cancel or the workflow deadline tells every open job to cancel.',
      initial: 'pending',
      on: {
        'run.cancel': { target: 'cancelling', actions: ['recordCancel', 'cancelOpenJobs'] },
        'agent.concurrency.report': { actions: 'stepGroups' },
        'timer.workflow.expired': {
          guard: { type: 'isCurrentDeadline', params: { kind: 'workflow' } },
          target: 'cancelling',
          actions: ['recordWorkflowTimeout', 'cancelOpenJobs'],
        },
      },
      states: {
        held: {
          description: 'A workflow approval holds every job until a user decides (RUN-4).',
          tags: ['status:held'],
          entry: { type: 'armRunDeadline', params: { kind: 'approval' } },
          exit: { type: 'disarmRunDeadline', params: { kind: 'approval' } },
          on: {
            'run.approval': [
              { guard: 'isApproved', target: 'pending', actions: 'evaluate' },
              { target: '#run.cancelling', actions: ['recordCancel', 'cancelOpenJobs'] },
            ],
            'timer.approval.expired': {
              guard: { type: 'isCurrentDeadline', params: { kind: 'approval' } },
              target: '#run.cancelling',
              actions: ['recordApprovalExpiry', 'cancelOpenJobs'],
            },
            'job.finished': { actions: 'recordJobEnd' },
          },
        },
        pending: {
          description: 'Created; no job has started a step yet.',
          tags: ['status:pending'],
          always: { guard: 'allJobsTerminal', target: '#run.finishing' },
          on: {
            'job.started': { target: 'running', actions: 'markStarted' },
            'job.finished': { actions: ['recordJobEnd', 'evaluate'] },
          },
        },
        running: {
          tags: ['status:running'],
          always: { guard: 'allJobsTerminal', target: '#run.finishing' },
          on: {
            'job.finished': { actions: ['recordJobEnd', 'evaluate'] },
          },
        },
      },
    },
    cancelling: {
      description: 'Every open job was told to cancel; the run ends when the last one is terminal.',
      tags: ['status:cancelling'],
      always: { guard: 'allJobsTerminal', target: 'finishing' },
      on: {
        'job.started': { actions: 'markStarted' },
        'job.finished': { actions: 'recordJobEnd' },
        'run.cancel': { guard: 'isForced', actions: ['recordCancel', 'cancelOpenJobs'] },
        'agent.concurrency.report': { actions: 'refuseGroupReport' },
      },
    },
    finishing: {
      always: [
        { guard: 'endsSuccess', target: 'success' },
        { guard: 'endsCancelled', target: 'cancelled' },
        { target: 'failed' },
      ],
    },
    success: { type: 'final', tags: ['status:success'], entry: ['finish', { type: 'reportRunEnded', params: { status: 'success' } }] },
    failed: { type: 'final', tags: ['status:failed'], entry: ['finish', { type: 'reportRunEnded', params: { status: 'failed' } }] },
    cancelled: { type: 'final', tags: ['status:cancelled'], entry: ['finish', { type: 'reportRunEnded', params: { status: 'cancelled' } }] },
  },
});

export type RunMachine = typeof runMachine;
export type RunSnapshot = SnapshotFrom<RunMachine>;
export type RunMachineEvent = EventFrom<RunMachine>;
