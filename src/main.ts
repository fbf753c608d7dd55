import type { Server } from 'node:http';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { Dispatcher } from '../actors/agents/dispatcher.ts';
import { drainAgents } from '../actors/agents/drain.ts';
import type { DrainOptions } from '../actors/agents/drain.ts';
import { PeerSync } from '../actors/agents/peer-sync.ts';
import type { HeldJob, ListenForPeers } from '../actors/agents/peer-sync.ts';
import { PlacementExchange } from '../actors/agents/placement-exchange.ts';
import { AgentRegistry } from '../actors/agents/registry.ts';
import { SharedAgents } from '../actors/agents/shared-agents.ts';
import { systemClock } from '../actors/clock.ts';
import type { Clock } from '../actors/clock.ts';
import { EffectExecutor } from '../actors/runs/effect-executor.ts';
import type { FencedError } from '../actors/runs/errors.ts';
import { EventRouter } from '../actors/runs/event-router.ts';
import { LifecycleMetrics } from '../actors/runs/lifecycle-metrics.ts';
import { heldJobsOf, liveRunsOf } from '../actors/runs/live-runs.ts';
import { WithdrawalAnswers } from '../actors/agents/withdrawal-answers.ts';
import { createRuntimeMetrics, dispatchStageObserver } from '../actors/runs/metrics.ts';
import { DispatchPathTraces } from '../lib/stage-trace.ts';
import type { RuntimeMetrics } from '../actors/runs/metrics.ts';
import { Ownership } from '../actors/runs/ownership.ts';
import type { OwnershipOptions, OwnershipStore } from '../actors/runs/ownership.ts';
import type { NewRun } from '../actors/runs/ports.ts';
import type { InlinePlacement } from '../actors/runs/inline-placement.ts';
import { reattachRuns } from '../actors/runs/reattach.ts';
import { Supervisor } from '../actors/runs/supervisor.ts';
import { isTerminalRunStatus } from '../machines/status.ts';
import type { CompiledConfig } from './config/index.ts';
import { jobTimeoutsOf } from './config/timeouts.ts';
import { reachableAddress } from './config/coordinator-target.ts';
import { openDatabase } from './db/database.ts';
import type { Database } from './db/database.ts';
import type { Router } from './http/router.ts';
import { countDeadDeliveries, deliveryRecorder } from './db/deliveries.ts';
import type { ClaimedDelivery } from './db/deliveries.ts';
import { genericSourceRepository } from './db/generic-sources.ts';
import { getEnvironment } from './db/environments.ts';
import { START_RETRY_WAITS_MS, retryingTransient } from './db/errors.ts';
import { runInboxOf } from './db/inbox.ts';
import { PLACEMENT_CHANNEL, coordinatorChannel, listenForPeers } from './db/peer-bus.ts';
import { LivenessLock } from './db/liveness-lock.ts';
import { RepositoryCache, listRepositories } from './db/repositories.ts';
import { readRunInputSummaries } from './db/run-queries.ts';
import { createRunStore } from './db/run-store.ts';
import type { Schema } from './db/schema.ts';
import { agentHolderLease, clearSessionsOf, placementStoreOf, sharedAgentStoreOf } from './db/shared-agents.ts';
import { effectHandlers } from './effect-handlers.ts';
import { adminRoutes } from './http/admin-routes.ts';
import { adminTokenHint, loadAdminTokenHash } from './http/admin-token.ts';
import { registerScalerRoutes } from './http/api-scalers.ts';
import { registerSourceRoutes } from './http/api-sources.ts';
import { createHttpServer, listen, withFreePort } from './http/server.ts';
import { registerGithubWebhook } from './http/webhooks.ts';
import type { WebhookDeps } from './http/webhooks.ts';
import { registerGenericWebhook } from './http/webhooks-generic.ts';
import { LockFileCache } from './lockfile/cache.ts';
import { closeObjectReaders } from './lockfile/providers/git-batch.ts';
import { createDeliveryProcessor } from './pipeline/deliveries.ts';
import { providerFor } from './pipeline/pipeline.ts';
import { ScheduleClock } from './pipeline/schedule-clock.ts';
import { ContributorCache } from './pipeline/trust.ts';
import { createIntakeMetrics } from './pipeline/metrics.ts';
import { RunSources } from './pipeline/run-source.ts';
import { createRunStarter, type RunStarterDeps } from './pipeline/start-runs.ts';
import { BullMqDeliveryQueue } from './queue/bullmq-queue.ts';
import type { DeliveryQueue } from './queue/delivery-queue.ts';
import { EmbeddedDeliveryQueue } from './queue/embedded-queue.ts';
import { IsolatedVmSandbox } from './sandbox/index.ts';
import { createSecrets } from './secrets/index.ts';
import type { Secrets } from './secrets/index.ts';
import { withSecretKey } from './secrets/key-file.ts';
import { createScalerManager } from './scaler/index.ts';
import { unresolvedReferences } from './secrets/references.ts';
import { createAgentGateway } from './ws/agent-gateway.ts';
import { connectionCounters, createAgentMetrics } from './ws/metrics.ts';
import { attachObserveServer } from './ws/observe.ts';
import { attachAgentServer } from './ws/server.ts';
import { startTokenExpirySweep } from './ws/token-expiry.ts';
import { coerceError } from '../lib/errors.ts';
import { createStorage, type Storage } from './caches/index.ts';
import { createRetention, type Retention } from './retention/index.ts';
import type { BuildCaches } from './caches/build-caches.ts';
import { BUILDER_ROLE, buildPlanner } from './caches/build-planner.ts';
import { registerStorageRoutes } from './http/storage-routes.ts';
import { EventEmitter } from './events/event-emitter.ts';
import type { DeliveryKey } from './db/deliveries.ts';

