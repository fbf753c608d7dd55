/**
 * What the job chart decides once its ack deadline has passed (machines/job.machine.ts, states
 * `assigned.dispatched.ackOverdue` and `withdrawing`): pure functions of the chart's state and of the
 * answers the host gives it as events (`ack.holder`, `cancel.reported`, `fence.checked`), so every
 * hold is a state, every wait a durable deadline, and a replay decides as the live run did.
 *
 * Why hold at all (B7): an ack deadline that passes while the attempt's agent is reached through a
 * peer that has stopped renewing its lease says nothing about the agent: the peer may be frozen with
 * the agent's ack in its socket, and the agent may be running the job. Requeueing then would run the
 * job on a second agent while the cancel for the first waits in a dead peer's outbox. And once the
 * attempt is withdrawn, the job is not placed again until its cancel has gone out.
 */

/** Where the attempt's agent has its socket, as the host found it when the job asked. */
export type AckHolder =
  /** On this coordinator (or the job holds no agent): nothing to wait for. */
  | { kind: 'here' }
  /** On the peer `coordinatorId`, whose lease runs until `leaseUntil`. */
  | { kind: 'session'; coordinatorId: string; leaseUntil: number }
  /** No session of the agent is recorded on any coordinator. */
  | { kind: 'none' }
  /** The question failed (the database did not answer). */
  | { kind: 'unknown' };

/** The host's answer to `askAckHolder`, with the lease settings the verdict weighs it by. */
export interface AckHolderAnswer {
  holder: AckHolder;
  leaseTtlMs: number;
  leaseRenewMs: number;
  at: number;
}

/**
 * How far the hold has come: `unheld` (first looks), `held` (the peer was seen not renewing, or its
 * agent was declared lost), `settling` (a held peer renewed again and got time to pass on what it received).
 */
export const ACK_HOLD_PHASES = ['unheld', 'held', 'settling'] as const;
export type AckHoldPhase = (typeof ACK_HOLD_PHASES)[number];

export type AckVerdict =
  /** Requeue now: the attempt is withdrawn and cancelled. */
  | { kind: 'deliver' }
  /** The agent's socket is gone (`agent`: nowhere; `coordinator`: with its peer): the job waits for a reclaim, as after a disconnect. */
  | { kind: 'lost'; cause: 'agent' | 'coordinator' }
  /** Ask again after `ms`, in `phase`. */
  | { kind: 'wait'; phase: AckHoldPhase; ms: number };

/**
 * The verdict on an overdue ack, given what the host found. `dueAt` is the ack deadline's due time.
 * - the socket is here: deliver;
 * - the peer's lease ran out (or no session is recorded): the agent is lost, and the job waits for it
 *   to reclaim the attempt (`agent` when no session was ever seen in this hold);
 * - a held peer renews again: it gets two renew intervals to pass on what it received (the ack, perhaps);
 * - a peer renewing since the deadline is alive with the agent's socket: deliver. A peer killed a
 *   moment before the deadline still looks renewing for up to two intervals, so only a renewal made
 *   after the deadline counts (chaos seed 3023125867);
 * - a peer that neither renews nor lapses is not waited for past three lease lifetimes;
 * - a question that failed: asked again once held (delivering could run the job twice), else delivered.
 */
export function ackVerdict(phase: AckHoldPhase, answer: AckHolderAnswer, dueAt: number): AckVerdict {
  const { holder, leaseTtlMs, leaseRenewMs, at } = answer;
  const held = phase !== 'unheld';
  if (holder.kind === 'here') return { kind: 'deliver' };
  if (holder.kind === 'unknown') return held ? { kind: 'wait', phase, ms: leaseRenewMs } : { kind: 'deliver' };
  if (holder.kind === 'none' || holder.leaseUntil <= at) return { kind: 'lost', cause: holder.kind === 'none' && !held ? 'agent' : 'coordinator' };
  const renewing = holder.leaseUntil - at > leaseTtlMs - 2 * leaseRenewMs;
  if (renewing && phase === 'held') return { kind: 'wait', phase: 'settling', ms: 2 * leaseRenewMs };
  const renewedSinceDeadline = holder.leaseUntil - leaseTtlMs >= dueAt;
  if ((renewing && renewedSinceDeadline) || at - dueAt > 3 * leaseTtlMs) return { kind: 'deliver' };
  return { kind: 'wait', phase: renewing || held ? phase : 'held', ms: leaseRenewMs };
}

/** What became of the cancel of a withdrawn attempt, as the host carried it out. */
export type CancelHolder =
  /** Sent on a socket here. */
  | { kind: 'sent' }
  /** Left in the outbox of the peer holding the agent's socket, as command `commandId`. */
  | { kind: 'peer'; coordinatorId: string; commandId: number }
  /** No socket of the agent anywhere: it hears of the cancel when it is back (its reclaim is refused). */
  | { kind: 'unreachable' };

/** The host's report of a withdrawn attempt's cancel; `pollMs` is how often a fenced job asks whether it went out. */
export interface CancelReport {
  dispatchId: string;
  holder: CancelHolder;
  pollMs: number;
  at: number;
}

/** A withdrawn attempt, kept while the job waits for its cancel to go out (context `withdrawal`). */
export interface Withdrawal {
  agentId: string;
  dispatchId: string;
  raisedAt: number;
  /** Set once the cancel is reported held: how it is asked about, and how often. */
  fence: { coordinatorId: string | null; commandId: number | null; pollMs: number } | null;
}

/** Why a withdrawn job waits, in words (kind `previous_attempt`). */
export function fenceMessage(withdrawal: Withdrawal): string {
  const { agentId, fence } = withdrawal;
  if (fence === null) return `waiting for the cancel of the previous attempt to reach agent ${agentId}`;
  return fence.coordinatorId === null
    ? `waiting for agent ${agentId}, which lost its socket before the previous attempt's cancel reached it, to reconnect (the attempt is then cancelled) or for its recovery window to pass`
    : `waiting for coordinator ${fence.coordinatorId} to pass on the cancel of the previous attempt to agent ${agentId}`;
}
