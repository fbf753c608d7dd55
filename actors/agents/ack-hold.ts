import type { Logger } from 'pino';
import { coerceError } from '../../lib/errors.ts';
import type { ArmedTimer } from '../runs/timer-service.ts';

type LostCause = 'agent' | 'coordinator';

export interface AckHoldPorts {
  /** The agent holding the job's current attempt, if any. */
  agentOf(runId: string, jobKey: string): string | null;
  /** The job's armed ack deadline, if its attempt still waits for its ack. */
  ackDeadlineOf(runId: string, jobKey: string): { id: string; at: number } | undefined;
  /** The agent's socket is on this coordinator. */
  isLocal(agentId: string): boolean;
  /** The lease of the coordinator holding the agent's socket; null when no session of it is recorded. */
  holderLease(agentId: string): Promise<{ coordinatorId: string; leaseUntil: number } | null>;
  /**
   * The job gets `agent.disconnected`: cause `coordinator` when the agent's socket went with its
   * coordinator, `agent` when the agent has no socket anywhere.
   */
  agentLost(runId: string, jobKey: string, agentId: string, cause: LostCause): Promise<void>;
  now(): number;
  leaseTtlMs: number;
  leaseRenewMs: number;
  log: Logger;
}

/**
 * An ack deadline that passes while the attempt's agent is reached through a peer that has stopped
 * renewing its lease says nothing about the agent: the peer may be frozen with the agent's ack in
 * its socket, and the agent may be running the job. Requeueing then would run the job on a second
 * agent while the cancel for the first waits in a dead peer's outbox (B7). So the expiry is held
 * until the question settles:
 * - the peer's lease runs out (or its sessions were cleared): the agent's socket died with it, and
 *   the job is told so here (`agentLost`) rather than at the peers' next poll. It goes recovering,
 *   and the agent can reclaim from here; the expiry that follows finds no ack deadline armed;
 * - the peer renews again: it was frozen and has come back, so it gets two renew intervals to pass
 *   on what it received meanwhile (the ack, perhaps) before the expiry is delivered.
 * A peer seen renewing is believed alive only once it has renewed after the deadline: one killed a
 * moment before still looks renewing, and requeueing then ran the job on a second agent while the
 * first, its socket gone with the peer, still held it (chaos seed 3023125867). So the expiry waits for
 * the peer's next renewal (one renew interval at most), or for its lease to run out.
 * An expiry that finds no socket of the agent on any coordinator would requeue the job while the
 * agent may still run it, and its cancel would have nowhere to go: the agent's disconnect has not
 * reached the job yet (it would have disarmed the deadline). The job is told now, and goes
 * recovering as it would have; the agent's reclaim, or its register without the attempt, settles it.
 * Returns how long to wait before asking again, or null to deliver now. A peer that neither renews
 * nor lapses (a lease lifetime cannot pass without one or the other) is not waited for past three
 * lease lifetimes.
 */
export function ackExpiryHold(ports: AckHoldPorts) {
  const held = new Set<string>();
  const settling = new Set<string>();
  /** Why the job is being told its agent is lost, kept while telling it fails and is tried again. */
  const lost = new Map<string, LostCause>();
  const forget = (deadlineId: string) => {
    held.delete(deadlineId);
    settling.delete(deadlineId);
    lost.delete(deadlineId);
  };
  return (timer: ArmedTimer, heldMs: number): Promise<number | null> | null => {
    if (timer.kind !== 'ack' || timer.jobKey === null) return null;
    const jobKey = timer.jobKey;
    const agentId = ports.agentOf(timer.runId, jobKey);
    const armed = ports.ackDeadlineOf(timer.runId, jobKey);
    const current = armed?.id === timer.deadlineId && armed.at === timer.dueAt;
    if (agentId === null || ports.isLocal(agentId) || !current) {
      forget(timer.deadlineId);
      return null;
    }
    return ports.holderLease(agentId).then(
      async (lease) => {
        const wasHeld = held.has(timer.deadlineId);
        const lapsed = lease === null || lease.leaseUntil <= ports.now();
        if (lapsed) {
          const cause = lost.get(timer.deadlineId) ?? (lease === null && !wasHeld ? 'agent' : 'coordinator');
          held.add(timer.deadlineId);
          lost.set(timer.deadlineId, cause);
          const again = await tellLost(ports, { runId: timer.runId, jobKey, agentId }, cause);
          if (again === null) forget(timer.deadlineId);
          return again;
        }
        const renewing = lease.leaseUntil - ports.now() > ports.leaseTtlMs - 2 * ports.leaseRenewMs;
        if (renewing && wasHeld && !settling.has(timer.deadlineId)) {
          settling.add(timer.deadlineId);
          return 2 * ports.leaseRenewMs;
        }
        // A peer killed just before the deadline still looks renewing for up to two intervals; only a
        // renewal made after the deadline shows it alive with the agent's socket since.
        const renewedSinceDeadline = lease.leaseUntil - ports.leaseTtlMs >= timer.dueAt;
        if ((renewing && renewedSinceDeadline) || heldMs > 3 * ports.leaseTtlMs) {
          forget(timer.deadlineId);
          return null;
        }
        if (!renewing) {
          if (!wasHeld) ports.log.warn({ runId: timer.runId, jobKey, agentId, peer: lease.coordinatorId }, "ack deadline held: the agent's coordinator is not renewing its lease");
          held.add(timer.deadlineId);
        }
        return ports.leaseRenewMs;
      },
      (thrown: unknown) => {
        // Held already, the peer was seen frozen: delivering now could run the job twice, so ask again.
        if (held.has(timer.deadlineId)) {
          ports.log.warn({ err: coerceError(thrown), runId: timer.runId }, 'cannot tell whether the agent’s frozen coordinator came back; asking again');
          return ports.leaseRenewMs;
        }
        ports.log.warn({ err: coerceError(thrown), runId: timer.runId }, 'cannot tell whether the agent’s coordinator lives; the ack deadline is delivered');
        return null;
      },
    );
  };
}

/**
 * Sends the job `agent.disconnected` ahead of its expiry: null when sent (the expiry that follows
 * finds no ack deadline armed), else when to try again.
 */
async function tellLost(ports: AckHoldPorts, job: { runId: string; jobKey: string; agentId: string }, cause: LostCause): Promise<number | null> {
  const { runId, jobKey, agentId } = job;
  ports.log.warn(
    { runId, jobKey, agentId, cause },
    cause === 'agent'
      ? 'the ack deadline passed while the agent has no socket on any coordinator: the job waits for the agent to reclaim it'
      : "the agent's coordinator died before the agent's ack came through: the job waits for the agent to reclaim it",
  );
  try {
    await ports.agentLost(runId, jobKey, agentId, cause);
    return null;
  } catch (thrown) {
    // Delivering the expiry instead would requeue a job its agent may still run: still held, ask again.
    ports.log.warn({ err: coerceError(thrown), runId, jobKey }, 'telling the job its agent is lost failed; asking again');
    return ports.leaseRenewMs;
  }
}