/** How a coordinator stops: `drainMs` lets running jobs finish first, `abort` ends that wait. */
export type CloseOptions = DrainOptions;

export interface Coordinator {
  port: number;
  url: string;
  runtime: Runtime;
  close(options?: CloseOptions): Promise<void>;
}

export interface CoordinatorHooks {
  /** Ownership was lost; the coordinator has stopped writing. The CLI exits the process. */
  onFenced?: () => void;
}

/**
 * The composition root: database → actor runtime → agent gateway → intake → HTTP and WebSocket.
 * Everything a coordinator runs is built here, in the order it depends on; docs/architecture.md
 * follows one delivery through it.
 */
export async function startCoordinator(configured: CompiledConfig, log: Logger, clock: Clock = systemClock, hooks: CoordinatorHooks = {}): Promise<Coordinator> {
  const config = await withSecretKey(await withFreePort(configured), log);
  const { db, ...database } = await openDatabase(config, log);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const onFenced = () => {
    log.fatal('this coordinator lost its lease (fenced); it stops so that nothing more is written');
    void close().finally(() => hooks.onFenced?.());
  };
  let httpBase = '';
  const storage = createStorage({ config, db, now: () => clock.now(), log, baseUrl: () => httpBase });
  const runtime = createRuntime({ config, db, clock, log, registry, onFenced, ...peerHooks(database.connection, config, log), builds: storage.builds });
  const agentMetrics = createAgentMetrics(registry, runtime.registry);
  const gateway = createAgentGateway({
    ...{ db, config, registry: runtime.registry, shared: runtime.shared, supervisor: runtime.supervisor, deliver: runtime.deliver, dispatchedSecrets: runtime.secrets.dispatched },
    // Emitted events become deliveries the intake queue (made below) runs like webhooks.
    storage: agentRequestServices({ db, clock, log, storage, runtime, notify: (key) => intake.queue.notify(key) }),
    now: () => clock.now(),
    log,
    ...connectionCounters(agentMetrics),
  });
  const retention = createRetention({ config, db, now: () => clock.now(), log, registry, store: storage.store });
  const router = adminRoutes({ db, config, timeouts: jobTimeoutsOf(config), now: () => clock.now(), metrics: registry, runtime, kickToken: gateway.kickToken, retention });
  const buildFor = buildPlanner({ builds: storage.builds, builderConnected: () => runtime.registry.all().some((agent) => agent.labels.includes(BUILDER_ROLE) && agent.unusable === null) });
  const intake = createIntake({ db, config, registry, createRun: (run) => runtime.createRun(run), repositories: runtime.repositories, traces: runtime.traces, now: () => clock.now(), log, buildFor });
  registerStorageRoutes(router, { db, storage, issuer: () => httpBase });
  for (const register of [registerGithubWebhook, registerGenericWebhook]) register(router, intake.webhooks);
  registerSourceRoutes(router, { db, now: () => clock.now(), onRequeued: (key) => intake.queue.notify(key), onRepositoriesChanged: () => runtime.repositories.invalidate() });
  const scaler = await attachScalers({ config, db, clock, log, registry, runtime, router });
  const adminTokenHash = await loadAdminTokenHash(config.adminToken, config.dataDir, log);
  await runtime.start();
  await scaler.start();
  await intake.start();
  const server: Server = createHttpServer({ router, adminTokenHash, log: log.child({ component: 'http' }) });
  const agents = attachAgentServer(server, { ...gateway.connection, hasPendingDispatch: scaler.hasPendingDispatch }, log, config.agentCompression);
  const observers = attachObserveServer(server, { observe: (listener) => runtime.supervisor.observe(listener), adminTokenHash, log });
  const port = await listen(server, config.port, config.host);
  scaler.setOrchestratorUrl(config.scaler.orchestratorUrl ?? `ws://${reachableAddress(config.host, port)}/ws/agent`);
  httpBase = config.publicUrl ?? `http://${reachableAddress(config.host, port)}`;
  const stopMaintenance = startMaintenance(storage, retention);
  log.info({ port, coordinatorId: config.coordinatorId, database: database.kind, runsPage: `${httpBase}/runs/`, adminToken: adminTokenHint(config) }, 'coordinator ready: open the runs page');
  let closing: Promise<void> | null = null;
  async function close(options: CloseOptions = {}): Promise<void> {
    closing ??= (async () => {
      await stopMaintenance();
      await intake.stop();
      const busy = await drainAgents(runtime, options, log);
      await scaler.stop({ keep: busy });
      await runtime.stop({ release: true });
      await agents.close();
      await observers.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await runtime.executor.idle().catch(() => undefined);
      await database.close();
    })();
    return closing;
  }
  return { port, url: `http://${config.host}:${port}`, runtime, close };
}

