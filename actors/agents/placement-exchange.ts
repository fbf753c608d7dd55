import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { AgentRequirements } from '../../machines/types.ts';
import type { AgentRegistry, AgentSession } from './registry.ts';
import { Batcher, type BatchResults } from '../../lib/batcher.ts';
import { throwFirstRejection } from '../../lib/concurrently.ts';
import { coerceError } from '../../lib/errors.ts';
import type { IncomingRunEvent } from '../runs/supervisor.ts';
import { backoffMs } from '../../lib/backoff.ts';

/** A job its owner could not place on one of its own agents, offered to every coordinator's agents. */
export interface OfferedJob {
  runId: string;
  jobKey: string;
  attempt: number;
  requirements: AgentRequirements;
}

/** Placement requests shared by every coordinator on the database (src/db implements it). */
export interface PlacementExchangeStore {
  /** Offers the jobs in one write. */
  publish(jobs: readonly OfferedJob[]): Promise<void>;
  /** Requests of other coordinators that no one holds a live claim on, oldest first. */
  open(limit: number): Promise<OfferedJob[]>;
  /** Takes one attempt's request for a while; false when another coordinator has it. */
  claim(job: OfferedJob): Promise<boolean>;
  /** The owner takes back its own request for good (claim and withdrawal in one), or says why not. */
  reclaim(job: OfferedJob): Promise<ReclaimOutcome>;
  /** Whether any other coordinator holds a live lease on the database. */
  peersAlive(): Promise<boolean>;
  /** Tells every coordinator that this one started, so they offer it their waiting jobs at once. */
  announce(): Promise<void>;
  /** The request is answered or moot; with `attempt`, only that attempt's (a newer one stays). */
  withdraw(runId: string, jobKey?: string, attempt?: number): Promise<void>;
}

/**
 * What the owner's taking back of its request found: `taken` (removed: the job is the owner's to
 * grant), `held` (a request of the job is there but not the owner's to take: a peer's live claim,
 * or another owner's or attempt's request), `absent` (no request of the job is stored: a peer that
 * granted it removed it, or it was removed without a grant, by an adoption's clean-up say).
 */
export type ReclaimOutcome = 'taken' | 'held' | 'absent';

/** A request to be written: `writing` while its batch's statement runs, null while it waits for one. */
interface PendingRequest {
  job: OfferedJob;
  writing: Promise<void> | null;
}

export type FindAgent = (job: OfferedJob) => { session: AgentSession } | { none: string };

const BATCH = 100;
const PUBLISH_RETRY_CAP_MS = 5_000;
/** Requests written by one statement at most. */
const PUBLISH_BATCH = 500;

function publishKey(job: OfferedJob): string {
  return `${job.runId}\u0000${job.jobKey}\u0000${job.attempt}`;
}

/**
 * Any agent serves any run (FO-3): a job no agent of its owner can take is published, and every
 * coordinator offers its own free agents to published jobs. A grant is given once: the granting
 * coordinator claims the request first, whether it owns the job or only holds the agent.
 */
export class PlacementExchange {
  private offering: Promise<void> | null = null;
  private offerAgain = false;
  /** Whether the last read of open requests found any: until then a freed slot need not look. */
  private peersWaiting = true;
  /** Runs that published a request from this process and have not withdrawn all of them. */
  private readonly publishedRuns = new Set<string>();
  /** Requests being written (or waiting to be written again), by run, job and attempt. */
  private readonly publishing = new Map<string, PendingRequest>();
  /**
   * Whether another coordinator may take a job published here. Alone, nothing is published (no one
   * would read it) and each placement costs no write; when a peer joins, `onPeersJoined` publishes
   * the jobs still waiting. Unknown (before the first look) counts as alive.
   */
  private peersKnownAlive = true;
  private onPeersJoined: () => void = () => undefined;
  /**
   * Requests are written a batch at a time: a burst (a takeover's adopted jobs asking for agents
   * again, 10,000 of them) takes a few statements, where one statement each filled the pool and held
   * back the group commits queued behind them.
   */
  private readonly publisher = new Batcher<OfferedJob>((jobs) => this.writeRequests(jobs), PUBLISH_BATCH);

  constructor(
    private readonly store: PlacementExchangeStore,
    private readonly registry: AgentRegistry,
    private readonly find: FindAgent,
    private readonly deliver: (runId: string, event: IncomingRunEvent) => Promise<unknown>,
    private readonly log: Logger,
  ) {}

  /**
   * A request that could not be written is written again, with a capped backoff, until it is or the
   * job is withdrawn: the job is published once per attempt, so a lost write would leave it waiting
   * for this coordinator's agents alone.
   */
  publish(job: OfferedJob, tries = 0): void {
    const key = publishKey(job);
    const pending: PendingRequest = { job, writing: null };
    this.publishing.set(key, pending);
    this.publishedRuns.add(job.runId);
    this.publisher.add(job).then(
      () => this.publishing.get(key) === pending && this.publishing.delete(key),
      (thrown: unknown) => {
        pending.writing = null;
        this.log.warn({ err: coerceError(thrown), runId: job.runId, jobKey: job.jobKey }, 'publishing a placement request failed; trying again');
        const retry = setTimeout(() => this.publishing.get(key) === pending && this.publish(job, tries + 1), backoffMs(tries + 1, { baseMs: 250, maxMs: PUBLISH_RETRY_CAP_MS }));
        retry.unref();
      },
    );
  }

