import type { AgentKind } from '../../machines/job.events.ts';
import type { Intent, IntentParams } from '../../machines/intents.ts';
import type { WaitingReason } from '../../machines/types.ts';

/** A grant made while the run's transition is still being recorded. */
export interface PlacementGrant {
  type: 'placement.granted';
  jobKey: string;
  agentId: string;
  dispatchId: string;
  agentKind: AgentKind;
}

/** Why no agent here can take the job now, told while the transition that asked is still being recorded. */
export interface PlacementNone {
  type: 'placement.none';
  jobKey: string;
  reason: WaitingReason;
}

export type PlacementAnswer = PlacementGrant | PlacementNone;

/**
 * Answers placement requests inside the transition that made them, so the answer is committed in the
 * same entry: a grant's dispatch leaves one commit earlier, and a job that must wait shows why without
 * a commit of its own (docs/architecture.md#placement-in-the-same-entry).
 */
export interface InlinePlacement {
  /**
   * A grant on a free agent here, its slot reserved in memory; or why no agent here can take the job,
   * the request still queued once the entry commits; or null when the queue must answer as usual
   * (also for a job asking again that already shows that reason).
   */
  place(runId: string, request: IntentParams['requestPlacement']): PlacementAnswer | null;
  /** Gives back the slot of a grant whose entry was never stored. */
  undo(grant: PlacementGrant): void;
}

/** One more event journaled in the same entry, with the state it left. */
export interface FollowUpEvent {
  seq: number;
  event: { type: string; at: number };
  stateAfter: unknown;
}

export interface InlineGrants {
  /** The intents to commit: the answered requests are gone, the grants' own intents are in. */
  intents: Intent[];
  followUps: FollowUpEvent[];
  grants: PlacementGrant[];
  /** The state the transition itself left, before any answer; absent when no request was answered. */
  firstStateAfter?: unknown;
}

/**
 * Answers each placement request it can at once, sending the answer to the run. Nothing leaves the
 * process: a grant's slot is reserved in memory and its dispatch is an effect of the entry, carried
 * out only after it commits; a job told why it waits still has its request queued after the commit,
 * holding that reason so the queue does not tell it again.
 */
export function answerInline(args: PlacingRun & { intents: Intent[]; placement: InlinePlacement; at: number }): InlineGrants {
  const intents: Intent[] = [];
  const followUps: FollowUpEvent[] = [];
  const grants: PlacementGrant[] = [];
  let firstStateAfter: unknown;
  // A job whose attempt this entry cancels is never placed in the same entry. The job chart already waits in `withdrawing` until the cancel has gone out; this keeps any other path from granting before it does.
  const cancelled = new Set(args.intents.flatMap((intent) => (intent.type === 'sendCancel' ? [intent.params.jobKey] : [])));
  for (const intent of args.intents) {
    const answer = intent.type === 'requestPlacement' && !cancelled.has(intent.params.jobKey) ? args.placement.place(args.runId, intent.params) : null;
    if (answer === null || intent.type !== 'requestPlacement') {
      intents.push(intent);
      continue;
    }
    if (followUps.length === 0) firstStateAfter = args.stateAfter();
    if (answer.type === 'placement.granted') grants.push(answer);
    // Still queued after the commit, holding the reason its job was just told.
    else intents.push({ ...intent, params: { ...intent.params, heldReason: answer.reason.message } });
    const event = { ...answer, at: args.at };
    intents.push(...args.send(event));
    followUps.push({ seq: args.nextSeq(), event, stateAfter: args.stateAfter() });
  }
  return followUps.length === 0 ? { intents, followUps, grants } : { intents, followUps, grants, firstStateAfter };
}

/**
 * Placement requests answered here (granted, or told why they wait) are answered within the same
 * entry; the rest are committed as effects. Without `placement` (or for a closing run) the intents are unchanged.
 */
export function answerPlacements(
  placement: InlinePlacement | undefined,
  run: { closing: boolean; placing: () => PlacingRun },
  intents: Intent[],
  at: number,
): InlineGrants {
  if (!placement || run.closing || !intents.some((intent) => intent.type === 'requestPlacement')) return { intents, followUps: [], grants: [] };
  return answerInline({ ...run.placing(), intents, placement, at });
}

/** The run being recorded, as `answerInline` needs it; made only for an entry that asks for placement (most do not). */
export interface PlacingRun {
  runId: string;
  closing: boolean;
  /** Sends the answer to the run actor and returns the intents it recorded. */
  send: (answer: PlacementAnswer & { at: number }) => Intent[];
  nextSeq: () => number;
  stateAfter: () => unknown;
}