/** Sweeping expired uploads and the retention job; the returned function stops both. */
function startMaintenance(storage: Storage, retention: Retention): () => Promise<void> {
  const stopSweeping = storage.startSweeping(SWEEP_UPLOADS_MS);
  retention.schedule.start();
  return async () => {
    stopSweeping();
    await retention.schedule.stop();
  };
}

// ---- the actor runtime: supervisor, ownership, dispatcher, effects, peers ----

export interface RuntimeDeps {
  config: CompiledConfig;
  db: Kysely<Schema>;
  clock: Clock;
  log: Logger;
  registry: Registry;
  onFenced: (error: FencedError) => void;
  /** Wake-ups from peer coordinators; without it their tables are polled often. */
  listen?: ListenForPeers;
  /** The lock whose release tells peers this process is gone (src/db/liveness-lock.ts); without it they wait for its lease to end. */
  takeLiveness?: OwnershipOptions['takeLiveness'];
  /** Source and dependency caches, whose URLs dispatches carry; absent: none. */
  builds?: BuildCaches | null;
}

/** Wake-ups from peer coordinators, and the lock whose release tells them this process is gone. */
function peerHooks(connection: Parameters<typeof LivenessLock.take>[0], config: CompiledConfig, log: Logger): Pick<RuntimeDeps, 'listen' | 'takeLiveness'> {
  const channels = [coordinatorChannel(config.coordinatorId), PLACEMENT_CHANNEL];
  return {
    listen: (onSignal) => listenForPeers(connection, channels, onSignal, log.child({ component: 'peer-bus' })),
    takeLiveness: () => LivenessLock.take(connection, log.child({ component: 'ownership' })),
  };
}

