import type { Logger } from 'pino';
import { FencedError, TransientStoreError } from './errors.ts';
import { coerceError } from '../../lib/errors.ts';
import type { RuntimeMetrics } from './metrics.ts';
import type { StoredRun } from './ports.ts';
import type { Clock } from '../clock.ts';
import type { Supervisor } from './supervisor.ts';

/** What a scan for dead peers finds: whose lease ran out, and when the next one runs out if nobody renews it. */
export interface PeerLeases {
  /**
   * Dead coordinators that still own live runs, the longest expired first: their lease ran out
   * (`lease`), or their process is gone (`process`: its liveness lock is free and its renewals
   * overdue). A peer whose process is gone is listed whether or not it owns live runs: adopting it
   * ends its lease, and so its agent sessions, at once.
   */
  expired: { id: string; epoch: number; why: 'lease' | 'process' }[];
  /** The earliest lease end still ahead among the peers that own live runs; null if there is none. */
  nextEnd: number | null;
  /**
   * Among those peers that name a liveness lock and are not late yet: the earliest moment after
   * which one's renewals are overdue (its last renewal + `overdueMs`); null if there is none.
   */
  nextOverdue: number | null;
}

/** The lease and adoption queries ownership needs (src/db implements them). */
export interface OwnershipStore {
  /** `livenessKey`: the liveness lock this process holds, written with the lease; null: none. */
  claimLease(args: { id: string; ttlMs: number; now: number; livenessKey: number | null }): Promise<{ epoch: number }>;
  renewLease(args: { id: string; epoch: number; ttlMs: number; now: number }): Promise<boolean>;
  /** The peers (all coordinators but `me`) that own live runs: which are dead (a process gone counts once its renewals are `overdueMs` late), and the next lease to end. */
  peerLeases(args: { now: number; me: string; overdueMs: number }): Promise<PeerLeases>;
  /** Moves a dead peer's live runs here; a database out of reach for a moment throws TransientStoreError (the move may have committed unseen). */
  adoptRunsOf(args: { deadId: string; deadEpoch: number; me: string; myEpoch: number; now: number; overdueMs: number }): Promise<string[]>;
  /** The live runs owned here under `myEpoch`, as the database has them. */
  ownedLiveRuns(args: { me: string; myEpoch: number }): Promise<string[]>;
  /** Runs this coordinator id owned under an earlier epoch (a restart with the same id). */
  reclaimOwnRuns(args: { me: string; myEpoch: number }): Promise<string[]>;
  /** Ends the lease now (a clean shutdown); false if it was taken over already. */
  releaseLease(args: { id: string; epoch: number }): Promise<boolean>;
  /** The runs' stored state; a database out of reach for a moment throws TransientStoreError. */
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
  /**
   * Called after runs were restored here, before their deadlines are armed: jobs whose agent has no
   * live session are treated as disconnected first (FO-2), so an ack deadline that passed while no one
   * owned the run does not requeue a job its agent may still be running.
   */
  onAdopted: (runIds: string[]) => Promise<void>;
  onFenced: (error: FencedError) => void;
  /**
   * Takes the lock whose release tells peers this process is gone (src/db/liveness-lock.ts), before
   * the lease is claimed; it is let go when ownership stops. Without it, peers wait for the lease to end.
   */
  takeLiveness?: () => Promise<{ key: number; close(): Promise<void> }>;
}

/** Renew intervals a peer's last renewal may lie behind before its free liveness lock counts. */
const OVERDUE_RENEWALS = 1.5;

/**
 * Holds this coordinator's lease (an epoch that fences every write) and adopts the runs of
 * coordinators whose lease expired or whose process is gone (FO-1, FO-2). A run never has two owners: adoption bumps
 * the dead coordinator's epoch in the same transaction that moves its runs.
 */
