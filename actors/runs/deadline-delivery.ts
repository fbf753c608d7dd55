import type { Logger } from 'pino';
import { coerceError } from '../../lib/errors.ts';
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
  log: Logger;
}

/** Sends a fired deadline to its run as `timer.<kind>.expired`; a delivery that fails is logged (the run is gone, or no longer here). */
export function deliverDeadline(deps: DeadlineDeliveryDeps, timer: ArmedTimer): void {
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