/** What agents' storage and event requests are answered with: blobs, caches, provenance, emitted events. */
function agentRequestServices(deps: { db: Kysely<Schema>; clock: Clock; log: Logger; storage: Storage; runtime: { sources: RunSources }; notify: (key: DeliveryKey) => void }) {
  const { db, clock, log, storage, runtime } = deps;
  const events = new EventEmitter({ db, now: () => clock.now(), notify: deps.notify, log: log.child({ component: 'events' }) });
  return { caches: storage.caches, attestations: storage.attestations, builds: storage.builds, idTokens: storage.idTokens, events, sourceOf: (runId: string) => runtime.sources.of(runId) };
}

/** How often expired upload URLs and the bytes they staged are swept. */
const SWEEP_UPLOADS_MS = 15 * 60_000;

/** With signals the tables are read when a peer writes and only checked now and then; without, often. */
const POLL_WITH_SIGNALS_MS = 2_000;
const POLL_WITHOUT_SIGNALS_MS = 200;

/** The actor runtime of one coordinator: supervisor, ownership, dispatcher, effect executor, peers. */
export function createRuntime(deps: RuntimeDeps) {
  const { config, clock, log, db } = deps;
  const me = config.coordinatorId;
  const pollMs = deps.listen ? POLL_WITH_SIGNALS_MS : POLL_WITHOUT_SIGNALS_MS;
  const metrics = createRuntimeMetrics(deps.registry);
  const traces = new DispatchPathTraces(dispatchStageObserver(metrics));
  // Read at every write: the epoch ownership holds right now (it changes only by re-claiming).
  const store = createRunStore(db, { coordinatorId: me, epoch: () => ownership.epoch }, clock);
  const inlinePlacement: InlinePlacement = { place: (runId, request) => dispatcher.placeNow(runId, request), undo: (grant) => dispatcher.undoPlacement(grant) };
  const supervisor = new Supervisor({
    ...{ store, clock, log, metrics, maxBatch: config.commitMaxBatch, batching: config.commitBatching, traces },
    executeEffects: (effects) => executor.execute(effects),
    onSubmitted: (effects) => agents.prepareDispatches(effects),
    onNotCommitted: (effects) => agents.forgetDispatches(effects),
    onFenced: deps.onFenced,
    onCommitted: (entry) => lifecycle.observe(entry),
    inlinePlacement,
  });
  const lifecycle = new LifecycleMetrics(deps.registry, liveRunsOf(supervisor));
  const router = new EventRouter({
    ...{ supervisor, inbox: runInboxOf(db, me, () => clock.now()), clock, log: log.child({ component: 'router' }), pollMs },
    // A grant that reaches a run that ended: the slot it reserved goes back.
    onUndeliverable: (_runId, event) => {
      if (event.type === 'placement.granted') void sharing.shared.release(event.agentId, event.dispatchId).catch(() => undefined);
    },
    canDrain: () => !ownership.adopting,
  });
  const deliver = (runId: string, event: Parameters<EventRouter['deliver']>[1]) => router.deliver(runId, event);
  const registry = new AgentRegistry(() => clock.now());
  const dispatcher = new Dispatcher(registry, deliver, log.child({ component: 'dispatcher' }));
  const secrets = runtimeSecrets(deps);
  const repositories = new RepositoryCache(db, () => clock.now());
  const sharing = createSharing(deps, { supervisor, registry, dispatcher, deliver, wakeInbox: () => router.wake(), pollMs, secrets, repositories });
  supervisor.observe((update) => {
    if (isTerminalRunStatus(update.status)) dispatcher.forgetRun(update.runId);
  });
  const sources = new RunSources((runIds) => readRunInputSummaries(db, runIds));
  const { handlers, agents } = effectHandlers(deps, { dispatcher, registry, shared: sharing.shared, deliver, sources, secrets, repositories, withdrawal: sharing.withdrawal, builds: deps.builds ?? null, traces });
  const executor = new EffectExecutor({ handlers, markDone: (ids) => store.markEffectsDone(ids), clock, log, metrics });
  const ownership = createOwnership(deps, { store, metrics, supervisor, router, reattach: { supervisor, deliver, shared: sharing.shared, registry, log } });
  return {
    ...{ supervisor, router, dispatcher, registry, deliver, executor, ownership, shared: sharing.shared, secrets, repositories, sources, traces },
    /** Creates a run here; its source is kept for its dispatches. */
    createRun(run: NewRun): Promise<void> {
      sources.remember(run.input.runId, run.inputSummary);
      // Its key pair is made while the run's first entry commits, not on the way of its first dispatch.
      if (secrets.service.available) secrets.service.runPublicKey(run.input.runId).catch(() => undefined);
      return supervisor.createRun(run);
    },
    async start() {
      await sharing.peers.start(deps.listen);
      await ownership.start();
      // Once its lease is written, so that the peers it wakes see it alive.
      await sharing.exchange.join().catch((thrown: unknown) => deps.log.warn({ err: coerceError(thrown) }, 'announcing this coordinator to its peers failed'));
      router.start();
    },
    /** Stops writing; with `release`, gives the lease up so a peer adopts the runs at once, not after the TTL. */
    async stop(options: { release?: boolean } = {}) {
      router.stop();
      await sharing.stop();
      supervisor.stopAll();
      executor.stop();
      await ownership.stop(options);
    },
  };
}

