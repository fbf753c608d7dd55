import type { ApprovalGate } from './environment.ts';
import type { MatrixPlace } from './job.events.ts';
import type { AgentRequirements, ConcurrencyPolicy, DeadlineSpec, InitTarget, ResolvedValues, UpstreamResults } from './types.ts';

/** What a dispatch needs of the job, carried in the intent so its effect reads no live actor. */
export interface DispatchedJob {
  baseName: string;
  matrix: MatrixPlace | null;
  initFor: InitTarget | null;
  upstream: UpstreamResults | null;
  resolved: ResolvedValues | null;
}

/**
 * Every intent the run and job charts record, by name, with its params: the one definition from
 * which the charts' action slots, the runtime's recorder, the effects and their handler table derive.
 * Adding an intent here makes every table that must handle it fail to compile until it does.
 */
export interface IntentParams {
  /** Deadlines are stored with the snapshot and fired by the timer service (docs/architecture.md#time-durable-deadlines). */
  armDeadline: DeadlineSpec;
  disarmDeadline: { id: string; jobKey: string | null };
  /** `heldReason`: the waiting reason the job already shows, when it asks again; an unchanged answer is not sent. */
  requestPlacement: { jobKey: string; requirements: AgentRequirements; attempt: number; heldReason?: string };
  sendDispatch: { jobKey: string; agentId: string; dispatchId: string; attempt: number; job: DispatchedJob };
  /** `report`: the job waits for `cancel.reported` (a withdrawn attempt: machines/job.withdrawal.ts). */
  sendCancel: { jobKey: string; agentId: string; dispatchId: string; force: boolean; reason: string; report?: boolean };
  /** Where the overdue attempt's agent has its socket: answered as `ack.holder`. */
  askAckHolder: { jobKey: string; agentId: string };
  /** Whether a withdrawn attempt's cancel has gone out (`commandId`), or its unreachable agent is back (null): answered as `fence.checked`. */
  checkCancelFence: { jobKey: string; agentId: string; commandId: number | null };
  closeAgentConnection: { agentId: string; code: number; reason: string };
  releaseSlot: { agentId: string; dispatchId: string };
  /** `jobKey` null: the run itself holds the key (a workflow's own group, CONC-1). */
  requestConcurrency: { jobKey: string | null; key: string; policy: ConcurrencyPolicy };
  releaseConcurrency: { jobKey: string | null; key: string };
  /** `job.concurrency.ack` to the agent that reported a workflow's group (CONC-7); `wait` is followed by `proceed` or `cancel` with the same request id. */
  answerConcurrency: { agentId: string; dispatchId: string; requestId: string; action: 'proceed' | 'wait' | 'cancel'; reason?: string };
  /** A job's hold was opened or decided: its record is written (docs/http-api.md#approvals). */
  recordApprovalGate: { jobKey: string; gate: ApprovalGate };
  /** A commit status for the run on its forge (docs/http-api.md#commit-status-on-github); recorded by the run only. */
  reportForgeStatus: ForgeStatusReport;
}

/** Commit status states as GitHub names them; a cancelled run reports `error` (docs/http-api.md#commit-status-on-github). */
export type ForgeStatusState = 'pending' | 'success' | 'failure' | 'error';

export interface ForgeStatusReport {
  /** The status context, e.g. `switchyard/<workflow>`: one line per workflow on the commit. */
  context: string;
  state: ForgeStatusState;
  description: string;
}

export type IntentKind = keyof IntentParams;

/** One recorded intent; `Intent<'sendDispatch'>` is that intent alone. */
export type Intent<K extends IntentKind = IntentKind> = { [P in K]: { type: P; params: IntentParams[P] } }[K];

/** Intents that become rows of the timer table rather than effects. */
export const DEADLINE_INTENTS = ['armDeadline', 'disarmDeadline'] as const;
export type DeadlineIntentKind = (typeof DEADLINE_INTENTS)[number];

