import type { Logger } from 'pino';
import { forEachConcurrently } from '../../lib/concurrently.ts';
import type { DeliveryKey, NewDelivery } from '../db/deliveries.ts';
import type { RepositoryRegistration } from '../db/repositories.ts';
import type { LockFileCache } from '../lockfile/cache.ts';
import type { LockFileProvider } from '../lockfile/providers/types.ts';
import { resolveLockFile } from '../lockfile/resolve.ts';
import { MINUTE_MS, SCHEDULE_SOURCE, firesInMinute, scheduleProblem, schedulesOf } from './schedule-event.ts';
import type { Schedule, ScheduleBody } from './schedule-event.ts';

export interface ScheduleClockDeps {
  repositories: () => Promise<RepositoryRegistration[]>;
  providerFor: (repo: RepositoryRegistration) => LockFileProvider;
  cache: LockFileCache;
  record: (delivery: NewDelivery) => Promise<boolean>;
  /** A fresh delivery was recorded: process it. */
  notify: (key: DeliveryKey) => void;
  now: () => number;
  log: Logger;
}

/** Ticks run this long after a minute starts, so a clock a little behind still sees the new minute. */
const TICK_OFFSET_MS = 1_000;
/** Minutes a stalled process missed are fired late, up to this many; a coordinator down longer skips them. */
const MAX_CATCH_UP_MINUTES = 5;
/**
 * How long a repository's schedules are used before its default branch head is read again. A push
 * this coordinator processes forgets them at once; GitHub repositories are read less often (two
 * API calls a read).
 */
const REFRESH_MS: Record<RepositoryRegistration['provider'], number> = { local: MINUTE_MS, github: 5 * MINUTE_MS };

/** Repositories whose default branch is read at once. */
const READ_CONCURRENCY = 8;

interface IndexedRepository {
  sha: string;
  branch: string;
  schedules: Schedule[];
  readAt: number;
}

const minuteOf = (at: number) => Math.floor(at / MINUTE_MS) * MINUTE_MS;

/**
 * Fires `schedule` triggers (docs/lockfile.md#schedules): at each minute it reads the schedules at
 * the head of every registered repository's default branch and records one delivery per schedule
 * that fires, keyed by repository, schedule and minute. Every coordinator runs a clock; the
 * delivery key makes the second recording of the same minute a duplicate, so a schedule fires once.
 */
export class ScheduleClock {
  readonly #index = new Map<string, IndexedRepository>();
  #lastMinute: number | null = null;
  #timer: NodeJS.Timeout | null = null;
  #ticking: Promise<unknown> = Promise.resolve();
  #running = false;

  constructor(private readonly deps: ScheduleClockDeps) {}

  start(): void {
    this.#lastMinute ??= minuteOf(this.deps.now()) - MINUTE_MS;
    this.#running = true;
    this.#arm();
  }

  async stop(): Promise<void> {
    this.#running = false;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#ticking;
  }

  /** The repository's default branch may have moved: its schedules are read again at the next tick. */
  forget(repository: string): void {
    this.#index.delete(repository);
  }

