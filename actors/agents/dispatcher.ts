import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { AgentRequirements, LabelMatcher, WaitingReason } from '../../machines/types.ts';
import { agentCanTake, labelsFit } from './match.ts';
import type { PlacementExchange, ReclaimOutcome } from './placement-exchange.ts';
import { WaitingQueue, type WaitingKind } from './waiting-queue.ts';
import type { AgentRegistry } from './registry.ts';
import { coerceError } from '../../lib/errors.ts';
import { jobKeyOf } from '../../lib/job-key.ts';
import type { Effect } from '../runs/ports.ts';
import { findHonouringScaler } from '../scaler/placement.ts';
import type { IncomingRunEvent } from '../runs/supervisor.ts';
import type { PlacementAnswer, PlacementGrant } from '../runs/inline-placement.ts';

/** Delivers an event to the run that owns a job. */
export type SendToRun = (runId: string, event: IncomingRunEvent) => Promise<unknown>;

export interface PlacementRequest {
  runId: string;
  jobKey: string;
  requirements: AgentRequirements;
  attempt: number;
}

/**
 * A job waiting here: the reason its run was last told, the attempt published to peers, and whether
 * it is held back for a while: a peer holds its request (it won the claim and is granting the job
 * from its own agents), or taking the request back failed.
 */
type WaitingRequest = PlacementRequest & { reason: string | null; published?: number; heldBack?: boolean };

/** Why no agent here can take a job now. */
type NoAgent = Extract<ReturnType<AgentRegistry['find']>, { none: unknown }>;

/** How long a job a peer claimed is left to that peer's grant (the claim's time to live in src/db/shared-agents.ts). */
const PEER_CLAIM_WAIT_MS = 10_000;
/** How long a job whose published request could not be taken back (a database error) waits before it is tried again. */
const RETRY_AFTER_ERROR_MS = 1_000;
/**
 * How long a job whose request is gone waits before it is granted here: a peer that granted it removed
 * the request once its grant was in the run's inbox, which the owner drains on a signal or within 2 s.
 */
const GRANT_IN_FLIGHT_MS = 3_000;

/** A scaler consulted when no connected agent can take a job (docs/architecture.md#the-scaler); optional. */
export interface ScalerPort {
  /** Asks for an agent for the job; the answer is its waiting reason, or null to keep the dispatcher's own. */
  requestAgent(request: PlacementRequest): WaitingReason | null;
  /** An agent the scaler spawned for another job, or one that already served its single job. */
  unavailableFor(agentId: string, runId: string, jobKey: string): boolean;
  onGranted(agentId: string, runId: string, jobKey: string): void;
}

/**
 * Places queued jobs on agents (DSP-2). It keeps no run state: a placement request is answered
 * with one event to the job's run actor, and jobs no agent can take yet wait here, first-queued
 * first, until a new agent or a freed slot lets one through.
 */
export class Dispatcher {
  private readonly waiting = new WaitingQueue<WaitingRequest>();
  private offering = false;
  private offerAgain = false;
  private scaler: ScalerPort | null = null;
  private exchange: { exchange: PlacementExchange; stillWaiting: (runId: string, jobKey: string) => boolean } | null = null;
  private paused = false;

  constructor(
    private readonly registry: AgentRegistry,
    private readonly sendToRun: SendToRun,
    private readonly log: Logger,
  ) {
    registry.onCapacity(() => void this.offer());
  }

  get waitingCount(): number {
    return this.waiting.size;
  }

  attachScaler(scaler: ScalerPort): void {
    this.scaler = scaler;
  }

  /** Jobs no agent here can take are offered to peers' agents; `stillWaiting` tells a job granted elsewhere. */
  attachExchange(exchange: PlacementExchange, stillWaiting: (runId: string, jobKey: string) => boolean): void {
    this.exchange = { exchange, stillWaiting };
    exchange.whenPeersJoin(() => this.publishWaiting());
  }

  /** An agent here with a free slot for the job, honouring scaler bindings; none once paused. */
  findFor(request: PlacementRequest): ReturnType<Dispatcher['findAgent']> {
    return this.paused ? { none: 'capacity', matching: 0 } : this.findAgent(request);
  }

  /** The coordinator is stopping: waiting jobs stay listed (and durable) but nothing more is placed. */
  pause(): void {
    this.paused = true;
  }