export type Runtime = ReturnType<typeof createRuntime>;

/** This coordinator's lease: adopted runs are reattached to their agents, and a fenced one stops writing. */
function createOwnership(
  deps: RuntimeDeps,
  parts: { store: OwnershipStore; metrics: RuntimeMetrics; supervisor: Supervisor; router: EventRouter; reattach: Parameters<typeof reattachRuns>[0] },
) {
  const { config, clock, log } = deps;
  const { supervisor, router } = parts;
  return new Ownership(supervisor, {
    ...{ coordinatorId: config.coordinatorId, renewMs: config.leaseRenewMs, ttlMs: config.leaseTtlMs, takeLiveness: deps.takeLiveness },
    ...{ store: parts.store, clock, metrics: parts.metrics, log: log.child({ component: 'ownership' }) },
    onAdopted: async (runIds) => {
      await reattachRuns(parts.reattach, runIds);
      router.wake();
    },
    onFenced: (error) => {
      supervisor.stopAll();
      deps.onFenced(error);
    },
  });
}

/** The coordinator's secrets; an environment's `allowLocalExecution` is read from its table. */
function runtimeSecrets({ config, db, clock, log }: RuntimeDeps): Secrets {
  return createSecrets({
    ...{ config, db, now: () => clock.now(), onStoreError: (err: unknown) => log.warn({ err }, 'the sealed values of an attempt could not be read or dropped') },
    localExecutionAllowed: async (name: string) => (await getEnvironment(db, name))?.allowLocalExecution === true,
  });
}

