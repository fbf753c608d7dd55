import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { DispatchedJob } from '../../machines/intents.ts';
import type { AgentRegistry, AgentSession } from './registry.ts';
import type { CancelHolder } from '../../machines/job.withdrawal.ts';
import type { SharedAgents, SharedSession } from './shared-agents.ts';
import type { Effect } from '../runs/ports.ts';
import type { IncomingRunEvent } from '../runs/supervisor.ts';
import type { DispatchPathTraces } from '../../lib/stage-trace.ts';

/** Frames built ahead and not yet taken, at most: a bound in case a send never comes for one. */
const MAX_PREBUILT = 10_000;

/** What a `job.dispatch` is built for: one attempt on one agent. */
export interface DispatchTarget {
  runId: string;
  jobKey: string;
  dispatchId: string;
  job: DispatchedJob;
  agentLabels: readonly string[];
}

export type BuiltFrame = { ok: true; dispatch: object } | { ok: false; reason: string };

/** Builds the `job.dispatch` frame for one attempt, or says why it cannot be sent. */
export interface DispatchFactory {
  /**
   * The frame from the run's stored source alone. It writes nothing and reads no secret, so it may
   * start while the entry that asks for the dispatch is still committing.
   */
  build(target: DispatchTarget): Promise<BuiltFrame>;
  /** What is added as the frame is sent (secrets, which are resolved and audited then). */
  complete(built: BuiltFrame, target: DispatchTarget): Promise<BuiltFrame>;
}

export interface AgentEffectsDeps {
  registry: AgentRegistry;
  deliver: (runId: string, event: IncomingRunEvent) => Promise<unknown>;
  buildDispatch: DispatchFactory;
  /** Agents whose socket another coordinator holds; null when this coordinator is alone. */
  shared: SharedAgents | null;
  /** An agent that sent any frame within this window (the ack window) is alive: an ack timeout does not close it. */
  aliveWindowMs: number;
  now: () => number;
  log: Logger;
  /** A dispatch bound for a peer's agent crosses the database: its secret fields are sealed for the trip. */
  sealForPeer?: (frame: object) => object;
  /** Where traced runs' time goes (lib/stage-trace.ts): a run's first dispatch sent closes its trace. */
  traces?: DispatchPathTraces;
  /** A withdrawn attempt's cancel is reported to its job, which is fenced until the cancel has gone out (machines/job.withdrawal.ts). */
  reportCancel: (effect: Effect<'sendCancel'>, holder: CancelHolder) => Promise<void>;
}

/**
 * The effects that reach agents: dispatch, cancel, close, slot release. Each runs after the
 * transition that asked for it committed, and is safe to run twice (effects are at-least-once).
 */
export class AgentEffects {
  /** Frames being built while the entries that ask for them commit, by dispatch id; each is taken by its send. */
  private readonly prebuilt = new Map<string, Promise<BuiltFrame>>();

  constructor(private readonly deps: AgentEffectsDeps) {}

  /**
   * Starts building the frames of an entry that is being committed, so that their sends, which run
   * once it has committed, do not wait for the build (0.8 ms of a lone delivery's way to its agent).
   * Nothing is sent here: `sendDispatch` still makes every check after the commit.
   */
  prepareDispatches(effects: readonly Effect[]): void {
    for (const effect of effects) {
      if (effect.kind !== 'sendDispatch') continue;
      const { jobKey, agentId, dispatchId, job } = effect.payload;
      const session = this.deps.registry.get(agentId);
      if (!session || this.prebuilt.has(dispatchId)) continue;
      if (this.prebuilt.size >= MAX_PREBUILT) this.prebuilt.delete(this.prebuilt.keys().next().value as string);
      const target = { runId: effect.runId, jobKey, dispatchId, job, agentLabels: session.labels };
      // After the group commit's flush, queued before: the statement is sent first, then this builds while it runs.
      const building = new Promise<BuiltFrame>((resolve, reject) => {
        setImmediate(() => void this.deps.buildDispatch.build(target).then(resolve, reject));
      });
      building.catch(() => undefined); // its send awaits it and sees the error
      this.prebuilt.set(dispatchId, building);
    }
  }

  /** The entry did not commit: its frames will not be sent. */
  forgetDispatches(effects: readonly Effect[]): void {
    for (const effect of effects) if (effect.kind === 'sendDispatch') this.prebuilt.delete(effect.payload.dispatchId);
  }

  /** The frame built ahead for this attempt, if any, given up by the cache whatever the send then does. */
  private takePrebuilt(dispatchId: string): Promise<BuiltFrame> | undefined {
    const building = this.prebuilt.get(dispatchId);
    this.prebuilt.delete(dispatchId);
    return building;
  }

  private async frameFor(target: DispatchTarget, prebuilt: Promise<BuiltFrame> | undefined): Promise<BuiltFrame> {
    const { buildDispatch } = this.deps;
    return buildDispatch.complete(await (prebuilt ?? buildDispatch.build(target)), target);
  }