  /**
   * Records a delivery for every schedule that fired in the minutes since the last tick (the
   * current one included) and returns the fresh ones. A failed recording leaves those minutes to
   * the next tick; the ones recorded are duplicates then.
   */
  async tick(now: number): Promise<DeliveryKey[]> {
    const current = minuteOf(now);
    const previous = this.#lastMinute ?? current - MINUTE_MS;
    const minutes: number[] = [];
    for (let minute = Math.max(previous + MINUTE_MS, current - (MAX_CATCH_UP_MINUTES - 1) * MINUTE_MS); minute <= current; minute += MINUTE_MS) minutes.push(minute);
    const repositories = await this.deps.repositories();
    const registered = new Set(repositories.map((repo) => repo.name));
    for (const name of this.#index.keys()) if (!registered.has(name)) this.#index.delete(name);
    const due: ScheduleBody[] = [];
    // A few repositories at a time: a slow GitHub answer does not hold up every other repository.
    await forEachConcurrently(repositories, READ_CONCURRENCY, async (repo) => {
      const read = await this.#schedules(repo, now);
      if (read === null) return;
      for (const schedule of read.schedules) {
        const fired = minutes.filter((minute) => firesInMinute(schedule, minute));
        for (const minute of fired) due.push({ repository: repo.name, branch: read.branch, ...schedule, scheduledAt: new Date(minute).toISOString() });
      }
    });
    const fresh = await Promise.all(due.map((body) => this.#record(body, now)));
    this.#lastMinute = current;
    return fresh.filter((key): key is DeliveryKey => key !== null);
  }

  async #record(body: ScheduleBody, now: number): Promise<DeliveryKey | null> {
    const key = { source: SCHEDULE_SOURCE, deliveryId: `${body.repository}|${body.cronExpression}|${body.timezone}|${body.scheduledAt}` };
    const recorded = await this.deps.record({ ...key, eventName: 'schedule', headers: {}, body: Buffer.from(JSON.stringify(body)), now });
    if (!recorded) return null;
    this.deps.log.info({ ...key, repository: body.repository }, 'schedule fired');
    this.deps.notify(key);
    return key;
  }

  /** The repository's valid schedules, read again once they are older than its refresh period; null when never read. */
  async #schedules(repo: RepositoryRegistration, now: number): Promise<IndexedRepository | null> {
    const cached = this.#index.get(repo.name) ?? null;
    if (cached !== null && now - cached.readAt < REFRESH_MS[repo.provider]) return cached;
    const provider = this.deps.providerFor(repo);
    const head = await provider.defaultBranchHead();
    if ('transient' in head) {
      this.deps.log.warn({ repository: repo.name, reason: head.transient }, 'schedules not read: the default branch head is unknown');
      return cached;
    }
    if (cached !== null && cached.sha === head.sha) return this.#remember(repo.name, { ...cached, readAt: now });
    const lock = await resolveLockFile({ candidates: [{ provider, cloneUrl: null }], sha: head.sha, cache: this.deps.cache });
    if (lock.kind === 'transient' || lock.kind === 'absent') {
      this.deps.log.warn({ repository: repo.name, sha: head.sha, reason: lock.detail }, 'schedules not read: the lock file could not be read');
      return cached;
    }
    if (lock.kind === 'corrupt' || lock.kind === 'invalid') {
      const reason = lock.kind === 'corrupt' ? lock.error.message : lock.detail;
      this.deps.log.warn({ repository: repo.name, sha: head.sha, reason }, 'no schedules: the lock file at the default branch head cannot be used');
    }
    const schedules = lock.kind === 'found' ? this.#valid(repo.name, head.sha, schedulesOf(lock.lock.workflows)) : [];
    return this.#remember(repo.name, { sha: head.sha, branch: head.branch, schedules, readAt: now });
  }

  #valid(repository: string, sha: string, schedules: Schedule[]): Schedule[] {
    return schedules.filter((schedule) => {
      const problem = scheduleProblem(schedule);
      if (problem !== null) this.deps.log.warn({ repository, sha, problem }, 'a schedule trigger can never fire');
      return problem === null;
    });
  }

  #remember(repository: string, indexed: IndexedRepository): IndexedRepository {
    this.#index.set(repository, indexed);
    return indexed;
  }

  #arm(): void {
    if (!this.#running) return;
    const now = this.deps.now();
    this.#timer = setTimeout(() => {
      this.#ticking = this.tick(this.deps.now())
        .catch((error: unknown) => this.deps.log.error({ err: error }, 'schedule tick failed; its minutes are tried again at the next tick'))
        .finally(() => this.#arm());
    }, minuteOf(now) + MINUTE_MS + TICK_OFFSET_MS - now);
    this.#timer.unref();
  }
}