/** Agents shared with peer coordinators on the same database (FO-3): sessions, offered jobs, commands. */
function createSharing(
  deps: RuntimeDeps,
  parts: { supervisor: Supervisor; registry: AgentRegistry; dispatcher: Dispatcher; deliver: EventRouter['deliver']; wakeInbox: () => void; pollMs: number; secrets: Secrets; repositories: RepositoryCache },
) {
  const { db, clock, log, config } = deps;
  const { supervisor, registry, dispatcher, deliver } = parts;
  const [me, now] = [config.coordinatorId, () => clock.now()];
  const shared = new SharedAgents(me, sharedAgentStoreOf(db, me, now), registry, log.child({ component: 'shared-agents' }), config.dispatchAckTimeoutMs, parts.secrets.openFromPeer);
  const exchange = new PlacementExchange(placementStoreOf(db, me, now), registry, (job) => dispatcher.findFor(job), deliver, log.child({ component: 'exchange' }));
  dispatcher.attachExchange(exchange, (runId, jobKey) => supervisor.jobHasTag(runId, jobKey, 'waits-for-agent'));
  // Once an ack deadline passes, the job chart asks where the agent is and whether its cancel went out (B7, machines/job.withdrawal.ts).
  const withdrawal = new WithdrawalAnswers({
    ...{ registry, shared, deliver, holderLease: (agentId) => agentHolderLease(db, agentId) },
    ...{ leaseTtlMs: config.leaseTtlMs, leaseRenewMs: config.leaseRenewMs, log: log.child({ component: 'withdrawal' }) },
  });
  /** The job's agent lost its socket (`connectionId`, when known), by default with that socket's coordinator: the job waits for a reclaim (FO-2). */
  const disconnectJob = async (job: HeldJob, connectionId?: string, cause: 'agent' | 'coordinator' = 'coordinator') =>
    void (await deliver(job.runId, { type: 'agent.disconnected', jobKey: job.jobKey, agentId: job.agentId, cause, ...(connectionId === undefined ? {} : { connectionId }) }));
  const peers = new PeerSync({
    ...{ shared, exchange, registry, wakeInbox: parts.wakeInbox, pollMs: parts.pollMs, clock, log },
    forgetReads: (what) => {
      if (what !== 'repositories') parts.secrets.service.scopes.invalidate();
      if (what !== 'secrets') parts.repositories.invalidate();
    },
    heldJobs: () => heldJobsOf(supervisor),
    agentLost: disconnectJob,
    // At start, a statement cut off by Postgres is tried again, as the lease's claim is (a stop does not wait).
    clearOwnSessions: (when) => (when === 'start' ? retryingTransient(() => clearSessionsOf(db, me), START_RETRY_WAITS_MS) : clearSessionsOf(db, me)),
  });
  /** Peers are no longer read. */
  const stop = () => peers.stop();
  return { shared, exchange, peers, withdrawal, stop };
}

// ---- intake: durable deliveries, their queue and the pipeline behind it ----

interface IntakeWiring {
  db: Kysely<Schema>;
  config: CompiledConfig;
  registry: Registry;
  createRun: (run: NewRun) => Promise<void>;
  repositories: RepositoryCache;
  traces: DispatchPathTraces;
  now: () => number;
  log: Logger;
  /** Whether a new run starts with a build job (src/caches/build-planner.ts). */
  buildFor?: RunStarterDeps['buildFor'];
}