  /** A request withdrawn while it waited for its batch is not written: nothing would remove it. */
  private async writeRequests(jobs: OfferedJob[]): Promise<BatchResults<void>> {
    const waiting = jobs.flatMap((job) => {
      const pending = this.publishing.get(publishKey(job));
      return pending?.job === job ? [pending] : [];
    });
    if (waiting.length > 0) {
      const written = this.store.publish(waiting.map((pending) => pending.job));
      for (const pending of waiting) pending.writing = written;
      await written;
    }
    return jobs.map(() => undefined);
  }

  /** False while no other coordinator is alive: a job waiting here is then offered to no one else. */
  get hasPeers(): boolean {
    return this.peersKnownAlive;
  }

  /** `publishWaiting` runs when a peer appears after this coordinator was alone. */
  whenPeersJoin(publishWaiting: () => void): void {
    this.onPeersJoined = publishWaiting;
  }

  /** Announces this coordinator to its peers, then looks whether any are alive. */
  async join(): Promise<void> {
    await this.store.announce();
    await this.checkPeers();
  }

  /** Looks at the peers' leases again (a signal that one joined, the poll, a reconnect). */
  async checkPeers(): Promise<void> {
    const alive = await this.store.peersAlive();
    const joined = alive && !this.peersKnownAlive;
    this.peersKnownAlive = alive;
    if (joined) this.onPeersJoined();
  }

  /**
   * The owner's own request, taken back and removed in one write before it grants the job here.
   * One still waiting for its write (queued behind a batch, or between retries) is taken back here:
   * it is never written, and no peer can hold it. One being written is taken back once its write is
   * done: the delete would find no row before, and the job would be held back as if a peer held it.
   */
  async reclaim(job: OfferedJob): Promise<ReclaimOutcome> {
    const key = publishKey(job);
    const pending = this.publishing.get(key);
    const written = pending?.writing ? await pending.writing.then(() => true, () => false) : pending === undefined;
    if (!written) {
      this.publishing.delete(key);
      return 'taken';
    }
    const outcome = await this.store.reclaim(job);
    if (outcome !== 'held') this.publishing.delete(key);
    return outcome;
  }

  withdraw(runId: string, jobKey?: string, attempt?: number): void {
    for (const [key, { job }] of this.publishing) {
      if (job.runId === runId && (jobKey === undefined || job.jobKey === jobKey) && (attempt === undefined || job.attempt === attempt)) this.publishing.delete(key);
    }
    // A run that published nothing from here has no row to remove. One published before a restart
    // and left behind is removed by the peer that next claims it (its grant finds the run ended).
    if (jobKey === undefined && !this.publishedRuns.delete(runId)) return;
    this.store.withdraw(runId, jobKey, attempt).catch((thrown: unknown) => this.log.warn({ err: coerceError(thrown), runId }, 'withdrawing a placement request failed'));
  }

  /**
   * After local capacity freed: offers it to peers' jobs only when the last look found some open
   * (a new one is announced by a signal or found by the poll, which call `offerRemote`), so a slot
   * freed here costs no read while no peer is waiting.
   */
  offerFreedCapacity(): Promise<void> {
    return this.peersWaiting ? this.offerRemote() : Promise.resolve();
  }

  /** Offers this coordinator's free agents to the jobs its peers published. */
  offerRemote(): Promise<void> {
    if (this.offering) {
      this.offerAgain = true;
      return this.offering;
    }
    this.offering = this.offerLoop()
      .catch((thrown: unknown) => this.log.warn({ err: coerceError(thrown) }, 'offering agents to peers failed'))
      .finally(() => (this.offering = null));
    return this.offering;
  }

  private async offerLoop(): Promise<void> {
    do {
      this.offerAgain = false;
      if (!this.registry.all().some((s) => s.unusable === null && s.slots.size < s.maxConcurrency)) return;
      const open = await this.store.open(BATCH);
      this.peersWaiting = open.length > 0;
      // Each grant reserves its slot before its first await, in the requests' order; their claims
      // and grants then go together instead of three round trips after three round trips.
      throwFirstRejection(await Promise.allSettled(open.map((job) => this.grant(job))));
    } while (this.offerAgain);
  }

  /** The slot is reserved before the claim, so two offers never give one slot twice; a lost claim frees it. */
  private async grant(job: OfferedJob): Promise<void> {
    const found = this.find(job);
    if ('none' in found) return;
    const { session } = found;
    const dispatchId = randomUUID();
    this.registry.reserve(session.agentId, dispatchId, { runId: job.runId, jobKey: job.jobKey });
    // The slot goes back unless the grant reached the run: a claim lost or failed, a grant that
    // could not be sent, or one dropped because its run has ended since (a request left behind by
    // an owner that died before withdrawing it), else it would stay taken until the agent left.
    let granted = false;
    try {
      if (!(await this.store.claim(job))) return;
      const agentKind = session.scalerManaged ? ('scaler' as const) : ('static' as const);
      this.log.info({ runId: job.runId, jobKey: job.jobKey, agentId: session.agentId }, 'granting a peer’s job to an agent connected here');
      granted = (await this.deliver(job.runId, { type: 'placement.granted', jobKey: job.jobKey, agentId: session.agentId, dispatchId, agentKind })) !== 'dropped';
    } finally {
      if (!granted) this.registry.release(session.agentId, dispatchId);
    }
    await this.store.withdraw(job.runId, job.jobKey, job.attempt);
  }
}
