import type { Logger } from 'pino';
import { FencedError, coerceError } from './errors.ts';
import type { RuntimeMetrics } from './metrics.ts';
import type { Clock, StoredRun } from './ports.ts';
import type { Supervisor } from './supervisor.ts';

/** The lease and adoption queries ownership needs (src/db implements them). */
export interface OwnershipStore {
  claimLease(args: { id: string; ttlMs: number; now: number }): Promise<{ epoch: number }>;
  renewLease(args: { id: string; epoch: number; ttlMs: number; now: number }): Promise<boolean>;
  findExpired(args: { now: number }): Promise<{ id: string; epoch: number }[]>;
  adoptRunsOf(args: { deadId: string; deadEpoch: number; me: string; myEpoch: number; now: number }): Promise<string[]>;
  /** Runs this coordinator id owned under an earlier epoch (a restart with the same id). */
  reclaimOwnRuns(args: { me: string; myEpoch: number }): Promise<string[]>;
  loadRuns(runIds: string[]): Promise<StoredRun[]>;
}

export interface OwnershipOptions {
  coordinatorId: string;
  renewMs: number;
  ttlMs: number;
  store: OwnershipStore;
  clock: Clock;
  log: Logger;
  metrics: RuntimeMetrics;
  /** Called after runs were restored here, e.g. to treat jobs of agents with no live session as disconnected (FO-2). */
  onAdopted: (runIds: string[]) => void;
  onFenced: (error: FencedError) => void;
}

/**
 * Holds this coordinator's lease (an epoch that fences every write) and adopts the runs of
 * coordinators whose lease expired (FO-1, FO-2). A run never has two owners: adoption bumps
 * the dead coordinator's epoch in the same transaction that moves its runs.
 */
export class Ownership {
  private epochValue = 0;
  private timer: unknown = null;
  private stopped = false;
  private scanning = false;

  constructor(
    private readonly supervisor: Supervisor,
    private readonly options: OwnershipOptions,
  ) {}

  get epoch(): number {
    return this.epochValue;
  }

  get held(): boolean {
    return this.epochValue > 0 && !this.stopped;
  }

  async start(): Promise<void> {
    const { store, coordinatorId, ttlMs, clock } = this.options;
    const { epoch } = await store.claimLease({ id: coordinatorId, ttlMs, now: clock.now() });
    this.epochValue = epoch;
    this.options.metrics.leasesHeld.set(1);
    this.options.log.info({ coordinatorId, epoch }, 'lease claimed');
    const own = await store.reclaimOwnRuns({ me: coordinatorId, myEpoch: epoch });
    await this.restore(own, 'reclaimed from an earlier start');
    await this.scan();
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) this.options.clock.clearTimeout(this.timer);
    this.timer = null;
    this.options.metrics.leasesHeld.set(0);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.options.clock.setTimeout(() => void this.tick(), this.options.renewMs);
  }

  private async tick(): Promise<void> {
    try {
      await this.renew();
      await this.scan();
    } catch (thrown) {
      const error = coerceError(thrown);
      if (error instanceof FencedError) return;
      this.options.log.warn({ err: error }, 'lease tick failed; retrying');
    } finally {
      this.schedule();
    }
  }

  private async renew(): Promise<void> {
    const { store, coordinatorId, ttlMs, clock } = this.options;
    const ok = await store.renewLease({ id: coordinatorId, epoch: this.epochValue, ttlMs, now: clock.now() });
    if (ok || this.stopped) return;
    const error = new FencedError(coordinatorId, this.epochValue, 'lease renewal refused');
    this.stop();
    this.options.onFenced(error);
    throw error;
  }

  private async scan(): Promise<void> {
    if (this.scanning || this.stopped) return;
    this.scanning = true;
    try {
      const { store, coordinatorId, clock } = this.options;
      const expired = await store.findExpired({ now: clock.now() });
      for (const dead of expired.filter((c) => c.id !== coordinatorId)) {
        const args = { deadId: dead.id, deadEpoch: dead.epoch, me: coordinatorId, myEpoch: this.epochValue, now: clock.now() };
        const runIds = await store.adoptRunsOf(args);
        this.options.metrics.takeovers.inc();
        this.options.log.warn({ dead: dead.id, runs: runIds.length }, 'lease expired: adopting its runs');
        await this.restore(runIds, `adopted from ${dead.id}`);
      }
    } finally {
      this.scanning = false;
    }
  }

  private async restore(runIds: string[], why: string): Promise<void> {
    if (runIds.length === 0) return;
    const started = performance.now();
    const stored = await this.options.store.loadRuns(runIds);
    const report = this.supervisor.restore(stored);
    const ms = Math.round(performance.now() - started);
    this.options.log.info({ why, restored: report.restored.length, refused: report.refused.length, ms }, 'runs restored');
    if (report.restored.length > 0) this.options.onAdopted(report.restored);
  }
}
