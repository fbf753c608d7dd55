import type { Logger } from 'pino';
import type { Clock } from '../clock.ts';
import { coerceError } from '../../lib/errors.ts';
import type { SupervisorOptions } from './supervisor.types.ts';
import type { ArmedTimer } from './timer-service.ts';

/** `timer.<kind>.expired`, as the run chart receives it. */
export interface DeadlineEvent {
  type: string;
  deadlineId: string;
  dueAt: number;
  jobKey?: string;
}

export interface DeadlineDeliveryDeps {
  owns: (runId: string) => boolean;
  send: (runId: string, event: DeadlineEvent) => Promise<void>;
  holdTimer?: SupervisorOptions['holdTimer'];
  clock: Clock;
  log: Logger;
}

/**
 * Sends a fired deadline to its run as `timer.<kind>.expired`, unless the hold hook asks to wait
 * (an ack deadline whose agent sits behind a frozen peer, docs/architecture.md#time-durable-deadlines).
 */
export function deliverDeadline(deps: DeadlineDeliveryDeps, timer: ArmedTimer, heldSince = deps.clock.now()): void {
  if (!deps.owns(timer.runId)) return;
  const held = deps.holdTimer?.(timer, deps.clock.now() - heldSince) ?? null;
  if (held === null) return sendDeadline(deps, timer);
  held.then(
    (waitMs) => (waitMs === null ? sendDeadline(deps, timer) : void deps.clock.setTimeout(() => deliverDeadline(deps, timer, heldSince), waitMs)),
    () => sendDeadline(deps, timer),
  );
}

function sendDeadline(deps: DeadlineDeliveryDeps, timer: ArmedTimer): void {
  if (!deps.owns(timer.runId)) return;
  const event: DeadlineEvent = {
    type: `timer.${timer.kind}.expired`,
    deadlineId: timer.deadlineId,
    dueAt: timer.dueAt,
    ...(timer.jobKey ? { jobKey: timer.jobKey } : {}),
  };
  deps.send(timer.runId, event).catch((thrown: unknown) => {
    deps.log.warn({ runId: timer.runId, err: coerceError(thrown) }, 'deadline delivery failed');
  });
}