  async sendDispatch(effect: Effect<'sendDispatch'>): Promise<void> {
    const { jobKey, agentId, dispatchId } = effect.payload;
    const { registry, deliver, log, traces } = this.deps;
    traces?.mark(effect.runId, 'effect.started');
    const prebuilt = this.takePrebuilt(dispatchId);
    const session = registry.get(agentId);
    if (!session) {
      const remote = await this.deps.shared?.remoteSession(agentId);
      if (remote) return this.sendRemoteDispatch(effect, remote);
      await deliver(effect.runId, { type: 'agent.disconnected', jobKey, agentId });
      return;
    }
    if (session.sent.has(dispatchId)) return;
    // The attempt's slot says whether it is still current: given back, the job moved on (this is an
    // effect re-run after a restore). Reserved on an earlier connection of this agent, that socket is
    // gone and an agent that registered again without the attempt has it settled as lost: sending it
    // now would run it twice.
    const slot = registry.dispatchOf(dispatchId);
    if (slot?.connectionId !== session.connectionId || slot.endedAt !== null) {
      log.info({ runId: effect.runId, jobKey, agentId, dispatchId }, 'dispatch not sent: its slot was given back or reserved on a connection that has closed');
      return;
    }
    // Built ahead for this session's labels; a frame built for an earlier connection's never gets here (the slot check).
    const built = await this.frameFor({ runId: effect.runId, jobKey, dispatchId, job: effect.payload.job, agentLabels: session.labels }, prebuilt);
    if (!built.ok) {
      log.error({ runId: effect.runId, jobKey, reason: built.reason }, 'dispatch refused before sending');
      await deliver(effect.runId, { type: 'agent.job.status', jobKey, agentId, dispatchId, state: 'failed', error: built.reason });
      return;
    }
    traces?.mark(effect.runId, 'dispatch.built');
    session.sent.add(dispatchId);
    session.link.send(built.dispatch);
    traces?.finish(effect.runId, 'dispatch.sent');
  }

  /** The dispatch is built here, where the run lives, and sent by the coordinator holding the socket. */
  private async sendRemoteDispatch(effect: Effect<'sendDispatch'>, remote: SharedSession): Promise<void> {
    const { jobKey, agentId, dispatchId, job } = effect.payload;
    const built = await this.frameFor({ runId: effect.runId, jobKey, dispatchId, job, agentLabels: remote.labels }, undefined);
    if (!built.ok) {
      this.deps.log.error({ runId: effect.runId, jobKey, reason: built.reason }, 'dispatch refused before sending');
      await this.deps.deliver(effect.runId, { type: 'agent.job.status', jobKey, agentId, dispatchId, state: 'failed', error: built.reason });
      return;
    }
    const frame = this.deps.sealForPeer ? this.deps.sealForPeer(built.dispatch) : built.dispatch;
    await this.deps.shared?.send(remote, { kind: 'frame', frame, dispatchId });
  }

  async sendCancel(effect: Effect<'sendCancel'>): Promise<void> {
    const holder = await this.cancel(effect);
    if (effect.payload.report === true) await this.deps.reportCancel(effect, holder);
  }

  /** Sends the cancel on the agent's socket here, or leaves it with the peer holding it; with no socket anywhere, the agent hears of it when it is back (B7). */
  private async cancel(effect: Effect<'sendCancel'>): Promise<CancelHolder> {
    const { agentId, dispatchId, force, reason } = effect.payload;
    const message = { type: 'job.cancel', messageId: randomUUID(), runId: effect.runId, jobId: dispatchId, reason, force };
    const here = this.deps.registry.get(agentId);
    if (here) return this.cancelHere(here, message, effect);
    const remote = await this.deps.shared?.remoteSession(agentId);
    if (remote && this.deps.shared) {
      const commandId = await this.deps.shared.send(remote, { kind: 'frame', frame: message, dispatchId: null });
      return { kind: 'peer', coordinatorId: remote.coordinatorId, commandId };
    }
    // The agent registered here while its session was looked up.
    const arrived = this.deps.registry.get(agentId);
    if (arrived) return this.cancelHere(arrived, message, effect);
    return { kind: 'unreachable' };
  }

  /** `job.concurrency.ack` to the agent that asked, on this coordinator's socket or a peer's; an agent with no socket asks again. */
  async answerConcurrency(effect: Effect<'answerConcurrency'>): Promise<void> {
    const { agentId, dispatchId, requestId, action, reason } = effect.payload;
    const frame = { type: 'job.concurrency.ack', requestId, action, runId: effect.runId, jobId: dispatchId, ...(reason === undefined ? {} : { reason }) };
    const here = this.deps.registry.get(agentId);
    if (here) return void here.link.send(frame);
    const remote = await this.deps.shared?.remoteSession(agentId);
    if (remote) await this.deps.shared?.send(remote, { kind: 'frame', frame, dispatchId: null });
  }

  private cancelHere(session: AgentSession, message: object, effect: Effect<'sendCancel'>): CancelHolder {
    session.link.send(message);
    const { jobKey, agentId, force, reason } = effect.payload;
    this.deps.log.info({ runId: effect.runId, jobKey, agentId, force, reason }, 'job.cancel sent');
    return { kind: 'sent' };
  }

  /**
   * The ack deadline passed. A silent agent is closed (4031) and kept from new jobs until it
   * reconnects; one that sent any frame within the ack window is slow, not gone, and keeps its
   * socket: the chart still requeues its attempt and cancels it on the agent (docs/protocol.md#reconnect-reclaim-and-lost-attempts).
   */
  async closeAgentConnection(effect: Effect<'closeAgentConnection'>): Promise<void> {
    const { agentId, code, reason } = effect.payload;
    const session = this.deps.registry.get(agentId);
    if (!session) {
      const remote = await this.deps.shared?.remoteSession(agentId);
      if (remote) await this.deps.shared?.send(remote, { kind: 'close', code, reason });
      return;
    }
    if (!this.deps.registry.closeIfSilent(agentId, code, reason, this.deps.aliveWindowMs)) {
      const silentMs = this.deps.now() - session.lastFrameAt;
      this.deps.log.warn({ runId: effect.runId, agentId, code, reason, silentMs }, 'agent missed its ack deadline but is alive; socket kept');
    }
  }

  async releaseSlot(effect: Effect<'releaseSlot'>): Promise<void> {
    const { agentId, dispatchId } = effect.payload;
    if (this.deps.shared) await this.deps.shared.release(agentId, dispatchId);
    else this.deps.registry.release(agentId, dispatchId);
  }
}
