/** The vocabulary the scaler machine and its agent children share (docs/architecture.md#the-scaler). */

export interface Resources {
  cpu: number;
  memoryBytes: number;
}

export interface Binding {
  runId: string;
  jobKey: string;
}

/** `spawning` → `idle` (registered) → `busy` (took a job) → `destroying`; the record goes when destroyed. */
export type ScalerAgentState = 'spawning' | 'idle' | 'busy' | 'destroying';

/** One agent and its reservation. The reservation lives exactly as long as the agent's child actor. */
export interface ScalerAgent {
  agentId: string;
  backend: string;
  labelSet: number;
  resources: Resources;
  state: ScalerAgentState;
  /** The job this spawn is for (SCL-3); a warm-pool spawn has none. */
  bound: Binding | null;
  warm: boolean;
  reservedAt: number;
  /** A spawn that has not registered by then is released (SCL-6). */
  spawnDeadlineAt: number;
  backendRef: string | null;
  registeredAt: number | null;
  /** The one job this single-use agent took (SCL-7). */
  usedBy: Binding | null;
  idleDeadlineAt: number | null;
  endReason: string | null;
}

export interface ScalerTimeouts {
  spawnMs: number;
  /** How long a registered bound agent waits for its job (the stock agent's pendingDispatch idle: 60 s). */
  boundIdleMs: number;
  /** How long a registered unbound agent outside the warm pool idles (5 s). */
  unboundIdleMs: number;
}

export interface Timed {
  at: number;
}
export interface AboutAgent extends Timed {
  agentId: string;
}

/** What happens to one agent, as the host reports it; the scaler forwards each to the agent's child. */
export type AgentReport =
  | ({ type: 'scaler.agent.spawned'; backendRef: string } & AboutAgent)
  | ({ type: 'scaler.agent.spawn_failed'; message: string } & AboutAgent)
  | ({ type: 'scaler.agent.registered' } & AboutAgent)
  | ({ type: 'scaler.agent.assigned'; runId: string; jobKey: string } & AboutAgent)
  | ({ type: 'scaler.agent.finished' } & AboutAgent)
  | ({ type: 'scaler.agent.lost'; reason: string } & AboutAgent)
  | ({ type: 'scaler.agent.destroyed' } & AboutAgent);

/** What the scaler itself tells an agent's child. */
export type AgentCommand =
  /** A warm agent still spawning is kept for this job (SCL-8). */
  | ({ type: 'scaler.agent.bind'; runId: string; jobKey: string } & AboutAgent)
  | ({ type: 'scaler.agent.retire'; reason: string } & AboutAgent)
  /** After a restore: re-arm the deadline of the current state, re-issue a destroy in flight. */
  | ({ type: 'scaler.agent.resume' } & AboutAgent);

export type ScalerAgentEvent = AgentReport | AgentCommand;

/**
 * What a child tells the scaler: its record after every change, and that it has ended. `at` is the
 * time of the host event that caused it; null when the child's own deadline or start caused it.
 */
export type ScalerAgentNotice =
  | { type: 'scaler.agent.changed'; agent: ScalerAgent; at: number | null }
  | { type: 'scaler.agent.ended'; agentId: string; outcome: 'destroyed' | 'spawn_failed'; at: number | null };

export interface SpawnIntent {
  agentId: string;
  backend: string;
  labelSet: number;
  resources: Resources;
  bound: Binding | null;
}

export interface DestroyIntent {
  agentId: string;
  backend: string;
  reason: string;
}

export interface SpawnFailureIntent {
  agentId: string;
  backend: string;
  bound: Binding | null;
  message: string;
}

/** Intents the host performs after the snapshot that caused them is stored (docs/architecture.md#time-durable-deadlines). */
export type ScalerIntent =
  | { type: 'spawnAgent'; params: SpawnIntent }
  /** A reservation ended with its resource: jobs refused "at capacity" ask again (no registry change announces it). */
  | { type: 'offerCapacity'; params: { freedBy: string } }
  | { type: 'destroyAgent'; params: DestroyIntent }
  | { type: 'reportSpawnFailure'; params: SpawnFailureIntent };