  isWaiting(runId: string, jobKey: string): boolean {
    return this.waiting.has(jobKeyOf(runId, jobKey));
  }

  async requestPlacement(effect: Effect<'requestPlacement'>): Promise<void> {
    const { jobKey, requirements, attempt, heldReason } = effect.payload;
    const key = jobKeyOf(effect.runId, jobKey);
    // A job asking again (restored here) already shows its reason: the same answer is not sent twice.
    // Written out, not spread: a spread here gave each waiting job a hidden class of its own (0.2 KB).
    this.waiting.set(key, { runId: effect.runId, jobKey, requirements, attempt, reason: heldReason ?? null });
    await this.tryPlace(key);
  }

  /**
   * Answers a job while its run's transition is still being recorded, so the answer commits with it
   * (docs/architecture.md#placement-in-the-same-entry). A grant only on a free static agent here and
   * only when no job queued before it could take that agent; its slot is reserved in memory and
   * nothing leaves the process. Without a scaler, a job no agent here can take is told why at once,
   * instead of in an entry of its own once its request is queued, unless it already shows that reason
   * (`heldReason`, as `requestPlacement` keeps it). Null leaves the request to the queue.
   */
  placeNow(runId: string, request: Omit<PlacementRequest, 'runId'> & { heldReason?: string }): PlacementAnswer | null {
    if (this.paused) return null;
    const found = this.findAgent({ runId, ...request });
    if ('none' in found) {
      if (this.scaler) return null;
      const reason = this.reasonHere(request.requirements, found);
      return reason.message === request.heldReason ? null : { type: 'placement.none', jobKey: request.jobKey, reason };
    }
    if (found.session.scalerManaged) return null;
    // A job queued earlier that this agent could take goes first.
    for (const kind of this.waiting.requirementKinds()) if (agentCanTake(kind.requirements, found.session)) return null;
    const dispatchId = randomUUID();
    this.registry.reserve(found.session.agentId, dispatchId, { runId, jobKey: request.jobKey });
    return { type: 'placement.granted', jobKey: request.jobKey, agentId: found.session.agentId, dispatchId, agentKind: 'static' };
  }

  /** A grant made by `placeNow` whose entry was not stored: its slot goes back. */
  undoPlacement(grant: PlacementGrant): void {
    this.registry.release(grant.agentId, grant.dispatchId);
  }

  /** Offers free capacity to waiting jobs in the order they were queued. */
  async offer(): Promise<void> {
    if (this.offering) {
      this.offerAgain = true;
      return;
    }
    this.offering = true;
    try {
      do {
        this.offerAgain = false;
        // Each placement reserves its slot, in queue order, before its first await; the grants
        // then commit together instead of one database round trip after another.
        await this.offerPass();
      } while (this.offerAgain);
      if (this.exchange) void this.exchange.exchange.offerFreedCapacity();
    } catch (thrown) {
      this.log.warn({ err: coerceError(thrown) }, 'offering capacity failed');
    } finally {
      this.offering = false;
    }
  }

  /**
   * Tries the waiting jobs in queue order, each reserving its slot before the next is looked at. With
   * a scaler every job is tried (the scaler is asked again each time). Without, each kind of agent
   * wanted is looked up once: the jobs of a kind with a free agent are tried, first-queued first
   * across kinds; a kind without one is passed over whole unless its waiting reason changed since its
   * jobs were last told, so a freed slot costs one lookup per kind, not a walk of the queue.
   */
  private async offerPass(): Promise<void> {
    if (this.scaler) {
      await Promise.all(this.waiting.keys().map((key) => this.tryPlace(key)));
      return;
    }
    const tries: Promise<void>[] = [];
    const placeable: { kind: WaitingKind<WaitingRequest>; next: Iterator<[string, { request: WaitingRequest; seq: number }]>; head: [string, { seq: number }] }[] = [];
    for (const kind of [...this.waiting.requirementKinds()]) {
      const first = kind.entries.values().next().value;
      if (!first) continue;
      const found = this.findAgent(first.request);
      if ('none' in found) this.tellKind(kind, found, tries);
      else {
        const next = kind.entries.entries();
        const head = next.next();
        if (!head.done) placeable.push({ kind, next, head: head.value });
      }
    }
    // Across kinds with a free agent, first-queued first; each reserves before the next is tried, and
    // a kind stops at its first job no agent is left for: its later jobs are not walked.
    while (placeable.length > 0) {
      const at = placeable.reduce((best, cursor, i) => (cursor.head[1].seq < (placeable[best]?.head[1].seq ?? Infinity) ? i : best), 0);
      const cursor = placeable[at];
      if (!cursor) break;
      const [key] = cursor.head;
      const request = this.waiting.get(key);
      const found = request ? this.findAgent(request) : null;
      if (found && 'none' in found) {
        placeable.splice(at, 1);
        this.tellKind(cursor.kind, found, tries);
        continue;
      }
      if (found) tries.push(this.tryPlace(key, found));
      const head = cursor.next.next();
      if (head.done) placeable.splice(at, 1);
      else cursor.head = head.value;
    }
    await Promise.all(tries);
  }