export class Ownership {
  private epochValue = 0;
  private timer: unknown = null;
  /** A scan at the next moment a peer could be found dead (`watchPeers`). */
  private peerWatch: unknown = null;
  private stopped = false;
  private scanning = false;
  private restoring = 0;
  /**
   * Runs moved here whose snapshots could not be read (a transient database error): they are owned
   * here with no actor, so each scan tries to restore them again, and their inbox waits meanwhile.
   */
  private readonly unrestored = new Map<string, { why: string; cause: AdoptionCause }>();
  /** An adoption failed with a transient error: it may have committed unseen, leaving runs owned here with no actor. */
  private adoptionUnsure = false;
  private liveness: { key: number; close(): Promise<void> } | null = null;

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

  /**
   * How late a peer's renewals must be before a free liveness lock makes it dead: a live peer whose
   * lock connection failed a moment ago still renews every `renewMs`, and is not taken for dead.
   */
  private get overdueMs(): number {
    return Math.round(OVERDUE_RENEWALS * this.options.renewMs);
  }

  /** Runs are being moved here and not all actors exist yet. */
  get adopting(): boolean {
    return this.restoring > 0 || this.unrestored.size > 0;
  }

  async start(): Promise<void> {
    const { store, coordinatorId, ttlMs, clock } = this.options;
    this.liveness = await this.takeLiveness();
    const { epoch } = await store.claimLease({ id: coordinatorId, ttlMs, now: clock.now(), livenessKey: this.liveness?.key ?? null }).catch(async (thrown: unknown) => {
      await this.stop();
      throw thrown;
    });
    this.epochValue = epoch;
    this.options.metrics.leasesHeld.set(1);
    this.options.log.info({ coordinatorId, epoch }, 'lease claimed');
    // Renewals start before the runs are restored, which can take longer than the lease lasts; the
    // ticks' scans wait for the reclaim.
    this.schedule();
    try {
      await this.alone(() => this.adopt(() => store.reclaimOwnRuns({ me: coordinatorId, myEpoch: epoch }), 'reclaimed from an earlier start', 'restart'));
    } catch (thrown) {
      await this.stop();
      throw thrown;
    }
    // A first scan that fails is tried again at the next tick, as every scan is.
    await this.scanned();
  }

  async stop(options: { release?: boolean } = {}): Promise<void> {
    const wasHeld = this.held;
    this.stopped = true;
    if (this.timer !== null) this.options.clock.clearTimeout(this.timer);
    this.timer = null;
    this.watchPeers(Infinity);
    this.options.metrics.leasesHeld.set(0);
    if (options.release === true && wasHeld) await this.release();
    const liveness = this.liveness;
    this.liveness = null;
    await liveness?.close();
  }

  private async release(): Promise<void> {
    try {
      const released = await this.options.store.releaseLease({ id: this.options.coordinatorId, epoch: this.epochValue });
      this.options.log.info({ released }, 'lease released: peers adopt the runs at once');
    } catch (thrown) {
      this.options.log.warn({ err: coerceError(thrown) }, 'releasing the lease failed; peers adopt after the TTL');
    }
  }

