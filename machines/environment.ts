import type { WaitingReason } from './types.ts';

/**
 * What the environment a job names decides before its dispatch (docs/requirements.md ENV-2), worked
 * out when the run is created from the environment's values at that moment (ENV-4) and frozen into
 * the run: later edits to the environment change nothing for a run that exists.
 */
export type EnvironmentVerdict =
  | { kind: 'pass' }
  /** The job fails with `environment_rules` (a branch outside the globs, an unbound repository, an unknown name). */
  | { kind: 'fail'; message: string }
  | { kind: 'hold'; hold: EnvironmentHold };

/** Why and for how long a job waits for a user's decision before its dispatch. */
export interface EnvironmentHold {
  environment: string;
  /** `security`: the run's trust tier is below the environment's `minimumTrust` (72 h); else `approval`. */
  kind: 'approval' | 'security';
  expiresInMs: number;
  /** The rule that holds it, in words. */
  why: string;
}

export type ApprovalStatus = 'pending' | 'approved' | 'rejected' | 'expired';

/** One hold of a job, opened when it enters `waiting.approval` and decided once (docs/http-api.md#approvals). */
export interface ApprovalGate {
  gateId: string;
  environment: string;
  kind: EnvironmentHold['kind'];
  why: string;
  openedAt: number;
  expiresAt: number;
  status: ApprovalStatus;
  decidedBy: string | null;
  decidedAt: number | null;
  /** The approver's comment, or why the gate closed without a decision. */
  comment: string | null;
}

/** A user's decision on a gate, as the approvals route delivers it. */
export interface ApprovalDecision {
  gateId: string;
  decision: 'approve' | 'reject';
  by: string;
  comment?: string;
}

/** The verdict on an environment a job names; a name the run did not freeze does not exist (ENV-4). */
export function verdictFor(name: string, verdicts: Readonly<Record<string, EnvironmentVerdict>>): EnvironmentVerdict {
  if (Object.hasOwn(verdicts, name)) return verdicts[name] as EnvironmentVerdict;
  return { kind: 'fail', message: `environment ${name} does not exist` };
}

/**
 * The gate id of a job's hold: a short stable hash of its key (one hold per job and run), so a URL
 * names it without the spaces and parentheses of matrix child names. FNV-1a, twice with two seeds.
 */
export function gateIdOf(jobKey: string): string {
  const hash = (seed: number) => {
    let h = seed >>> 0;
    for (let i = 0; i < jobKey.length; i++) {
      h ^= jobKey.charCodeAt(i);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    return h.toString(16).padStart(8, '0');
  };
  return `env-${hash(0x811c9dc5)}${hash(0x050c5d1f)}`;
}

const HOUR_MS = 60 * 60_000;

/** "23 h", or minutes under an hour, "0 min" once past. */
export function durationText(ms: number): string {
  if (ms >= HOUR_MS) return `${Math.round(ms / HOUR_MS)} h`;
  return `${Math.max(0, Math.ceil(ms / 60_000))} min`;
}

/** The waiting reason of a held job; the read side renews the "expires in" part (`renewWaitingMessage`). */
export function approvalWaiting(gate: ApprovalGate, now: number): WaitingReason {
  return { kind: 'approval', message: approvalMessage(gate, now), gateId: gate.gateId, environment: gate.environment, expiresAt: gate.expiresAt };
}

function approvalMessage(gate: Pick<ApprovalGate, 'environment' | 'kind' | 'why' | 'expiresAt'>, now: number): string {
  const security = gate.kind === 'security' ? ` (security hold: ${gate.why})` : '';
  return `waiting for approval of environment ${gate.environment}${security} (expires in ${durationText(gate.expiresAt - now)})`;
}

/** A stored waiting reason read at `now`: a hold's "expires in" counts down; any other reason is as stored. */
export function renewWaitingMessage(reason: WaitingReason | null, now: number): WaitingReason | null {
  if (reason?.kind !== 'approval' || reason.environment === undefined || reason.expiresAt === undefined) return reason;
  const why = /\(security hold: (.*)\) \(expires in/.exec(reason.message)?.[1];
  const gate = { environment: reason.environment, kind: why === undefined ? ('approval' as const) : ('security' as const), why: why ?? '', expiresAt: reason.expiresAt };
  return { ...reason, message: approvalMessage(gate, now) };
}