  /** The jobs of a kind no agent here can take now are told why, once per change of the reason. */
  private tellKind(kind: WaitingKind<WaitingRequest>, found: NoAgent, tries: Promise<void>[]): void {
    const reason = this.reasonHere(kind.requirements, found).message;
    if (kind.toldReason === reason) return;
    for (const [key, { request }] of [...kind.entries]) if (request.reason !== reason) tries.push(this.tryPlace(key));
    kind.toldReason = reason;
  }

  /** Forget jobs of a run that finished or moved to another coordinator. */
  forgetRun(runId: string): void {
    this.waiting.deleteRun(runId);
    this.exchange?.exchange.withdraw(runId);
  }

  /** `looked` is the agent lookup for this job the caller just made, with nothing in between. */
  private async tryPlace(key: string, looked?: ReturnType<Dispatcher['findAgent']>): Promise<void> {
    const request = this.waiting.get(key);
    if (!request || this.paused || request.heldBack) return;
    if (this.exchange && !this.exchange.stillWaiting(request.runId, request.jobKey)) {
      this.waiting.delete(key);
      return;
    }
    const found = looked ?? this.findAgent(request);
    if ('none' in found) {
      const own = this.reasonHere(request.requirements, found);
      const scaled = this.scaler?.requestAgent(request) ?? null;
      // Busy matching agents are a better reason than a scaler's "none connected and no backend".
      const reason = scaled && !(found.none === 'capacity' && scaled.kind === 'no_matching_agent') ? scaled : own;
      this.publish(request);
      return this.tell(request, reason);
    }
    const { session } = found;
    const dispatchId = randomUUID();
    this.waiting.delete(key);
    this.registry.reserve(session.agentId, dispatchId, { runId: request.runId, jobKey: request.jobKey });
    const claimed = await this.claimPublished(request).catch((thrown: unknown) => {
      this.log.warn({ err: coerceError(thrown), runId: request.runId, jobKey: request.jobKey }, 'taking back a published placement request failed; trying it again shortly');
      return 'failed' as const;
    });
    if (claimed !== 'taken') {
      // Held: a peer holds the request and is granting it; the job stays listed in case that grant
      // never comes, but is not tried again here before the peer's claim could have run out.
      // Absent: a peer's grant may be on its way to the run; if the job still waits once it would
      // have arrived, it is no longer published and is granted here (a request removed without a
      // grant held a job back for ever beside idle agents: chaos seed 279182347). Two grants of one
      // attempt cost nothing: the second finds the job placed and gives its slot back (DSP-2).
      // Failed (the database): the job and its slot go back, and it is tried again a moment later
      // (a database error here once dropped both, leaving the run waiting beside an idle agent).
      if (claimed === 'absent') request.published = undefined;
      this.holdBack(request, claimed === 'held' ? PEER_CLAIM_WAIT_MS : claimed === 'absent' ? GRANT_IN_FLIGHT_MS : RETRY_AFTER_ERROR_MS);
      this.registry.release(session.agentId, dispatchId);
      if (!this.waiting.has(key)) this.waiting.set(key, request);
      return;
    }
    this.scaler?.onGranted(session.agentId, request.runId, request.jobKey);
    const agentKind = session.scalerManaged ? ('scaler' as const) : ('static' as const);
    // A job that moved on meanwhile (cancelled, expired) gives the slot back itself. A grant its run
    // could not store (a commit given up, the run failed or gone) dispatches nothing: the slot goes
    // back here, or the agent would look busy until it disconnects. The job is not queued again: its
    // run, brought back from its last durable state, asks for an agent again.
    const route = await this.sendToRun(request.runId, { type: 'placement.granted', jobKey: request.jobKey, agentId: session.agentId, dispatchId, agentKind }).catch((thrown: unknown) => {
      this.log.warn({ err: coerceError(thrown), runId: request.runId, jobKey: request.jobKey, agentId: session.agentId }, 'a grant was not stored; its agent slot is given back');
      return 'not stored' as const;
    });
    // Dropped: the run ended (or moved away and ended) between its request and this grant, and no one reads it.
    if (route === 'not stored' || route === 'dropped') this.registry.release(session.agentId, dispatchId);
  }

