import type { Logger } from 'pino';
import { coerceError } from '../../lib/errors.ts';
import type { ArmedTimer } from '../runs/timer-service.ts';

export interface AckHoldPorts {
  /** The agent holding the job's current attempt, if any. */
  agentOf(runId: string, jobKey: string): string | null;
  /** The agent's socket is on this coordinator. */
  isLocal(agentId: string): boolean;
  /** The lease of the coordinator holding the agent's socket; null when no session of it is recorded. */
  holderLease(agentId: string): Promise<{ coordinatorId: string; leaseUntil: number } | null>;
  now(): number;
  leaseTtlMs: number;
  leaseRenewMs: number;
  log: Logger;
}

/**
 * An ack deadline that passes while the attempt's agent is reached through a peer that has stopped
 * renewing its lease says nothing about the agent: the peer may be frozen with the agent's ack in
 * its socket, and the agent may be running the job. Requeueing then would run the job on a second
 * agent while the cancel for the first waits in a dead peer's outbox. So the expiry is held until
 * the question settles: the peer renews (the ack is really missing: deliver), or its lease runs out
 * (its agents' jobs go recovering, and the agent can reclaim from here). Returns how long to wait
 * before asking again, or null to deliver now; never holds longer than three lease lifetimes.
 */
export function ackExpiryHold(ports: AckHoldPorts) {
  const held = new Set<string>();
  const settling = new Set<string>();
  return (timer: ArmedTimer, heldMs: number): Promise<number | null> | null => {
    if (timer.kind !== 'ack' || timer.jobKey === null) return null;
    if (heldMs > 3 * ports.leaseTtlMs) {
      held.delete(timer.deadlineId);
      settling.delete(timer.deadlineId);
      return null;
    }
    const agentId = ports.agentOf(timer.runId, timer.jobKey);
    if (agentId === null || ports.isLocal(agentId)) return null;
    return ports.holderLease(agentId).then(
      (lease) => {
        // A held deadline whose agent's session was just cleared (the peer's lease ran out) waits one
        // interval more, so the agent.disconnected sent for that job reaches it first.
        if (lease === null && held.has(timer.deadlineId) && !settling.has(timer.deadlineId)) {
          settling.add(timer.deadlineId);
          return ports.leaseRenewMs;
        }
        const renewing = lease === null || lease.leaseUntil - ports.now() > ports.leaseTtlMs - 2 * ports.leaseRenewMs;
        if (renewing) {
          held.delete(timer.deadlineId);
          settling.delete(timer.deadlineId);
          return null;
        }
        if (!held.has(timer.deadlineId)) ports.log.warn({ runId: timer.runId, jobKey: timer.jobKey, agentId, peer: lease.coordinatorId }, "ack deadline held: the agent's coordinator is not renewing its lease");
        held.add(timer.deadlineId);
        return ports.leaseRenewMs;
      },
      (thrown: unknown) => {
        ports.log.warn({ err: coerceError(thrown), runId: timer.runId }, 'cannot tell whether the agent’s coordinator lives; the ack deadline is delivered');
        return null;
      },
    );
  };
}