/** Webhook intake: durable deliveries, the intake queue (embedded or BullMQ) and the pipeline behind it. */
function createIntake(wiring: IntakeWiring) {
  const { db, config, now, log } = wiring;
  const cache = new LockFileCache({ now });
  const metrics = createIntakeMetrics(wiring.registry, { cache, deadDeliveries: () => countDeadDeliveries(db) });
  const sandbox = new IsolatedVmSandbox({ timeoutMs: config.inlineEvalTimeoutMs, memoryLimitMb: 32 });
  const startRuns = createRunStarter({
    ...{ db, createRun: wiring.createRun, sandbox, timeouts: jobTimeoutsOf(config), maxAttempts: config.maxDispatchAttempts, now },
    log: log.child({ component: 'pipeline' }),
    onTriggersMatched: metrics.triggersMatched,
    unresolvedSecrets: (repository, workflow) => unresolvedReferences(db, repository, workflow),
    traces: wiring.traces,
    ...(wiring.buildFor && { buildFor: wiring.buildFor }),
  });
  const process = createDeliveryProcessor({
    db,
    now,
    log: log.child({ component: 'intake' }),
    pipeline: {
      ...{ repository: (name: string) => wiring.repositories.get(name), genericSourceRepository: (source: string) => genericSourceRepository(db, source) },
      ...{ cache, startRuns, log, onLockFile: metrics.lockFile, githubApiUrl: config.githubApiUrl, onPush: (repository: string) => schedules.forget(repository), contributors: new ContributorCache() },
    },
    onProcessed: metrics.processed,
  });
  const record = deliveryRecorder(db);
  const schedules = new ScheduleClock({
    ...{ repositories: () => listRepositories(db), providerFor: (repo) => providerFor(repo, config.githubApiUrl), cache, record },
    ...{ notify: (key) => queue.notify(key), now, log: log.child({ component: 'schedules' }) },
  });
  const worker = config.coordinatorId;
  const queue: DeliveryQueue = config.redisUrl
    ? new BullMqDeliveryQueue({ redisUrl: config.redisUrl, db, process, worker, now, log: log.child({ component: 'bullmq' }) })
    : new EmbeddedDeliveryQueue(db, process, worker, now, log.child({ component: 'intake-queue' }));
  const webhooks: WebhookDeps = {
    db,
    record,
    githubSecrets: config.githubWebhookSecrets,
    now,
    log,
    onAccepted: (key) => queue.notify(key),
    ...(queue.claimAtIntake && queue.processClaimed && { claimAtIntake: (bytes: number) => queue.claimAtIntake?.(bytes) ?? null, processClaimed: (delivery: ClaimedDelivery) => queue.processClaimed?.(delivery) }),
    observe: metrics.observe,
  };
  return {
    queue,
    webhooks,
    async start() {
      await queue.start();
      schedules.start();
    },
    async stop() {
      await schedules.stop();
      await queue.stop();
      sandbox.dispose();
      closeObjectReaders();
    },
  };
}

// ---- HTTP routes, scalers, drain ----

/** The scaler manager (docs/architecture.md#the-scaler), its API, and the sweep of expired agent tokens (docs/protocol.md#tokens). */
async function attachScalers(deps: { config: CompiledConfig; db: Database['db']; clock: Clock; log: Logger; registry: Registry; runtime: Runtime; router: Router }) {
  const { config, clock, runtime } = deps;
  const scalers = await createScalerManager({
    ...{ config, db: deps.db, clock, log: deps.log, metricsRegistry: deps.registry, agents: runtime.registry, dispatcher: runtime.dispatcher },
    ...{ supervisor: runtime.supervisor, deliver: runtime.deliver, epoch: () => runtime.ownership.epoch },
  });
  registerScalerRoutes(deps.router, {
    ...{ scaler: scalers.manager, tracker: scalers.tracker, coordinatorId: config.coordinatorId, now: () => clock.now() },
    ...{ agentsConnected: () => runtime.registry.size, jobsWaiting: () => runtime.dispatcher.waitingCount },
  });
  let stopSweep = () => {};
  return {
    setOrchestratorUrl: (url: string) => scalers.manager.setOrchestratorUrl(url),
    hasPendingDispatch: (agentId: string) => scalers.manager.hasBoundJobWaiting(agentId),
    /** Scaler writes are fenced by the lease, so this runs once the lease is held; waiting jobs then ask again. */
    async start() {
      if (config.scaler.backends.length > 0) await scalers.manager.start();
      void runtime.dispatcher.offer();
      stopSweep = startTokenExpirySweep({ db: deps.db, registry: runtime.registry, now: () => clock.now(), log: deps.log.child({ component: 'token-expiry' }) });
    },
    async stop(options: { keep?: readonly string[] } = {}) {
      stopSweep();
      await scalers.manager.stop(options);
    },
  };
}