/** Intents executed after commit by the effect executor, with an idempotency key. */
export type EffectKind = Exclude<IntentKind, DeadlineIntentKind>;

export const JOB_INTENTS = [
  'armDeadline',
  'disarmDeadline',
  'requestPlacement',
  'sendDispatch',
  'sendCancel',
  'askAckHolder',
  'checkCancelFence',
  'closeAgentConnection',
  'releaseSlot',
  'requestConcurrency',
  'releaseConcurrency',
  'recordApprovalGate',
] as const satisfies readonly IntentKind[];

export const RUN_INTENTS = [
  'armDeadline',
  'disarmDeadline',
  'releaseSlot',
  'reportForgeStatus',
  'requestConcurrency',
  'releaseConcurrency',
  'answerConcurrency',
] as const satisfies readonly IntentKind[];

/**
 * Effects that call a slow outside service: each runs in a line of its own per run, so a forge
 * that hangs never holds up the run's dispatches (docs/architecture.md#effects-after-commit).
 */
export const OWN_LINE_EFFECTS: ReadonlySet<string> = new Set(['reportForgeStatus'] satisfies IntentKind[]);

/**
 * Effects that are run after commit but never written to the outbox: what they ask for lives only in
 * this process's memory, and a restore asks for it again by itself (`run.restored` makes every
 * waiting job ask for placement anew, FO-2). An outbox row and its done mark would buy nothing.
 */
export const UNRECORDED_EFFECTS: ReadonlySet<string> = new Set(['requestPlacement'] satisfies IntentKind[]);

export type JobIntentKind = (typeof JOB_INTENTS)[number];
export type RunIntentKind = (typeof RUN_INTENTS)[number];

/** The action slots a chart declares for its intents: they do nothing until the host provides them. */
export type IntentSlots<K extends IntentKind> = { [P in K]: (_: unknown, params: IntentParams[P]) => void };

/** Every slot, checked complete: an intent missing here is a compile error. */
const SLOTS: IntentSlots<IntentKind> = {
  armDeadline: () => {},
  disarmDeadline: () => {},
  requestPlacement: () => {},
  sendDispatch: () => {},
  sendCancel: () => {},
  askAckHolder: () => {},
  checkCancelFence: () => {},
  closeAgentConnection: () => {},
  releaseSlot: () => {},
  requestConcurrency: () => {},
  releaseConcurrency: () => {},
  answerConcurrency: () => {},
  recordApprovalGate: () => {},
  reportForgeStatus: () => {},
};
export const INTENT_KINDS: ReadonlySet<string> = new Set(Object.keys(SLOTS));

export function isEffectKind(kind: string): kind is EffectKind {
  return INTENT_KINDS.has(kind) && !(DEADLINE_INTENTS as readonly string[]).includes(kind);
}

export function intentSlots<K extends IntentKind>(kinds: readonly K[]): Pick<IntentSlots<IntentKind>, K> {
  const picked = {} as Pick<IntentSlots<IntentKind>, K>;
  for (const kind of kinds) picked[kind] = SLOTS[kind];
  return picked;
}

/** Where recorded intents go, with the chart that recorded them (its run, and its job or null for the run). */
export type IntentSink = (intent: Intent, from: { runId: string; jobKey: string | null }) => void;

type RecordingSlots<K extends IntentKind, C> = { [P in K]: (args: { context: C }, params: IntentParams[P]) => void };

/** Action implementations that hand each intent to `sink`; `from` reads the recording chart's context. */
export function recordingSlots<K extends IntentKind, C>(kinds: readonly K[], from: (context: C) => { runId: string; jobKey: string | null }, sink: IntentSink): RecordingSlots<K, C> {
  const slots = {} as RecordingSlots<K, C>;
  for (const kind of kinds) slots[kind] = ({ context }, params) => sink({ type: kind, params } as Intent, from(context));
  return slots;
}
