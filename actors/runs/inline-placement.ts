import type { AgentKind } from '../../machines/job.events.ts';
import type { Intent, IntentParams } from '../../machines/intents.ts';

/** A grant made while the run's transition is still being recorded. */
export interface PlacementGrant {
  type: 'placement.granted';
  jobKey: string;
  agentId: string;
  dispatchId: string;
  agentKind: AgentKind;
}

/**
 * Answers placement requests inside the transition that made them, so the grant is committed in the
 * same entry and the dispatch leaves one commit earlier (docs/architecture.md#placement-in-the-same-entry).
 */
export interface InlinePlacement {
  /** A grant on a free agent here, its slot reserved in memory; null when the job must queue as usual. */
  place(runId: string, request: IntentParams['requestPlacement']): PlacementGrant | null;
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
  /** The state the transition itself left, before any grant; absent when nothing was granted. */
  firstStateAfter?: unknown;
}

/**
 * Turns each placement request a free agent here can take into a `placement.granted` sent to the run
 * at once. Nothing leaves the process: the slot is reserved in memory and the dispatch is an effect of
 * the entry, carried out only after it commits.
 */
export function grantInline(args: PlacingRun & { intents: Intent[]; placement: InlinePlacement; at: number }): InlineGrants {
  const intents: Intent[] = [];
  const followUps: FollowUpEvent[] = [];
  const grants: PlacementGrant[] = [];
  let firstStateAfter: unknown;
  for (const intent of args.intents) {
    const grant = intent.type === 'requestPlacement' ? args.placement.place(args.runId, intent.params) : null;
    if (grant === null) {
      intents.push(intent);
      continue;
    }
    if (grants.length === 0) firstStateAfter = args.stateAfter();
    grants.push(grant);
    const event = { ...grant, at: args.at };
    intents.push(...args.send(event));
    followUps.push({ seq: args.nextSeq(), event, stateAfter: args.stateAfter() });
  }
  return grants.length === 0 ? { intents, followUps, grants } : { intents, followUps, grants, firstStateAfter };
}

/**
 * Placement requests a free agent here can take are granted within the same entry; the rest are
 * committed as effects. Without `placement` (or for a closing run) the intents are unchanged.
 */
export function answerPlacements(
  placement: InlinePlacement | undefined,
  run: PlacingRun,
  intents: Intent[],
  at: number,
): InlineGrants {
  if (!placement || run.closing || !intents.some((intent) => intent.type === 'requestPlacement')) return { intents, followUps: [], grants: [] };
  return grantInline({ ...run, intents, placement, at });
}

/** The run being recorded, as `answerPlacements` needs it. */
export interface PlacingRun {
  runId: string;
  closing: boolean;
  /** Sends the grant to the run actor and returns the intents it recorded. */
  send: (grant: PlacementGrant & { at: number }) => Intent[];
  nextSeq: () => number;
  stateAfter: () => unknown;
}