  /** The liveness lock, or null (none asked for, or it could not be taken: peers then wait for the lease to end). */
  private async takeLiveness(): Promise<{ key: number; close(): Promise<void> } | null> {
    try {
      return (await this.options.takeLiveness?.()) ?? null;
    } catch (thrown) {
      this.options.log.warn({ err: coerceError(thrown) }, "cannot take the liveness lock: should this process die, peers adopt its runs at its lease's end only");
      return null;
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.options.clock.setTimeout(() => void this.tick(), this.options.renewMs);
  }

  /**
   * The next tick is scheduled once the lease is renewed, not once the scan is done: adopting a dead
   * peer's runs can take longer than the lease lasts (10,000 runs: 3 s against the bench's 1 s TTL),
   * and a lease left to run out meanwhile lets a third coordinator take every run over again.
   */
  private async tick(): Promise<void> {
    const renewed = await this.renewed();
    this.schedule();
    if (renewed) await this.scanned();
  }

  private async renewed(): Promise<boolean> {
    try {
      await this.renew();
      return true;
    } catch (thrown) {
      this.tickFailed(thrown);
      return false;
    }
  }

  private async scanned(): Promise<void> {
    try {
      await this.scan();
    } catch (thrown) {
      this.tickFailed(thrown);
    }
  }

  private tickFailed(thrown: unknown): void {
    const error = coerceError(thrown);
    if (error instanceof FencedError) return;
    this.options.log.warn({ err: error }, 'lease tick failed; retrying');
  }

  private async renew(): Promise<void> {
    const { store, coordinatorId, ttlMs, clock } = this.options;
    const ok = await store.renewLease({ id: coordinatorId, epoch: this.epochValue, ttlMs, now: clock.now() });
    if (ok || this.stopped) return;
    const error = new FencedError(coordinatorId, this.epochValue, 'lease renewal refused');
    void this.stop();
    this.options.onFenced(error);
    throw error;
  }

  /** Runs `work` unless a scan or the start's reclaim is under way (then it is skipped). */
  private async alone(work: () => Promise<void>): Promise<void> {
    if (this.scanning || this.stopped) return;
    this.scanning = true;
    try {
      await work();
    } finally {
      this.scanning = false;
    }
  }

  private async scan(): Promise<void> {
    await this.alone(async () => {
      await this.restoreUnrestored();
      await this.findStranded();
      const { store, coordinatorId, clock } = this.options;
      const overdueMs = this.overdueMs;
      const { expired, nextEnd, nextOverdue } = await store.peerLeases({ now: clock.now(), me: coordinatorId, overdueMs });
      this.watchPeers(Math.min(nextEnd ?? Infinity, nextOverdue ?? Infinity));
      for (const dead of expired) {
        const args = { deadId: dead.id, deadEpoch: dead.epoch, me: coordinatorId, myEpoch: this.epochValue, now: clock.now(), overdueMs };
        await this.adopt(async () => {
          const runIds = await store.adoptRunsOf(args).catch((thrown: unknown) => {
            if (thrown instanceof TransientStoreError) this.adoptionUnsure = true;
            throw thrown;
          });
          this.options.metrics.takeovers.inc({ why: dead.why });
          this.options.log.warn({ dead: dead.id, runs: runIds.length }, deathNotice(dead.why, runIds.length));
          return runIds;
        }, `adopted from ${dead.id}`, 'takeover');
      }
    });
  }

  /**
   * Scans again just after `at`, the next moment a peer could be found dead (its lease end, or its
   * renewals overdue), not at the tick after: a peer killed just after its renewal is adopted up to
   * one renew interval sooner. A live peer renews first, and the next scan moves the watch. So a
   * coordinator scans at most once per tick and once per live peer's renewal. A moment later than
   * two ticks from now is left to the ticks' scans (a peer's clock far ahead must not arm a timer
   * past what setTimeout holds, which would fire at once, again and again).
   */
  private watchPeers(at: number): void {
    const { clock, renewMs } = this.options;
    if (this.peerWatch !== null) clock.clearTimeout(this.peerWatch);
    this.peerWatch = null;
    const delay = at - clock.now() + 1;
    if (this.stopped || !(delay <= 2 * renewMs)) return;
    this.peerWatch = clock.setTimeout(() => {
      this.peerWatch = null;
      if (this.held) void this.scanned();
    }, delay);
  }

  /** Moves runs here, restores their actors, then reattaches their jobs before arming any restored deadline. */
  private async adopt(move: () => Promise<string[]>, why: string, cause: AdoptionCause): Promise<void> {
    const started = performance.now();
    const restored = await this.restore(move, why, cause);
    try {
      if (restored.length > 0) await this.options.onAdopted(restored);
    } catch (thrown) {
      this.options.log.error({ err: coerceError(thrown) }, 'reattaching restored runs failed');
    } finally {
      this.supervisor.armDeferredTimers(restored);
    }
    if (restored.length === 0) return;
    const seconds = (performance.now() - started) / 1000;
    this.options.metrics.adoptionSeconds.observe({ cause }, seconds);
    // A takeover's end at the level of its start ('lease expired: adopting its runs'), with what it took.
    const level = cause === 'takeover' ? 'warn' : 'info';
    this.options.log[level]({ why, runs: restored.length, ms: Math.round(seconds * 1000) }, 'restored runs are live: reattached, deadlines armed');
  }

  /** Until the moved runs' actors exist, `adopting` holds off the inbox (their events would be dropped). */
  private async restore(move: () => Promise<string[]>, why: string, cause: AdoptionCause): Promise<string[]> {
    this.restoring += 1;
    try {
      const runIds = await move();
      if (runIds.length === 0) return [];
      const started = performance.now();
      const stored = await this.load(runIds, why, cause);
      if (stored.length === 0) return [];
      const report = this.supervisor.restore(stored, { deferTimers: true });
      const ms = Math.round(performance.now() - started);
      this.options.log.info({ why, restored: report.restored.length, refused: report.refused.length, ms }, 'runs restored');
      return report.restored;
    } finally {
      this.restoring -= 1;
    }
  }

  /**
   * The moved runs' snapshots. The runs are owned here already, so a read cut off by a transient
   * error must not leave them with no actor for ever (their events dropped, their deadlines never
   * armed): they are kept for the next scan to restore. Any other error is thrown, as before.
   */
  private async load(runIds: string[], why: string, cause: AdoptionCause): Promise<StoredRun[]> {
    try {
      return await this.options.store.loadRuns(runIds);
    } catch (thrown) {
      if (!(thrown instanceof TransientStoreError)) throw thrown;
      for (const runId of runIds) this.unrestored.set(runId, { why, cause });
      this.options.log.error({ err: coerceError(thrown), runs: runIds.length, why }, 'reading moved runs failed; they are owned here, and restored at the next scan');
      return [];
    }
  }

  /**
   * After an adoption whose answer was lost: the runs owned here under this epoch that have no actor
   * are restored (the dead peer owns nothing any more, so no scan would find them again). A run whose
   * actor crashed here is among them, and is restored as a restart would.
   */
  private async findStranded(): Promise<void> {
    if (!this.adoptionUnsure) return;
    const owned = await this.options.store.ownedLiveRuns({ me: this.options.coordinatorId, myEpoch: this.epochValue });
    this.adoptionUnsure = false;
    const stranded = owned.filter((runId) => !this.supervisor.owns(runId) && !this.unrestored.has(runId));
    if (stranded.length === 0) return;
    this.options.log.warn({ runs: stranded.length }, 'runs owned here with no actor (an adoption whose answer was lost): restoring them');
    await this.adopt(() => Promise.resolve(stranded), 'moved here by an adoption whose answer was lost', 'takeover');
  }

  /** Restores the runs whose load failed, with the cause they were moved for. */
  private async restoreUnrestored(): Promise<void> {
    for (const cause of ['restart', 'takeover'] as const) {
      const runIds = [...this.unrestored].filter(([, moved]) => moved.cause === cause).map(([runId]) => runId);
      if (runIds.length === 0) continue;
      const why = `${this.unrestored.get(runIds[0] as string)?.why ?? ''}; read again`;
      for (const runId of runIds) this.unrestored.delete(runId);
      await this.adopt(() => Promise.resolve(runIds), why, cause);
    }
  }
}

type AdoptionCause = 'takeover' | 'restart';

/** The line a takeover logs; a peer gone with no live run only has its lease ended. */
function deathNotice(why: PeerLeases['expired'][number]['why'], runs: number): string {
  if (why === 'lease') return 'lease expired: adopting its runs';
  return runs > 0 ? 'process gone (its liveness lock is free): adopting its runs' : 'process gone (its liveness lock is free): its lease is ended; it owned no live run';
}
