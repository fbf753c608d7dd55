import { approvalWaiting, durationText, gateIdOf } from './environment.ts';
import type { ApprovalGate, EnvironmentHold } from './environment.ts';
import type { JobEvent } from './job.events.ts';
import type { WaitingReason } from './types.ts';

/** The hold of a job as the chart keeps it (docs/http-api.md#approvals): pure helpers of `waiting.approval`. */

/** The gate a hold opens at `at`, and the reason the job shows while it waits. */
export function openGate(jobKey: string, hold: EnvironmentHold, at: number): { gate: ApprovalGate; waiting: WaitingReason } {
  const gate: ApprovalGate = {
    gateId: gateIdOf(jobKey),
    environment: hold.environment,
    kind: hold.kind,
    why: hold.why,
    openedAt: at,
    expiresAt: at + hold.expiresInMs,
    status: 'pending',
    decidedBy: null,
    decidedAt: null,
    comment: null,
  };
  return { gate, waiting: approvalWaiting(gate, at) };
}

/** A decision on this gate, as opposed to one meant for another. */
export function decides(gate: ApprovalGate | null, event: JobEvent, decision: 'approve' | 'reject'): boolean {
  return event.type === 'job.approval' && gate !== null && gate.status === 'pending' && event.gateId === gate.gateId && event.decision === decision;
}

/**
 * The gate as the event leaving `waiting.approval` closes it: a user's decision, the deadline, or the
 * job ending otherwise (cancelled, skipped), which closes it `rejected` so no record stays pending.
 */
export function closeGate(gate: ApprovalGate, event: JobEvent, at: number): ApprovalGate {
  if (event.type === 'job.approval' && event.gateId === gate.gateId) {
    const status = event.decision === 'approve' ? 'approved' : 'rejected';
    return { ...gate, status, decidedBy: event.by, decidedAt: at, comment: event.comment ?? null };
  }
  if (event.type === 'timer.approval.expired') return { ...gate, status: 'expired', decidedBy: 'approval deadline', decidedAt: at };
  const why = 'reason' in event && typeof event.reason === 'string' ? event.reason : event.type;
  return { ...gate, status: 'rejected', decidedBy: 'switchyard', decidedAt: at, comment: `the job ended before a decision: ${why}` };
}

/** Why a job whose hold was rejected or expired ended cancelled. */
export function closedOutcome(gate: ApprovalGate): string {
  const environment = `environment ${gate.environment}`;
  if (gate.status === 'expired') return `approval of ${environment} expired: no decision within ${durationText(gate.expiresAt - gate.openedAt)}`;
  const comment = gate.comment ? `: ${gate.comment}` : '';
  return `approval of ${environment} rejected by ${gate.decidedBy ?? 'unknown'}${comment}`;
}