  /** The job is told why it waits, once per change of the reason. */
  private async tell(request: WaitingRequest, reason: WaitingReason): Promise<void> {
    if (request.reason === reason.message) return;
    request.reason = reason.message;
    await this.sendToRun(request.runId, { type: 'placement.none', jobKey: request.jobKey, reason });
  }

  /**
   * Once per attempt, a job no agent here can take is offered to the agents of every coordinator,
   * while there is another coordinator to take it (`publishWaiting` catches up when one joins).
   */
  private publish(request: WaitingRequest): void {
    if (!this.exchange?.exchange.hasPeers || request.published === request.attempt) return;
    request.published = request.attempt;
    this.exchange.exchange.publish(request);
  }

  /** A peer joined: every job still waiting here is offered to it too. */
  private publishWaiting(): void {
    for (const key of this.waiting.keys()) {
      const request = this.waiting.get(key);
      if (request) this.publish(request);
    }
  }

  /** `request` is not tried for `ms`, then the queue is offered again. */
  private holdBack(request: WaitingRequest, ms: number): void {
    request.heldBack = true;
    const timer = setTimeout(() => {
      request.heldBack = false;
      void this.offer();
    }, ms);
    timer.unref();
  }

  /** A published job is granted here only if this coordinator takes its request back (one write). */
  private async claimPublished(request: WaitingRequest): Promise<ReclaimOutcome> {
    if (!this.exchange || request.published !== request.attempt) return 'taken';
    return this.exchange.exchange.reclaim(request);
  }

  /** Why no agent here can take a job with these requirements now: all matching busy, or none matching. */
  private reasonHere(requirements: AgentRequirements, found: NoAgent): WaitingReason {
    return found.none === 'capacity' ? capacityReason(found.matching) : noAgentReason(requirements, this.labelsFitSome(requirements));
  }

  private labelsFitSome(requirements: AgentRequirements): boolean {
    return this.registry.all().some((session) => labelsFit(requirements, session));
  }

  /** With a scaler, an agent it keeps for another waiting job is passed over: the bound job wins it (SCL-3). */
  private findAgent(request: PlacementRequest) {
    const scaler = this.scaler;
    if (!scaler) return this.registry.find(request.requirements);
    return findHonouringScaler(this.registry, request.requirements, (s) => scaler.unavailableFor(s.agentId, request.runId, request.jobKey));
  }
}


export function describeMatcher(matcher: LabelMatcher): string {
  return matcher.kind === 'exact' ? matcher.value : `/${matcher.source}/${matcher.flags}`;
}

/** Why no connected agent can take the job: the labels, and which kind of agent executes its steps. */
export function noAgentReason(requirements: AgentRequirements, labelsFitSome = false): WaitingReason {
  const labels = requirements.runsOn.map(describeMatcher);
  const wanted = labels.length > 0 ? `labels ${labels.join(', ')}` : 'any labels';
  const message = ((): string => {
    switch (requirements.executor) {
      case 'any':
        return `no connected agent matches ${wanted}`;
      case 'kici':
        return `needs a KiCI agent (TypeScript steps); none connected with ${wanted}${labelsFitSome ? ' (the agents with these labels execute only run steps)' : ''}`;
      case 'run-steps':
        return `needs an agent that can execute run steps; none connected with ${wanted}${labelsFitSome ? ' (the agents with these labels run only TypeScript steps)' : ''}`;
    }
  })();
  return { kind: 'no_matching_agent', message };
}

function capacityReason(matching: number): WaitingReason {
  const agents = matching === 1 ? '1 matching agent is' : `all ${matching} matching agents are`;
  return { kind: 'capacity', message: `${agents} busy` };
}

