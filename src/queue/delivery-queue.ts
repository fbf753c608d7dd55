import type { ClaimedDelivery, Delivery, DeliveryKey, IntakeClaim } from '../db/deliveries.ts';
import { backoffMs } from '../../lib/backoff.ts';

/**
 * Thrown by the delivery processor for failures worth retrying (INT-6): never "no lock file".
 * `maxAttempts` bounds the retries of a failure that is only briefly worth waiting for.
 */
export class TransientDeliveryError extends Error {
  override readonly name = 'TransientDeliveryError';
  constructor(
    readonly detail: string,
    readonly maxAttempts: number = MAX_INTAKE_ATTEMPTS,
  ) {
    super(detail);
  }
}

/** A delivery that can never succeed as it is (a malformed commit id): dead at once, with this reason. */
export class PermanentDeliveryError extends Error {
  override readonly name = 'PermanentDeliveryError';
  constructor(readonly detail: string) {
    super(detail);
  }
}

/**
 * Thrown where processing would write for a delivery whose recording came to nothing
 * (`Delivery.recording`: a duplicate, or its INSERT failed). Processing stops having written nothing;
 * the stored twin, or the sender's retry, is processed instead.
 */
export class DeliveryNotRecordedError extends Error {
  override readonly name = 'DeliveryNotRecordedError';
  constructor(deliveryId: string) {
    super(`delivery ${deliveryId} was not recorded; its processing stops`);
  }
}

/** Whether `delivery`'s row is stored: at once for a delivery read from the table, else once its recording settles. */
export async function isRecorded(delivery: Delivery): Promise<boolean> {
  return delivery.recording === undefined || (await delivery.recording);
}

/** A commit the repository does not have: a push race explains seconds (5 + 10 + 20 s), not an hour. */
export const ABSENT_COMMIT_ATTEMPTS = 4;

/**
 * Processes one delivery this worker has claimed and records the result in the deliveries table:
 * a final status, a retry at a later time, or dead. Never throws.
 */
/** Processes one claimed delivery; `loaded` spares reading it back when the caller has it. */
export type DeliveryProcessor = (key: DeliveryKey, worker: string, loaded?: Delivery) => Promise<'done' | { retryAt: number } | 'dead'>;

/**
 * The intake queue port: the embedded one works from the deliveries table; the BullMQ one
 * shares work between coordinators through Redis. Same processor, same retry schedule.
 */
export interface DeliveryQueue {
  readonly kind: 'embedded' | 'bullmq';
  /** A delivery was just recorded: process it soon. Losing this call loses nothing (the sweep finds it). */
  notify(key: DeliveryKey): void;
  /**
   * A claim for a delivery about to be recorded, whose body is `bytes` long, when this queue can
   * process it at once (then it is handed over with `processClaimed`); null leaves it to the queue's usual way.
   */
  claimAtIntake?(bytes: number): IntakeClaim | null;
  /**
   * Processes at once a delivery being recorded with the claim `claimAtIntake` gave; it writes nothing
   * until `delivery.recording` resolves true, and stops if it resolves false.
   */
  processClaimed?(delivery: ClaimedDelivery): void;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Resolves when nothing is being processed and nothing due is waiting (tests, shutdown). */
  idle(): Promise<void>;
}

/** INT-6: 5 s doubling, capped at 10 min, 10 attempts; then the delivery is dead. */
export const MAX_INTAKE_ATTEMPTS = 10;
export function retryDelayMs(attempt: number): number {
  return backoffMs(attempt, { baseMs: 5_000, maxMs: 10 * 60_000 });
}
